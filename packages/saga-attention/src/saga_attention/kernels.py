"""Triton kernels for SAGA's decode step: scoring, Atop-N selection, sparse gather-attention.

Each kernel sits beside the PyTorch reference it must equal (:mod:`saga_attention.attention`,
:mod:`saga_attention.selection`); the tests run them under ``TRITON_INTERPRET=1`` on the CPU.
On a GPU the same code runs compiled (not measured in this release: no GPU was available).

1. :func:`_score_kernel`, grid ``(B·H_k, ceil(L / BLOCK_L))``: ``s = (Σ_h q_h) · K_kᵀ · scale``
   for a block of cached tokens; ``-inf`` where the token is masked. The only pass that reads
   the whole key cache: ``H_k · L · d`` numbers.
2. :func:`_select_kernel`, grid ``(B·H_k,)``: streams the scores once, keeps those ``≥ τ`` and
   compacts them in position order into a ``cap``-slot buffer (a running offset plus an
   in-block prefix sum). ``τ`` comes from the strided sample (:func:`atop_threshold`); the exact
   top-N of the ``≤ cap`` survivors is a ``torch.topk`` over the buffer.
3. :func:`_sparse_attention_kernel`, grid ``(B·H_q,)``: gathers the ``N`` selected keys of the
   query's key head and values of its value head, and computes ``softmax(q K_Iᵀ·scale) V_I``.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from saga_attention.heads import SagaError
from saga_attention.selection import AtopConfig, atop_threshold

__all__ = [
    "atop_select_triton",
    "available",
    "score_triton",
    "sparse_attention_triton",
    "sparse_decode_triton",
]

try:  # triton is an optional extra
    import triton
    import triton.language as tl

    _HAVE_TRITON = True
except ImportError:  # pragma: no cover - depends on the environment
    triton = None
    tl = None
    _HAVE_TRITON = False


def available(device: torch.device | str = "cpu") -> bool:
    """True when the kernels can run on ``device``: compiled on CUDA, or interpreted on CPU."""
    if not _HAVE_TRITON:
        return False
    if torch.device(device).type == "cuda":
        return True
    return os.environ.get("TRITON_INTERPRET") == "1"


def _require(device: torch.device) -> None:
    if not _HAVE_TRITON:
        raise SagaError(
            "backend 'triton': triton is not installed (pip install saga-attention[triton])"
        )
    if not available(device):
        raise SagaError(
            f"backend 'triton': tensors are on {device}; the kernels need CUDA, or "
            "TRITON_INTERPRET=1 to run interpreted on the CPU"
        )


if _HAVE_TRITON:

    @triton.jit
    def _score_kernel(
        q_ptr,
        k_ptr,
        valid_ptr,
        out_ptr,
        length,
        dim,
        scale,
        BLOCK_L: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        row = tl.program_id(0)
        block = tl.program_id(1)
        offs_l = block * BLOCK_L + tl.arange(0, BLOCK_L)
        offs_d = tl.arange(0, BLOCK_D)
        in_l = offs_l < length
        in_d = offs_d < dim
        q = tl.load(q_ptr + row * dim + offs_d, mask=in_d, other=0.0).to(tl.float32)
        base = row.to(tl.int64) * length * dim
        k = tl.load(
            k_ptr + base + offs_l[:, None].to(tl.int64) * dim + offs_d[None, :],
            mask=in_l[:, None] & in_d[None, :],
            other=0.0,
        ).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1) * scale
        ok = tl.load(valid_ptr + row.to(tl.int64) * length + offs_l, mask=in_l, other=0)
        s = tl.where(ok != 0, s, float("-inf"))
        tl.store(out_ptr + row.to(tl.int64) * length + offs_l, s, mask=in_l)

    @triton.jit
    def _select_kernel(
        s_ptr,
        tau_ptr,
        idx_ptr,
        cand_ptr,
        length,
        cap,
        BLOCK_L: tl.constexpr,
    ):
        row = tl.program_id(0)
        tau = tl.load(tau_ptr + row)
        offset = tl.sum(tl.zeros([BLOCK_L], dtype=tl.int32), axis=0)
        for start in range(0, length, BLOCK_L):
            offs = start + tl.arange(0, BLOCK_L)
            s = tl.load(
                s_ptr + row.to(tl.int64) * length + offs, mask=offs < length, other=float("-inf")
            )
            keep = (s >= tau) & (s > float("-inf"))
            rank = tl.cumsum(keep.to(tl.int32), axis=0) - 1 + offset
            write = keep & (rank < cap)
            dest = row.to(tl.int64) * cap + rank
            tl.store(idx_ptr + dest, offs.to(tl.int64), mask=write)
            tl.store(cand_ptr + dest, s, mask=write)
            offset += tl.sum(keep.to(tl.int32), axis=0)

    @triton.jit
    def _sparse_attention_kernel(
        q_ptr,
        k_ptr,
        v_ptr,
        idx_ptr,
        ok_ptr,
        out_ptr,
        hq,
        hk,
        hv,
        length,
        n,
        dim,
        scale,
        BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        pid = tl.program_id(0)
        b = pid // hq
        h = pid % hq
        kh = h // (hq // hk)
        vh = h // (hq // hv)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        in_n = offs_n < n
        in_d = offs_d < dim
        sel = (b * hk + kh).to(tl.int64) * n + offs_n
        idx = tl.load(idx_ptr + sel, mask=in_n, other=0)
        ok = tl.load(ok_ptr + sel, mask=in_n, other=0) != 0
        ok = ok & in_n
        q = tl.load(q_ptr + pid.to(tl.int64) * dim + offs_d, mask=in_d, other=0.0).to(tl.float32)
        k_rows = (b * hk + kh).to(tl.int64) * length + idx
        k = tl.load(
            k_ptr + k_rows[:, None] * dim + offs_d[None, :],
            mask=ok[:, None] & in_d[None, :],
            other=0.0,
        ).to(tl.float32)
        logits = tl.sum(k * q[None, :], axis=1) * scale
        logits = tl.where(ok, logits, float("-inf"))
        p = tl.exp(logits - tl.max(logits, axis=0))
        p = tl.where(ok, p, 0.0)
        p = p / tl.sum(p, axis=0)
        v_rows = (b * hv + vh).to(tl.int64) * length + idx
        v = tl.load(
            v_ptr + v_rows[:, None] * dim + offs_d[None, :],
            mask=ok[:, None] & in_d[None, :],
            other=0.0,
        ).to(tl.float32)
        out = tl.sum(p[:, None] * v, axis=0)
        tl.store(out_ptr + pid.to(tl.int64) * dim + offs_d, out, mask=in_d)


def _pow2(x: int) -> int:
    return 1 << max(0, (int(x) - 1).bit_length())


def score_triton(
    q_sum: torch.Tensor, keys: torch.Tensor, valid: torch.Tensor, scale: float, block_l: int = 64
) -> torch.Tensor:
    """Scores ``s[R, L] = q_sum[R, d] · keys[R, L, d]ᵀ · scale``, ``-inf`` where not valid."""
    _require(keys.device)
    rows, length, dim = keys.shape
    out = torch.empty(rows, length, dtype=torch.float32, device=keys.device)
    grid: Any = (rows, triton.cdiv(length, block_l))
    _score_kernel[grid](
        q_sum.contiguous(),
        keys.contiguous(),
        valid.to(torch.int8).contiguous(),
        out,
        length,
        dim,
        float(scale),
        BLOCK_L=block_l,
        BLOCK_D=_pow2(dim),
    )
    return out


def atop_select_triton(
    scores: torch.Tensor,
    n: int,
    selection: str = "atop",
    config: AtopConfig | None = None,
    block_l: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-N or Atop-N of ``scores[R, L]`` (``-inf`` = masked) with the select kernel.

    Equal to :func:`saga_attention.selection.atop_n` / :func:`exact_top_n` (as index sets).
    """
    _require(scores.device)
    rows, length = scores.shape
    if n > length:
        raise SagaError(f"top_n: {n} is larger than the context length {length}")
    valid = torch.isfinite(scores)
    if selection == "exact":
        tau = torch.full((rows, 1), float("-inf"), device=scores.device)
        cap = length
    elif selection == "atop":
        tau, cap = atop_threshold(scores, valid, n, config or AtopConfig())
    else:
        raise SagaError(f"selection: must be 'exact' or 'atop', got {selection!r}")
    idx = torch.zeros(rows, cap, dtype=torch.int64, device=scores.device)
    cand = torch.full((rows, cap), float("-inf"), dtype=torch.float32, device=scores.device)
    _select_kernel[(rows,)](
        scores.contiguous(),
        tau.reshape(rows).contiguous().float(),
        idx,
        cand,
        length,
        cap,
        BLOCK_L=block_l,
    )
    values, j = cand.topk(n, dim=-1)
    return idx.gather(-1, j), torch.isfinite(values)


