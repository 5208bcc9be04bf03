"""Pieces every sparse-attention package needs: selection recall, paired timing, triton glue.

Used by saga-attention (Atop-N decode) and mage-attention (block-diffusion decode); moved here
so neither copies the other. torch and triton are optional: importing this module needs
neither, each function imports torch when called, and the triton parts exist only where triton
is installed.

- :func:`selection_recall`: ``|I ∩ I_ref| / |I_ref|`` per row of two index selections.
- :func:`time_calls`: every system timed back to back inside each repeat (so a per-repeat
  ratio compares like with like on a loaded machine), with :func:`cuda_graph` to time a CUDA
  step as one graph replay.
- :data:`HAVE_TRITON`, :data:`triton`, :data:`tl`, :func:`triton_available` (compiled on CUDA,
  interpreted on the CPU under ``TRITON_INTERPRET=1``, which must be set before triton is
  imported and only where there is no CUDA device), and :func:`online_softmax_step`, the
  ``@triton.jit`` fold of one block of keys into a running softmax.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = [
    "HAVE_TRITON",
    "cuda_graph",
    "online_softmax_step",
    "selection_recall",
    "time_calls",
    "tl",
    "triton",
    "triton_available",
]

try:  # triton is optional (a GPU extra of the packages that have kernels)
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # pragma: no cover - depends on the environment
    triton = None  # type: ignore[assignment]
    tl = None  # type: ignore[assignment]
    HAVE_TRITON = False


def triton_available(device: Any = "cpu") -> bool:
    """True when triton kernels can run on ``device``: compiled on CUDA, interpreted on CPU."""
    import torch

    if not HAVE_TRITON:
        return False
    if torch.device(device).type == "cuda":
        return True
    return os.environ.get("TRITON_INTERPRET") == "1"


def selection_recall(
    indices: torch.Tensor, ok: torch.Tensor, ref_indices: torch.Tensor, ref_ok: torch.Tensor
) -> torch.Tensor:
    """Recall of a selection against a reference, per row: ``|I ∩ I_ref| / |I_ref|``.

    Rows whose reference is empty count as recall 1.
    """
    import torch

    same = (indices.unsqueeze(-1) == ref_indices.unsqueeze(-2)) & ok.unsqueeze(-1)
    hit = (same.any(-2) & ref_ok).sum(-1).float()
    total = ref_ok.sum(-1).float()
    return torch.where(total > 0, hit / total.clamp(min=1), torch.ones_like(hit))


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _cuda_timed(fn: Callable[[], object]) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=5, rep=25)) / 1e3  # ms -> s (median)


def cuda_graph(fn: Callable[[], object]) -> Callable[[], object] | None:
    """``fn`` captured in a CUDA graph (its replay), or None if it cannot be captured (a host
    sync in it). At batch 1 a sparse step moves so few bytes that launching its ~20 kernels
    one by one would cost more than the memory traffic; a graph launches them as one."""
    import torch

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capturing stream, as capture requires
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        torch.cuda.synchronize()
    except RuntimeError:
        torch.cuda.synchronize()
        return None
    return graph.replay


def time_calls(
    calls: Mapping[str, Callable[[], object]],
    repeats: int,
    cuda: bool = False,
    best_of: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, list[float]]:
    """Time every call once per repeat, back to back (after one warm-up call each): seconds.

    On CUDA each time is triton's ``do_bench`` median. ``best_of`` adds derived systems:
    ``{"gqa-dense": ("gqa-dense-sdpa", ...)}`` is the fastest of those in each repeat."""
    for fn in calls.values():  # warm-up (allocator, thread pool, triton compile)
        fn()
    if cuda:
        import torch

        torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for name in best_of or {}:
        times[name] = []
    for _ in range(repeats):
        for name, fn in calls.items():
            times[name].append(_cuda_timed(fn) if cuda else _timed(fn))
        for name, parts in (best_of or {}).items():
            times[name].append(min(times[p][-1] for p in parts if p in calls))
    return times


if HAVE_TRITON:

    @triton.jit
    def online_softmax_step(q, k, v, ok, m, acc_l, acc, scale):
        """One block of an online softmax: fold ``softmax(q kᵀ · scale) v`` over the block's
        valid tokens (``ok``) into the running max ``m``, sum ``acc_l`` and output ``acc``."""
        logits = tl.dot(q, tl.trans(k)) * scale  # [G, BLOCK]
        logits = tl.where(ok[None, :], logits, float("-inf"))
        m_new = tl.maximum(m, tl.max(logits, axis=1))
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
        p = tl.exp(logits - m_safe[:, None])
        alpha = tl.exp(m - m_safe)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        acc_l = acc_l * alpha + tl.sum(p, axis=1)
        return m_new, acc_l, acc

else:  # pragma: no cover - without triton there is nothing to fold with
    online_softmax_step = None
