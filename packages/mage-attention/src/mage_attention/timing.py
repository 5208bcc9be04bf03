"""Attention time of one denoising block, MAGE against exact and Quest, on synthetic q/k/v.

One layer, batch 1, a prefix of ``L`` cached tokens, a block of ``B`` queries denoised in ``T``
steps (fresh random queries each step). A system's time is the whole block's attention:

- ``exact``: ``T`` exact passes, the faster per repeat of two dense paths (SDPA over the
  concatenated ``[K; K_blk]`` with grouped-query heads, and the grouped matmul of
  :func:`~mage_attention.attention.block_attention`, which never copies the cache);
- ``mage``: the step-1 exact pass that also returns the attention mass, top-``k``, one gather,
  then ``T - 1`` steps over ``k + B`` keys;
- ``quest``: ``T`` steps of page-bound scoring, top-``k``, gather and attention over
  ``k + B`` keys (the page min/max metadata is built before timing: a real cache maintains it
  incrementally as blocks commit).

Every system runs the decoder's own :func:`~mage_attention.decoding.sparse_step`. Systems are
timed back to back inside each repeat (:func:`paperstack.sparse.time_calls`), so per-repeat
ratios are paired. CPU: fp32, ``perf_counter``; CUDA: bf16, triton's ``do_bench`` median, and
the sparse steps through the triton kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from mage_attention.attention import Budget, Policy
from mage_attention.baselines import Exact, Quest
from mage_attention.decoding import sparse_step
from mage_attention.errors import MageError
from mage_attention.mage import Mage
from paperstack.records import Row
from paperstack.sparse import time_calls

__all__ = ["BlockShape", "time_block", "timing_rows"]


@dataclass(frozen=True)
class BlockShape:
    """The timed layer: heads, head size, block size, steps, and ``k = L / k_divisor``."""

    query_heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    block_size: int = 8
    steps: int = 8
    k_divisor: int = 16
    page: int = 16


def _run_block(
    policy: Policy,
    qs: Sequence[torch.Tensor],
    k: torch.Tensor,
    v: torch.Tensor,
    kb: torch.Tensor,
    vb: torch.Tensor,
    backend: str,
) -> Callable[[], object]:
    scaling = qs[0].shape[-1] ** -0.5

    def block() -> object:
        policy.start_block(0)
        out = None
        for t, q in enumerate(qs):
            out = sparse_step(policy, 0, t, q, k, v, kb, vb, scaling, backend)[0]
        return out

    return block


def _sdpa_block(
    qs: Sequence[torch.Tensor], k: torch.Tensor, v: torch.Tensor, kb: torch.Tensor, vb: torch.Tensor
) -> Callable[[], object]:
    def block() -> object:
        out = None
        for q in qs:
            out = F.scaled_dot_product_attention(
                q, torch.cat([k, kb], 2), torch.cat([v, vb], 2), enable_gqa=True
            )
        return out

    return block


@torch.no_grad()
def time_block(
    lengths: Sequence[int],
    repeats: int,
    shape: BlockShape | None = None,
    seed: int = 0,
    device: str = "cpu",
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[int, list[float]]]:
    """``times[system][L]``: seconds per block, one entry per repeat (module doc)."""
    shape = shape or BlockShape()
    if repeats < 2:
        raise MageError(f"repeats: needs at least 2 (paired ratios), got {repeats}")
    cuda = torch.device(device).type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise MageError(f"device: {device} requested but CUDA is not available")
    dtype = torch.bfloat16 if cuda else torch.float32
    backend = "triton" if cuda else "torch"
    g = torch.Generator().manual_seed(seed)
    times: dict[str, dict[int, list[float]]] = {}
    for length in lengths:
        budget = Budget(max(1, length // shape.k_divisor), sinks=4, window=min(64, length // 32))
        budget.check(length)
        if progress:
            progress(f"attention time at L={length}")

        def rand(*size: int) -> torch.Tensor:
            return torch.randn(*size, generator=g).to(device=device, dtype=dtype)

        hq, hkv, d, b = shape.query_heads, shape.kv_heads, shape.head_dim, shape.block_size
        k, v = rand(1, hkv, length, d), rand(1, hkv, length, d)
        kb, vb = rand(1, hkv, b, d), rand(1, hkv, b, d)
        qs = [rand(1, hq, b, d) for _ in range(shape.steps)]
        quest = Quest(budget, shape.page)
        quest._page_bounds(0, k)  # the cache's page metadata, kept up to date outside the step
        calls = {
            "exact-grouped": _run_block(Exact(budget), qs, k, v, kb, vb, backend),
            "exact-sdpa": _sdpa_block(qs, k, v, kb, vb),
            "mage": _run_block(Mage(budget), qs, k, v, kb, vb, backend),
            "quest": _run_block(quest, qs, k, v, kb, vb, backend),
        }
        measured = time_calls(calls, repeats, cuda, {"exact": ("exact-grouped", "exact-sdpa")})
        for name, t in measured.items():
            times.setdefault(name, {})[length] = t
        del calls, k, v
    return times


def timing_rows(
    times: dict[str, dict[int, list[float]]], systems: Sequence[str] = ("exact", "mage", "quest")
) -> list[Row]:
    """Per-repeat rows: ``block_ms`` per system and ``speedup_vs_exact`` (``t_exact / t``)."""
    rows: list[Row] = []
    for name in systems:
        for length, t in times[name].items():
            split = f"L={length}"
            rows.append(
                Row.from_items(name, "block_ms", {f"r{i}": x * 1e3 for i, x in enumerate(t)},
                               split=split, unit="ms")
            )  # fmt: skip
            if name != "exact":
                ref = times["exact"][length]
                ratio = {f"r{i}": e / x for i, (e, x) in enumerate(zip(ref, t, strict=True))}
                rows.append(Row.from_items(name, "speedup_vs_exact", ratio, split=split, unit="x"))
    return rows
