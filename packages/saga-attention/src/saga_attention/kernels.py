"""Triton kernels for SAGA's decode step, and a flash-decoding dense baseline in the same tiling.

Each kernel sits beside the PyTorch reference it must equal (:mod:`saga_attention.attention`,
:mod:`saga_attention.selection`); the tests run them under ``TRITON_INTERPRET=1`` on the CPU,
and the gpu-marked tests and ``benchmarks/gpu.sh`` compiled on CUDA (not run in this release:
no GPU was lent). Every launch is parallel over the sequence, and nothing waits on the host,
so a decode step can be captured in a CUDA graph.

The sparse step (:func:`sparse_decode_triton`), per key head ``k``:

1. :func:`_score_kernel`, grid ``(B·H_k, L / BLOCK_L)``: ``s = (Σ_{h∈grp(k)} q_h) K_kᵀ · scale``
   for one block of tokens; ``-inf`` where masked. The only pass over the whole key cache:
   ``H_k · L · d`` numbers.
2. Threshold ``τ`` from the strided sample (:func:`~saga_attention.selection.atop_threshold`,
   torch ops of static shape on ``L / stride`` scores).
3. Split select: :func:`_count_kernel`, grid ``(B·H_k, L / CHUNK)``, counts the survivors
   ``s ≥ τ`` of each chunk; a prefix sum over the chunk counts gives each chunk its offset;
   :func:`_compact_kernel` (same grid) writes each chunk's survivors, in position order, to
   their slots of a ``cap``-slot buffer. Exact top-``N`` of the ``≤ cap`` survivors is a
   ``torch.topk`` over the buffer.
4. :func:`_gather_attention_kernel`, grid ``(B·H_f,)`` with ``H_f = max(H_k, H_v)``: the query
   heads of one fine group share a key head and a value head; the kernel gathers the ``N``
   selected keys and values once for all of them and computes ``softmax(q K_Iᵀ·scale) V_I``
   with an online softmax over blocks of ``N`` (fused gather + softmax + PV).

The dense baseline (:func:`dense_decode_triton`) is flash-decoding: grid ``(B·H_f, splits)``,
each program streams one chunk of the cache for its query group with an online softmax and
writes a partial (max, sum, output); the partials are merged in torch.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from paperstack.sparse import HAVE_TRITON, online_softmax_step, tl, triton, triton_available
from saga_attention.heads import HeadLayout, SagaError
from saga_attention.selection import AtopConfig, atop_threshold

__all__ = [
    "atop_select_triton",
    "available",
    "dense_decode_triton",
    "gather_attention_triton",
    "score_triton",
    "sparse_attention_triton",
    "sparse_decode_triton",
]

_HAVE_TRITON = HAVE_TRITON


def available(device: torch.device | str = "cpu") -> bool:
    """True when the kernels can run on ``device``: compiled on CUDA, or interpreted on CPU."""
    return triton_available(device)


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
    def _count_kernel(
        s_ptr,
        tau_ptr,
        count_ptr,
        length,
        chunks,
        CHUNK: tl.constexpr,
        BLOCK_L: tl.constexpr,
    ):
        row = tl.program_id(0)
        chunk = tl.program_id(1)
        tau = tl.load(tau_ptr + row)
        total = tl.sum(tl.zeros([BLOCK_L], dtype=tl.int32), axis=0)
        for start in range(0, CHUNK, BLOCK_L):
            offs = chunk * CHUNK + start + tl.arange(0, BLOCK_L)
            s = tl.load(
                s_ptr + row.to(tl.int64) * length + offs, mask=offs < length, other=float("-inf")
            )
            keep = (s >= tau) & (s > float("-inf"))
            total += tl.sum(keep.to(tl.int32), axis=0)
        tl.store(count_ptr + row * chunks + chunk, total)

    @triton.jit
    def _compact_kernel(
        s_ptr,
        tau_ptr,
        offset_ptr,
        idx_ptr,
        cand_ptr,
        length,
        chunks,
        cap,
        CHUNK: tl.constexpr,
        BLOCK_L: tl.constexpr,
    ):
        row = tl.program_id(0)
        chunk = tl.program_id(1)
        tau = tl.load(tau_ptr + row)
        offset = tl.load(offset_ptr + row * chunks + chunk)
        for start in range(0, CHUNK, BLOCK_L):
            offs = chunk * CHUNK + start + tl.arange(0, BLOCK_L)
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
    def _gather_attention_kernel(
        q_ptr,
        k_ptr,
        v_ptr,
        idx_ptr,
        ok_ptr,
        out_ptr,
        hq,
        hk,
        hv,
        hf,
        length,
        n,
        dim,
        scale,
        GROUP: tl.constexpr,
        BLOCK_G: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        pid = tl.program_id(0)
        b = pid // hf
        f = pid % hf
        kh = f * hk // hf
        vh = f * hv // hf
        offs_g = tl.arange(0, BLOCK_G)
        offs_d = tl.arange(0, BLOCK_D)
        in_g = offs_g < GROUP
        in_d = offs_d < dim
        heads = f * GROUP + offs_g  # the query heads of this fine group
        q = tl.load(
            q_ptr + (b * hq + heads[:, None]).to(tl.int64) * dim + offs_d[None, :],
            mask=in_g[:, None] & in_d[None, :],
            other=0.0,
        ).to(tl.float32)
        m = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
        acc_l = tl.zeros([BLOCK_G], dtype=tl.float32)
        acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
        sel_base = (b * hk + kh).to(tl.int64) * n
        for start in range(0, n, BLOCK_N):
            offs_n = start + tl.arange(0, BLOCK_N)
            in_n = offs_n < n
            idx = tl.load(idx_ptr + sel_base + offs_n, mask=in_n, other=0)
            ok = (tl.load(ok_ptr + sel_base + offs_n, mask=in_n, other=0) != 0) & in_n
            k_rows = (b * hk + kh).to(tl.int64) * length + idx
            k = tl.load(
                k_ptr + k_rows[:, None] * dim + offs_d[None, :],
                mask=ok[:, None] & in_d[None, :],
                other=0.0,
            ).to(tl.float32)
            v_rows = (b * hv + vh).to(tl.int64) * length + idx
            v = tl.load(
                v_ptr + v_rows[:, None] * dim + offs_d[None, :],
                mask=ok[:, None] & in_d[None, :],
                other=0.0,
            ).to(tl.float32)
            m, acc_l, acc = online_softmax_step(q, k, v, ok, m, acc_l, acc, scale)
        out = acc / tl.where(acc_l > 0, acc_l, 1.0)[:, None]
        tl.store(
            out_ptr + (b * hq + heads[:, None]).to(tl.int64) * dim + offs_d[None, :],
            out,
            mask=in_g[:, None] & in_d[None, :],
        )

    @triton.jit
    def _dense_split_kernel(
        q_ptr,
        k_ptr,
        v_ptr,
        valid_ptr,
        m_ptr,
        l_ptr,
        acc_ptr,
        hq,
        hk,
        hv,
        hf,
        length,
        splits,
        dim,
        scale,
        CHUNK: tl.constexpr,
        GROUP: tl.constexpr,
        BLOCK_G: tl.constexpr,
        BLOCK_L: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        pid = tl.program_id(0)
        split = tl.program_id(1)
        b = pid // hf
        f = pid % hf
        kh = f * hk // hf
        vh = f * hv // hf
        offs_g = tl.arange(0, BLOCK_G)
        offs_d = tl.arange(0, BLOCK_D)
        in_g = offs_g < GROUP
        in_d = offs_d < dim
        heads = f * GROUP + offs_g
        q = tl.load(
            q_ptr + (b * hq + heads[:, None]).to(tl.int64) * dim + offs_d[None, :],
            mask=in_g[:, None] & in_d[None, :],
            other=0.0,
        ).to(tl.float32)
        m = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
        acc_l = tl.zeros([BLOCK_G], dtype=tl.float32)
        acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
        k_base = (b * hk + kh).to(tl.int64) * length * dim
        v_base = (b * hv + vh).to(tl.int64) * length * dim
        for start in range(0, CHUNK, BLOCK_L):
            offs_l = split * CHUNK + start + tl.arange(0, BLOCK_L)
            in_l = offs_l < length
            ok = tl.load(valid_ptr + b.to(tl.int64) * length + offs_l, mask=in_l, other=0)
            ok = (ok != 0) & in_l
            k = tl.load(
                k_ptr + k_base + offs_l[:, None].to(tl.int64) * dim + offs_d[None, :],
                mask=in_l[:, None] & in_d[None, :],
                other=0.0,
            ).to(tl.float32)
            v = tl.load(
                v_ptr + v_base + offs_l[:, None].to(tl.int64) * dim + offs_d[None, :],
                mask=in_l[:, None] & in_d[None, :],
                other=0.0,
            ).to(tl.float32)
            m, acc_l, acc = online_softmax_step(q, k, v, ok, m, acc_l, acc, scale)
        part = ((b * hq + heads) * splits + split).to(tl.int64)
        tl.store(m_ptr + part, m, mask=in_g)
        tl.store(l_ptr + part, acc_l, mask=in_g)
        tl.store(
            acc_ptr + part[:, None] * dim + offs_d[None, :], acc, mask=in_g[:, None] & in_d[None, :]
        )


def _pow2(x: int) -> int:
    return 1 << max(0, (int(x) - 1).bit_length())


def _fine_groups(layout: HeadLayout) -> tuple[int, int]:
    """``(H_f, G)``: the finer of the key and value head groupings and its query heads each.

    The kernels give one program the query heads that share both a key head and a value
    head, which needs one head count to divide the other.
    """
    hk, hv = layout.num_key_heads, layout.num_value_heads
    if max(hk, hv) % min(hk, hv):
        raise SagaError(
            f"triton kernels: H_k={hk} and H_v={hv} must divide one another (one fine group of "
            "query heads per program)"
        )
    hf = max(hk, hv)
    return hf, layout.num_query_heads // hf


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
    chunk: int = 1024,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-N or Atop-N of ``scores[R, L]`` (``-inf`` = masked) with the split select.

    Equal to :func:`saga_attention.selection.atop_n` / :func:`exact_top_n` (as index sets).
    """
    _require(scores.device)
    rows, length = scores.shape
    if n > length:
        raise SagaError(f"top_n: {n} is larger than the context length {length}")
    chunk = max(block_l, (chunk // block_l) * block_l)
    valid = torch.isfinite(scores)
    if selection == "exact":
        tau = torch.full((rows, 1), float("-inf"), device=scores.device)
        cap = length
    elif selection == "atop":
        tau, cap = atop_threshold(scores, valid, n, config or AtopConfig())
    else:
        raise SagaError(f"selection: must be 'exact' or 'atop', got {selection!r}")
    chunks = triton.cdiv(length, chunk)
    tau = tau.reshape(rows).contiguous().float()
    scores = scores.contiguous()
    counts = torch.empty(rows, chunks, dtype=torch.int32, device=scores.device)
    grid: Any = (rows, chunks)
    _count_kernel[grid](scores, tau, counts, length, chunks, CHUNK=chunk, BLOCK_L=block_l)
    offsets = (counts.cumsum(-1) - counts).to(torch.int32).contiguous()
    idx = torch.zeros(rows, cap, dtype=torch.int64, device=scores.device)
    cand = torch.full((rows, cap), float("-inf"), dtype=torch.float32, device=scores.device)
    _compact_kernel[grid](
        scores, tau, offsets, idx, cand, length, chunks, cap, CHUNK=chunk, BLOCK_L=block_l
    )
    values, j = cand.topk(n, dim=-1)
    return idx.gather(-1, j), torch.isfinite(values)


def gather_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor,
    ok: torch.Tensor,
    scale: float,
    block_n: int = 64,
) -> torch.Tensor:
    """``o[B, H_q, d]`` from the selection ``idx, ok [B, H_k, N]``: fused gather + softmax + PV."""
    from saga_attention.attention import layout_of

    _require(q.device)
    layout = layout_of(q.unsqueeze(2), k, v)
    hf, group = _fine_groups(layout)
    b, hq, dim = q.shape
    hk, hv, length = k.shape[1], v.shape[1], k.shape[2]
    n = idx.shape[-1]
    out = torch.empty(b, hq, dim, dtype=torch.float32, device=q.device)
    _gather_attention_kernel[(b * hf,)](
        q.contiguous(),
        k.contiguous(),
        v.contiguous(),
        idx.contiguous(),
        ok.to(torch.int8).contiguous(),
        out,
        hq,
        hk,
        hv,
        hf,
        length,
        n,
        dim,
        float(scale),
        GROUP=group,
        BLOCK_G=max(16, _pow2(group)),
        BLOCK_N=max(16, min(block_n, _pow2(n))),
        BLOCK_D=max(16, _pow2(dim)),
    )
    return out.to(q.dtype)


#: The 0.1 name of the gather-attention step.
sparse_attention_triton = gather_attention_triton


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
    return gather_attention_triton(q, k, v, idx.view(b, hk, top_n), ok.view(b, hk, top_n), scale)


def dense_decode_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    valid: torch.Tensor | None = None,
    scaling: float | None = None,
    chunk: int | None = None,
    block_l: int = 64,
) -> torch.Tensor:
    """Dense decode, flash-decoding style: the cache split into chunks read in parallel, each
    with an online softmax, then the partials merged: ``o = Σ_s e^{m_s - m} acc_s / Σ_s e^{m_s
    - m} l_s``. Any ``H_k``/``H_v`` whose counts divide one another (GQA and SAGA alike)."""
    from saga_attention.attention import layout_of

    _require(q.device)
    layout = layout_of(q.unsqueeze(2), k, v)
    hf, group = _fine_groups(layout)
    b, hq, dim = q.shape
    length = k.shape[2]
    scale = dim**-0.5 if scaling is None else scaling
    if valid is None:
        valid = torch.ones(b, length, dtype=torch.bool, device=q.device)
    if chunk is None:  # about 4 programs per SM-sized slice of a long cache
        chunk = max(block_l, min(4096, _pow2(math.ceil(length / 64))))
    chunk = max(block_l, (chunk // block_l) * block_l)
    splits = triton.cdiv(length, chunk)
    m = torch.empty(b, hq, splits, dtype=torch.float32, device=q.device)
    lsum = torch.empty_like(m)
    acc = torch.empty(b, hq, splits, dim, dtype=torch.float32, device=q.device)
    grid: Any = (b * hf, splits)
    _dense_split_kernel[grid](
        q.contiguous(),
        k.contiguous(),
        v.contiguous(),
        valid.to(torch.int8).contiguous(),
        m,
        lsum,
        acc,
        hq,
        layout.num_key_heads,
        layout.num_value_heads,
        hf,
        length,
        splits,
        dim,
        float(scale),
        CHUNK=chunk,
        GROUP=group,
        BLOCK_G=max(16, _pow2(group)),
        BLOCK_L=max(16, block_l),
        BLOCK_D=max(16, _pow2(dim)),
    )
    top = m.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    w = torch.exp(m - top)  # empty splits have m = -inf -> weight 0
    out = (w.unsqueeze(-1) * acc).sum(2) / (w * lsum).sum(-1, keepdim=True).clamp_min(1e-30)
    return out.to(q.dtype)
