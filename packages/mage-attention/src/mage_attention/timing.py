"""Attention time of one denoising block: MAGE against exact attention and Quest.

One layer, batch 1, a prefix of ``L`` cached tokens, a block of ``B`` queries denoised in ``T``
steps, a fixed budget of ``k`` prefix keys (``k = 512``, the paper's, by default). A system's
time is the whole block's attention, ``T`` steps:

- ``exact`` (the baseline): SDPA (flash on a GPU) over the cache, with the block's ``B`` keys
  written in place into the cache's preallocated tail each step, as a serving engine's paged
  cache holds them: no ``torch.cat`` of the cache per step, no materialised logits;
- ``mage``: step 1 runs the exact pass that also returns the attention mass (logits of the
  ``G·B`` block rows over ``L`` keys, the one materialisation MAGE needs to rank keys), keeps
  the top ``k`` (sinks and window included) and gathers them once into a buffer of ``k + B``
  rows; steps ``2..T`` write the block into the buffer's tail and run SDPA over it (on CUDA
  also ``mage-triton``: the split-key kernel of :mod:`mage_attention.kernels` on the gathered
  rows, no tail write);
- ``quest``: every step scores the pages' min/max key bounds (:func:`quest_page_scores`, the
  page metadata built before timing, as a cache maintains it when blocks commit), keeps the
  top ``k`` tokens by page, gathers them and runs SDPA over ``k + B`` rows.

The statistics are :func:`paperstack.bench.compare_speed`'s: warm-up, then repeats that run
every system once in a shuffled order, the median of per-repeat ratios with an order-statistic
interval, and each system's outputs (all ``T`` steps) checked against exact attention's. The
synthetic cache is built so that the check means something: the queries of every step point at
``hot`` planted keys (fewer than ``k`` minus sinks and window, 8 per page, in fewer pages than
Quest keeps) whose logits exceed every other key's by far, so exact attention's mass lies inside
both sparse budgets and a correct sparse path returns exact attention's output up to rounding; a
wrong selection or gather does not.

:func:`cost_model` is the analytic count beside the measurement: dot products of width ``d``
per query row and block, ``exact T(L+B)``, ``MAGE (L+B) + (T-1)(k+B)``, ``Quest T(2L/P + k +
B)`` (two bound products per ``P``-token page every step, then ``k + B`` keys).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from mage_attention.attention import Budget, block_attention, gather_rows, select_top_k
from mage_attention.baselines import quest_page_bounds, quest_page_scores
from mage_attention.errors import MageError
from paperstack.bench import SpeedComparison, compare_speed, median_ci
from paperstack.records import Row

__all__ = ["BlockShape", "bench_block", "block_systems", "cost_model", "cost_rows", "vs_rows"]


@dataclass(frozen=True)
class BlockShape:
    """The timed layer (a Qwen3-8B-like attention layer by default) and the block."""

    query_heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    block_size: int = 8
    page: int = 16
    sinks: int = 4
    window: int = 64
    hot: int = 64  # planted keys the queries point at (module doc)


def cost_model(length: int, steps: int, k: int, block: int, page: int) -> dict[str, float]:
    """Dot products per query row for one block (module doc): ``{system: count}``."""
    return {
        "exact": steps * (length + block),
        "mage": (length + block) + (steps - 1) * (k + block),
        "quest": steps * (2 * length / page + k + block),
    }


def _planted(
    shape: BlockShape, length: int, steps: int, device: str, dtype: torch.dtype, seed: int
) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries, prefix keys/values and block keys/values with ``hot`` planted keys."""
    g = torch.Generator(device=device).manual_seed(seed)  # drawn where it is used: 128K fast
    hq, hkv, d, b = shape.query_heads, shape.kv_heads, shape.head_dim, shape.block_size

    def rand(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=g, device=device)

    k, v = rand(1, hkv, length, d), rand(1, hkv, length, d)
    u = F.normalize(rand(1, hkv, 1, d), dim=-1)  # each KV head's "question" direction
    # plant in whole pages (8 keys each) outside the always-kept sinks and window, so that
    # Quest's pages can hold them too
    per_page = min(8, shape.page)
    first = -(-shape.sinks // shape.page)
    pages = (length - shape.window) // shape.page - first
    chosen = torch.randperm(pages, generator=g, device=device)[: -(-shape.hot // per_page)]
    offsets = torch.arange(per_page, device=device)
    hot = ((chosen + first)[:, None] * shape.page + offsets).flatten()[: shape.hot]
    # the hot keys are one vector per KV head, so their logits are equal in any precision (bf16
    # rounds them alike) and exact attention spreads its mass evenly over them; with |q·u| ≈ 6
    # their logits (≈ 36) exceed the others' (|N(0, 0.6)| < 3 at 128K keys) by e^30 and more
    k[:, :, hot] = 6.0 * math.sqrt(d) * u
    group = hq // hkv
    qs = [
        (0.3 * rand(1, hkv, group, b, d) + 6.0 * u.unsqueeze(2)).reshape(1, hq, b, d)
        for _ in range(steps)
    ]
    kb, vb = rand(1, hkv, b, d), rand(1, hkv, b, d)

    def to(x: torch.Tensor) -> torch.Tensor:
        return x.to(device=device, dtype=dtype)

    return [to(q) for q in qs], to(k), to(v), to(kb), to(vb)


def block_systems(
    shape: BlockShape,
    length: int,
    steps: int,
    k: int,
    device: str = "cpu",
    seed: int = 0,
    triton: bool = False,
) -> dict[str, Callable[[], Any]]:
    """The timed systems for one ``(L, T)``: zero-argument callables returning the ``T`` step
    outputs (module doc). ``triton`` adds ``mage-triton``."""
    cuda = torch.device(device).type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    budget = Budget(k, shape.sinks, shape.window)
    budget.check(length)
    if shape.hot > k - shape.sinks - shape.window:
        raise MageError(f"bench: hot={shape.hot} planted keys do not fit k={k}")
    qs, kp, vp, kb, vb = _planted(shape, length, steps, device, dtype, seed)
    scale = shape.head_dim**-0.5
    b = shape.block_size
    # the cache as an engine holds it: room for the block after the prefix, written in place
    kc = torch.empty(1, shape.kv_heads, length + b, shape.head_dim, device=device, dtype=dtype)
    vc = torch.empty_like(kc)
    kc[:, :, :length], vc[:, :, :length] = kp, vp
    del kp, vp
    k_pre, v_pre = kc[:, :, :length], vc[:, :, :length]
    kmax, kmin = quest_page_bounds(k_pre, shape.page)
    ks = torch.empty(1, shape.kv_heads, k + b, shape.head_dim, device=device, dtype=dtype)
    vs = torch.empty_like(ks)

    def sdpa(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, keys, values, scale=scale, enable_gqa=True)

    def exact() -> list[torch.Tensor]:
        outs = []
        for q in qs:
            kc[:, :, length:], vc[:, :, length:] = kb, vb
            outs.append(sdpa(q, kc, vc))
        return outs

    def mage(kernel: bool = False) -> list[torch.Tensor]:
        out, mass = block_attention(qs[0], k_pre, v_pre, kb, vb, scale, with_mass=True)
        assert mass is not None
        idx = select_top_k(mass, budget)
        ks[:, :, :k], vs[:, :, :k] = gather_rows(k_pre, idx), gather_rows(v_pre, idx)
        outs = [out]
        for q in qs[1:]:
            if kernel:
                from mage_attention.kernels import gathered_attention_triton

                sel_k, sel_v = ks[:, :, :k], vs[:, :, :k]
                outs.append(gathered_attention_triton(q, sel_k, sel_v, kb, vb, scale))
            else:
                ks[:, :, k:], vs[:, :, k:] = kb, vb
                outs.append(sdpa(q, ks, vs))
        return outs

    def quest() -> list[torch.Tensor]:
        outs = []
        for q in qs:
            scores = quest_page_scores(q, kmax, kmin, length, shape.page)
            idx = select_top_k(scores, budget)
            ks[:, :, :k], vs[:, :, :k] = gather_rows(k_pre, idx), gather_rows(v_pre, idx)
            ks[:, :, k:], vs[:, :, k:] = kb, vb
            outs.append(sdpa(q, ks, vs))
        return outs

    systems: dict[str, Callable[[], Any]] = {"exact": exact, "mage": mage, "quest": quest}
    if triton:
        systems["mage-triton"] = lambda: mage(kernel=True)
    return systems


def bench_block(
    shape: BlockShape,
    length: int,
    steps: int,
    k: int,
    repeats: int,
    device: str = "cpu",
    seed: int = 0,
    triton: bool = False,
    budget_s: float | None = None,
    tolerance: float | None = None,
) -> SpeedComparison:
    """:func:`paperstack.bench.compare_speed` of :func:`block_systems` against exact."""
    cuda = torch.device(device).type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise MageError(f"device: {device} requested but CUDA is not available")
    systems = block_systems(shape, length, steps, k, device, seed, triton)
    tol = tolerance if tolerance is not None else (3e-2 if cuda else 1e-3)
    return compare_speed(
        systems, baseline="exact", repeats=repeats, warmup=2, check=tol,
        sync=torch.cuda.synchronize if cuda else None, seed=seed, budget_s=budget_s,
        min_repeats=min(6, repeats),
    )  # fmt: skip


def vs_rows(cmp: SpeedComparison, system: str, other: str, split: str) -> list[Row]:
    """``speedup_vs_<other>`` of ``system``: the median of per-repeat ``t_other / t_system``
    (both timed in the same repeat) and its order-statistic interval."""
    ratios = [o / s for o, s in zip(cmp.times[other], cmp.times[system], strict=True)]
    med, (lo, hi) = median_ci(ratios)
    return [Row(system=system, metric=f"speedup_vs_{other}", value=med, ci95=(lo, hi),
                n=len(ratios), split=split, unit="x")]  # fmt: skip


def cost_rows(
    length: int, steps: int, k: int, shape: BlockShape, split: str, systems: Sequence[str]
) -> list[Row]:
    """The cost model's predicted speed-ups (exact counts, no interval) beside the measured."""
    cost = cost_model(length, steps, k, shape.block_size, shape.page)
    rows = [
        Row(system=s, metric="model_speedup_vs_exact", value=cost["exact"] / cost[s], split=split,
            unit="x")
        for s in systems if s in cost and s != "exact"
    ]  # fmt: skip
    rows.append(Row(system="mage", metric="model_speedup_vs_quest",
                    value=cost["quest"] / cost["mage"], split=split, unit="x"))  # fmt: skip
    return rows
