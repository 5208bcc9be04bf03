"""Decode-step attention time against the context length, for every system at once.

One decode step of one layer, batch 1, with the head layout of a mid-size model
(``H_q = 32``, ``d = 128``; GQA ``H_kv = 8``; SAGA ``H_k = 2, H_v = 8``, the notes' example).
The systems are timed back to back inside each repeat, on the same cache contents, so a
per-repeat ratio compares like with like even on a loaded machine:

- ``gqa-dense``: the faster, per repeat, of every dense GQA path measured (CPU: SDPA with
  ``enable_gqa`` and :func:`grouped_dense_decode`, which never copies the cache; CUDA: SDPA
  in bf16 and the flash-decoding triton kernel) - the strongest dense baseline we have;
- ``gqa-atop`` / ``saga-atop``: the sparse step with Atop-N (``N = 64``): the PyTorch path on
  the CPU, the triton kernels on CUDA;
- ``saga-dense``: dense decode on the SAGA cache.

CPU: fp32 caches, ``time.perf_counter`` around one call. CUDA: bf16 caches, every system
captured in a CUDA graph where it can be (:func:`cuda_graph`), ``triton.testing.do_bench`` (its
median over many calls, L2 flushed) per system and repeat.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from paperstack.records import Row
from paperstack.sparse import cuda_graph, time_calls
from saga_attention.attention import grouped_dense_decode, sparse_decode
from saga_attention.heads import HeadLayout, SagaError
from saga_attention.selection import AtopConfig

__all__ = ["DecodeShape", "TimingResult", "cuda_graph", "time_calls", "time_decode"]


@dataclass(frozen=True)
class DecodeShape:
    """The head layout of the timed layer and the sparse budget."""

    query_heads: int = 32
    gqa_kv_heads: int = 8
    saga_key_heads: int = 2
    saga_value_heads: int = 8
    head_dim: int = 128
    top_n: int = 64

    def layouts(self) -> dict[str, HeadLayout]:
        gqa = HeadLayout(self.query_heads, self.gqa_kv_heads, self.gqa_kv_heads, self.head_dim)
        saga = HeadLayout(
            self.query_heads, self.saga_key_heads, self.saga_value_heads, self.head_dim
        )
        return {"gqa": gqa, "saga": saga}


@dataclass
class TimingResult:
    """``times[system][context]``: seconds per decode step, one entry per repeat."""

    times: dict[str, dict[int, list[float]]]
    shape: DecodeShape

    def rows(
        self,
        systems: Sequence[str] | None = None,
        ratios: Mapping[str, str] | None = None,
        metric: str = "decode_ms",
    ) -> list[Row]:
        """Per-repeat rows: ``decode_ms`` of each system, and for each ``metric: baseline`` of
        ``ratios`` the per-repeat speedup ``t_baseline / t_system`` (paired by repeat)."""
        rows: list[Row] = []
        for name in systems or list(self.times):
            for length, t in self.times[name].items():
                split = f"L={length}"
                ms = {f"r{i}": x * 1e3 for i, x in enumerate(t)}
                rows.append(Row.from_items(name, metric, ms, split=split, unit="ms"))
                for ratio_metric, base in (ratios or {}).items():
                    if base == name or base not in self.times:
                        continue
                    ref = self.times[base][length]
                    per = {f"r{i}": b / x for i, (b, x) in enumerate(zip(ref, t, strict=True))}
                    rows.append(Row.from_items(name, ratio_metric, per, split=split, unit="x"))
        return rows


def _sdpa_gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, enable_gqa=True).squeeze(2)


def _calls(
    shape: DecodeShape,
    length: int,
    g: torch.Generator,
    key_heads: Sequence[int],
    device: str,
    atop: AtopConfig,
) -> tuple[dict[str, Callable[[], object]], dict[str, tuple[str, ...]]]:
    """One closure per system over caches of ``length`` tokens (random, fixed by ``g``)."""
    cuda = torch.device(device).type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    hq, d, hkv = shape.query_heads, shape.head_dim, shape.gqa_kv_heads

    def rand(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=g).to(device=device, dtype=dtype)

    q = rand(1, hq, d)
    k = rand(1, hkv, length, d)
    v = rand(1, hkv, length, d)
    # SAGA's cache: the first H_k key heads of the same keys, H_v value heads
    ks = k[:, : shape.saga_key_heads].contiguous()
    vs = v[:, : shape.saga_value_heads].contiguous() if shape.saga_value_heads <= hkv else None
    if vs is None:
        vs = rand(1, shape.saga_value_heads, length, d)
    n = shape.top_n
    calls: dict[str, Callable[[], object]] = {"gqa-dense-sdpa": lambda: _sdpa_gqa(q, k, v)}
    if cuda:
        from saga_attention.kernels import dense_decode_triton, sparse_decode_triton

        calls["gqa-dense-triton"] = lambda: dense_decode_triton(q, k, v)
        calls["gqa-atop"] = lambda: sparse_decode_triton(q, k, v, n, atop=atop)
        calls["saga-dense"] = lambda: dense_decode_triton(q, ks, vs)
        calls["saga-atop"] = lambda: sparse_decode_triton(q, ks, vs, n, atop=atop)
        calls["saga-atop-torch"] = lambda: sparse_decode(q, ks, vs, n, atop=atop)
        sparse: Callable[..., object] = sparse_decode_triton
        dense_parts: tuple[str, ...] = ("gqa-dense-sdpa", "gqa-dense-triton")
    else:
        calls["gqa-dense-grouped"] = lambda: grouped_dense_decode(q, k, v)
        calls["gqa-atop"] = lambda: sparse_decode(q, k, v, n, atop=atop)
        calls["saga-dense"] = lambda: grouped_dense_decode(q, ks, vs)
        calls["saga-atop"] = lambda: sparse_decode(q, ks, vs, n, atop=atop)
        sparse = sparse_decode
        dense_parts = ("gqa-dense-sdpa", "gqa-dense-grouped")
    for h in key_heads:
        if hq % h:
            raise SagaError(f"--key-heads {h}: does not divide H_q={hq}")
        kh = rand(1, h, length, d)
        calls[f"saga-atop-hk{h}"] = functools.partial(sparse, q, kh, vs, n, atop=atop)
    if cuda:
        # every CUDA system is timed as a graph replay where it can be captured (the same
        # treatment for baselines and method); the eager triton step is kept beside it
        calls["saga-atop-eager"] = calls["saga-atop"]
        for name in [n for n in calls if n not in ("saga-atop-eager", "saga-atop-torch")]:
            replay = cuda_graph(calls[name])
            if replay is not None:
                calls[name] = replay
    return calls, {"gqa-dense": dense_parts}


@torch.no_grad()
def time_decode(
    contexts: Sequence[int],
    repeats: int = 5,
    shape: DecodeShape | None = None,
    seed: int = 0,
    key_heads: Sequence[int] = (),
    progress: Callable[[str], None] | None = None,
    device: str = "cpu",
) -> TimingResult:
    """Time one decode step per system and context (see the module docstring).

    ``key_heads`` adds ``saga-atop-hk{H}`` systems (SAGA sparse with other ``H_k``) for the
    bench's sweep over ``H_k``.
    """
    shape = shape or DecodeShape()
    if repeats < 1:
        raise SagaError(f"repeats: must be >= 1, got {repeats}")
    for length in contexts:
        if length < shape.top_n:
            raise SagaError(f"context: {length} is smaller than top_n={shape.top_n}")
    g = torch.Generator().manual_seed(seed)
    atop = AtopConfig()
    cuda = torch.device(device).type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SagaError(f"device: {device} requested but CUDA is not available")
    times: dict[str, dict[int, list[float]]] = {}
    for length in contexts:
        if progress:
            progress(f"decode timing at L={length}")
        calls, best_of = _calls(shape, length, g, key_heads, device, atop)
        for name, t in time_calls(calls, repeats, cuda, best_of).items():
            times.setdefault(name, {})[length] = t
        del calls  # frees this context's caches before the next, larger one
    return TimingResult(times=times, shape=shape)
