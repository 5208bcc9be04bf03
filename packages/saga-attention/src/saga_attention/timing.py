"""Decode-step attention time and bytes against the context length, for every system at once.

One decode step of one layer, batch 1, float32 on the CPU (PyTorch path), with the head layout
of a mid-size model (``H_q = 32``, ``d = 128``; GQA ``H_kv = 8``; SAGA ``H_k = 2, H_v = 8``,
the notes' example). The systems are timed back to back inside each repeat, on the same cache
contents, so a ratio compares like with like even on a loaded machine:

- ``gqa-dense``: the faster of SDPA (``enable_gqa``) and :func:`grouped_dense_decode`
  (no cache copy) - the strongest dense baseline we have, chosen per repeat;
- ``gqa-atop`` / ``saga-atop``: :func:`sparse_decode` with Atop-N (``N = 64``);
- ``saga-dense``: :func:`grouped_dense_decode` on the SAGA cache.

Bytes are the analytic cache reads of :meth:`HeadLayout.decode_bytes` (bf16, 2 bytes/number).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from saga_attention.attention import grouped_dense_decode, sparse_decode
from saga_attention.heads import HeadLayout, SagaError
from saga_attention.selection import AtopConfig

__all__ = ["DecodeShape", "TimingResult", "time_decode"]


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


def _sdpa_gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, enable_gqa=True).squeeze(2)


def _timed(fn: Callable[[], object], cuda: bool) -> float:
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _calls(
    shape: DecodeShape,
    length: int,
    g: torch.Generator,
    key_heads: Sequence[int],
    device: str,
    atop: AtopConfig,
) -> dict[str, Callable[[], object]]:
    """One closure per system over caches of ``length`` tokens (random, fixed by ``g``)."""
    hq, d, hkv = shape.query_heads, shape.head_dim, shape.gqa_kv_heads
    q = torch.randn(1, hq, d, generator=g).to(device)
    k = torch.randn(1, hkv, length, d, generator=g).to(device)
    v = torch.randn(1, hkv, length, d, generator=g).to(device)
    # SAGA's cache: the first H_k key heads of the same keys, H_v value heads
    ks = k[:, : shape.saga_key_heads].contiguous()
    if shape.saga_value_heads <= hkv:
        vs = v[:, : shape.saga_value_heads].contiguous()
    else:
        vs = torch.randn(1, shape.saga_value_heads, length, d, generator=g).to(device)
    n = shape.top_n
    calls: dict[str, Callable[[], object]] = {
        "gqa-dense-sdpa": lambda: _sdpa_gqa(q, k, v),
        "gqa-dense-grouped": lambda: grouped_dense_decode(q, k, v),
        "gqa-atop": lambda: sparse_decode(q, k, v, n, atop=atop),
        "saga-dense": lambda: grouped_dense_decode(q, ks, vs),
        "saga-atop": lambda: sparse_decode(q, ks, vs, n, atop=atop),
    }
    for h in key_heads:
        kh = torch.randn(1, h, length, d, generator=g).to(device)
        calls[f"saga-atop-hk{h}"] = functools.partial(sparse_decode, q, kh, vs, n, atop=atop)
    if torch.device(device).type == "cuda":
        from saga_attention.kernels import sparse_decode_triton

        calls["saga-atop-triton"] = lambda: sparse_decode_triton(q, ks, vs, n, atop=atop)
    return calls


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
    bench's sweep over ``H_k``. On ``device="cuda"`` the triton kernels join as
    ``saga-atop-triton`` (the GPU variant; not measured in this release).
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
    names = [
        "gqa-dense",
        "gqa-dense-sdpa",
        "gqa-dense-grouped",
        "gqa-atop",
        "saga-dense",
        "saga-atop",
        *[f"saga-atop-hk{h}" for h in key_heads],
    ]
    if cuda:
        names.append("saga-atop-triton")
    times: dict[str, dict[int, list[float]]] = {n: {} for n in names}
    for length in contexts:
        if progress:
            progress(f"decode timing at L={length}")
        calls = _calls(shape, length, g, key_heads, device, atop)
        for fn in calls.values():  # warm-up (allocator, thread pool)
            fn()
        for name in names:
            times[name][length] = []
        for _ in range(repeats):
            for name, fn in calls.items():
                times[name][length].append(_timed(fn, cuda))
            best = min(times["gqa-dense-sdpa"][length][-1], times["gqa-dense-grouped"][length][-1])
            times["gqa-dense"][length].append(best)
        del calls  # frees this context's caches before the next, larger one
    return TimingResult(times=times, shape=shape)