def sparse_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor,
    ok: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """``o[B, H_q, d]`` from the selection ``idx, ok [B, H_k, N]`` (gather-attention kernel)."""
    _require(q.device)
    b, hq, dim = q.shape
    hk, hv, length = k.shape[1], v.shape[1], k.shape[2]
    n = idx.shape[-1]
    out = torch.empty(b, hq, dim, dtype=torch.float32, device=q.device)
    _sparse_attention_kernel[(b * hq,)](
        q.contiguous(),
        k.contiguous(),
        v.contiguous(),
        idx.contiguous(),
        ok.to(torch.int8).contiguous(),
        out,
        hq,
        hk,
        hv,
        length,
        n,
        dim,
        float(scale),
        BLOCK_N=_pow2(n),
        BLOCK_D=_pow2(dim),
    )
    return out.to(q.dtype)


def sparse_decode_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    top_n: int,
    valid: torch.Tensor | None = None,
    scaling: float | None = None,
    selection: str = "atop",
    atop: AtopConfig | None = None,
) -> torch.Tensor:
    """The kernel path of :func:`saga_attention.attention.sparse_decode` (same arguments)."""
    from saga_attention.attention import layout_of

    layout = layout_of(q.unsqueeze(2), k, v)
    b, hq, dim = q.shape
    length = k.shape[2]
    scale = dim**-0.5 if scaling is None else scaling
    if valid is None:
        valid = torch.ones(b, length, dtype=torch.bool, device=q.device)
    if tuple(valid.shape) != (b, length):
        raise SagaError(
            f"valid mask: shape {tuple(valid.shape)} does not match (batch, context) = "
            f"({b}, {length})"
        )
    hk = layout.num_key_heads
    q_sum = q.float().reshape(b, hk, hq // hk, dim).sum(2).reshape(b * hk, dim)
    valid_rows = valid[:, None, :].expand(b, hk, length).reshape(b * hk, length)
    scores = score_triton(q_sum, k.reshape(b * hk, length, dim), valid_rows, scale)
    idx, ok = atop_select_triton(scores, top_n, selection, atop)
    return sparse_attention_triton(q, k, v, idx.view(b, hk, top_n), ok.view(b, hk, top_n), scale)
