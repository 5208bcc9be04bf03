"""A triton kernel for MAGE's sparse step: a block's queries over gathered keys and the block.

The work of one step is small and wide: ``b·H_kv`` query groups (``R = G·B`` rows each: ``G``
query heads of a KV head, ``B`` block queries), each over ``n = k`` selected prefix rows plus the
block's ``B`` keys. One program per group (0.2's grid) is 8 programs at batch 1 with 8 KV heads,
on a GPU of 132 SMs: 6% of it. So the keys are **split** (flash-decoding): the grid is
``(b·H_kv, S)``, program ``(g, s)`` folds the ``s``-th chunk of the ``n + B`` keys into a partial
online softmax (:func:`paperstack.sparse.online_softmax_step`): running max ``m_s``, sum ``l_s``
and unnormalised output ``a_s`` per row; a second kernel (one program per group) reduces them,

    M = max_s m_s,    o = Σ_s e^{m_s - M} a_s / Σ_s e^{m_s - M} l_s,

which is the softmax over all ``n + B`` keys exactly (up to float rounding). ``S`` is chosen
(:func:`plan_splits`) so the grid holds about two programs per SM without chunks shorter than
one tile. The key index space is ``[0, n)`` for the selected rows, either a contiguous buffer
``K_sel[k]`` (MAGE gathers it once per block) or, with ``idx``, rows ``K[idx]`` read straight
from the cache (a per-step selection such as Quest's needs no separate gather), then
``[n, n + B)`` for the block's own keys.

    o = softmax(q [K_sel; K_blk]ᵀ · s) [V_sel; V_blk]

It equals :func:`mage_attention.attention.block_attention` on the same inputs; the tests run it
interpreted on the CPU (``TRITON_INTERPRET=1``, set only where there is no CUDA device), for one
and for several splits, and compiled on CUDA (gpu-marked).
"""

from __future__ import annotations

from typing import Any

import torch

from mage_attention.errors import MageError
from paperstack.sparse import HAVE_TRITON, online_softmax_step, tl, triton, triton_available

__all__ = ["gathered_attention_triton", "plan_splits"]

if HAVE_TRITON:

    @triton.jit
    def _split_kernel(
        q_ptr,
        ks_ptr,
        vs_ptr,
        idx_ptr,
        kb_ptr,
        vb_ptr,
        m_ptr,
        l_ptr,
        acc_ptr,
        rows,
        n,
        src_len,
        blk,
        dim,
        chunk,
        splits,
        scale,
        GATHER: tl.constexpr,
        BLOCK_R: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        head = tl.program_id(0).to(tl.int64)  # batch * H_kv + kv head
        split = tl.program_id(1)
        offs_r = tl.arange(0, BLOCK_R)
        offs_d = tl.arange(0, BLOCK_D)
        in_r = offs_r < rows
        in_d = offs_d < dim
        q_rows = (head * rows + offs_r)[:, None] * dim + offs_d[None, :]
        q = tl.load(q_ptr + q_rows, mask=in_r[:, None] & in_d[None, :], other=0.0).to(tl.float32)
        acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)  # running output, sum and max
        acc_l = tl.zeros([BLOCK_R], dtype=tl.float32)
        m = acc_l - float("inf")
        total = n + blk
        lo = split * chunk
        hi = tl.minimum(lo + chunk, total)
        for start in range(lo, hi, BLOCK_N):
            offs_n = start + tl.arange(0, BLOCK_N)
            ok = offs_n < hi
            sel = ok & (offs_n < n)  # a selected prefix row
            own = ok & (offs_n >= n)  # one of the block's keys
            if GATHER:
                pos = tl.load(idx_ptr + head * n + offs_n, mask=sel, other=0).to(tl.int64)
            else:
                pos = offs_n.to(tl.int64)
            src = (head * src_len + pos)[:, None] * dim + offs_d[None, :]
            brow = (head * blk + (offs_n - n)).to(tl.int64)[:, None] * dim + offs_d[None, :]
            t_sel = sel[:, None] & in_d[None, :]
            t_own = own[:, None] & in_d[None, :]
            k = tl.load(ks_ptr + src, mask=t_sel, other=0.0).to(tl.float32) + tl.load(
                kb_ptr + brow, mask=t_own, other=0.0
            ).to(tl.float32)
            v = tl.load(vs_ptr + src, mask=t_sel, other=0.0).to(tl.float32) + tl.load(
                vb_ptr + brow, mask=t_own, other=0.0
            ).to(tl.float32)
            m, acc_l, acc = online_softmax_step(q, k, v, ok, m, acc_l, acc, scale)
        part = (head * splits + split) * rows + offs_r
        tl.store(m_ptr + part, m, mask=in_r)
        tl.store(l_ptr + part, acc_l, mask=in_r)
        tile = in_r[:, None] & in_d[None, :]
        tl.store(acc_ptr + part[:, None] * dim + offs_d[None, :], acc, mask=tile)

    @triton.jit
    def _reduce_kernel(
        m_ptr,
        l_ptr,
        acc_ptr,
        out_ptr,
        rows,
        dim,
        splits,
        BLOCK_R: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        head = tl.program_id(0).to(tl.int64)
        offs_r = tl.arange(0, BLOCK_R)
        offs_d = tl.arange(0, BLOCK_D)
        in_r = offs_r < rows
        tile = in_r[:, None] & (offs_d < dim)[None, :]
        big = tl.zeros([BLOCK_R], dtype=tl.float32) - float("inf")
        for s in range(0, splits):
            part = (head * splits + s) * rows + offs_r
            big = tl.maximum(big, tl.load(m_ptr + part, mask=in_r, other=float("-inf")))
        safe = tl.where(big > float("-inf"), big, 0.0)
        num = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)
        den = tl.zeros([BLOCK_R], dtype=tl.float32)
        for s in range(0, splits):
            part = (head * splits + s) * rows + offs_r
            w = tl.exp(tl.load(m_ptr + part, mask=in_r, other=float("-inf")) - safe)
            den += w * tl.load(l_ptr + part, mask=in_r, other=0.0)
            a = tl.load(acc_ptr + part[:, None] * dim + offs_d[None, :], mask=tile, other=0.0)
            num += w[:, None] * a
        out = num / tl.where(den > 0, den, 1.0)[:, None]
        out_rows = (head * rows + offs_r)[:, None] * dim + offs_d[None, :]
        tl.store(out_ptr + out_rows, out, mask=tile)


def _pow2(x: int, floor: int = 16) -> int:
    return max(floor, 1 << max(0, int(x) - 1).bit_length())


def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return 4  # the interpreter: a few splits, so the tests exercise the reduction


def plan_splits(groups: int, keys: int, block_n: int, sms: int) -> tuple[int, int]:
    """``(splits, chunk)``: about ``2·sms`` programs over ``groups`` query groups, every chunk
    a whole number of ``block_n``-key tiles and none empty (so no program idles on nothing)."""
    tiles = -(-keys // block_n)
    want = max(1, -(-2 * sms // max(groups, 1)))
    splits = max(1, min(want, tiles))
    chunk = -(-tiles // splits) * block_n
    return -(-keys // chunk), chunk


def gathered_attention_triton(
    q: torch.Tensor,
    k_sel: torch.Tensor,
    v_sel: torch.Tensor,
    k_blk: torch.Tensor,
    v_blk: torch.Tensor,
    scaling: float,
    idx: torch.Tensor | None = None,
    block_n: int = 32,
    splits: int | None = None,
) -> torch.Tensor:
    """``o[b, H_q, B, d]`` over ``[K_sel; K_blk]`` (``idx[b, H_kv, k]``: read ``K_sel[idx]``).

    ``splits``: how many key chunks per query group (default :func:`plan_splits` for the
    device: about two programs per SM)."""
    if not HAVE_TRITON:
        raise MageError(
            "backend 'triton': triton is not installed (pip install mage-attention[triton])"
        )
    if not triton_available(q.device):
        raise MageError(
            f"backend 'triton': tensors are on {q.device}; the kernel needs CUDA, or "
            "TRITON_INTERPRET=1 (set before triton is imported) to run interpreted on the CPU"
        )
    b, hq, blk, dim = q.shape
    hkv = k_sel.shape[1]
    if hq % hkv or k_blk.shape[1] != hkv or tuple(k_blk.shape[2:]) != (blk, dim):
        raise MageError(
            f"triton kernel: shapes do not fit (q {tuple(q.shape)}, selected keys "
            f"{tuple(k_sel.shape)}, block keys {tuple(k_blk.shape)})"
        )
    rows = (hq // hkv) * blk
    n = k_sel.shape[2] if idx is None else idx.shape[-1]
    bn = _pow2(min(block_n, n + blk))
    groups = b * hkv
    if splits is None:
        count, chunk = plan_splits(groups, n + blk, bn, _sm_count(q.device))
    else:
        if splits < 1:
            raise MageError(f"triton kernel: splits must be >= 1, got {splits}")
        tiles = -(-(n + blk) // bn)
        chunk = -(-tiles // min(splits, tiles)) * bn
        count = -(-(n + blk) // chunk)
    f32, dev = torch.float32, q.device
    m = torch.empty(groups, count, rows, dtype=f32, device=dev)
    lsum = torch.empty(groups, count, rows, dtype=f32, device=dev)
    acc = torch.empty(groups, count, rows, dim, dtype=f32, device=dev)
    out = torch.empty(b, hkv, rows, dim, dtype=f32, device=dev)
    block_r, block_d = _pow2(rows), _pow2(dim)
    grid: Any = (groups, count)
    _split_kernel[grid](
        q.reshape(b, hkv, rows, dim).contiguous(),
        k_sel.contiguous(),
        v_sel.contiguous(),
        (
            idx if idx is not None else torch.zeros(1, dtype=torch.int64, device=q.device)
        ).contiguous(),
        k_blk.contiguous(),
        v_blk.contiguous(),
        m,
        lsum,
        acc,
        rows,
        n,
        k_sel.shape[2],
        blk,
        dim,
        chunk,
        count,
        float(scaling),
        GATHER=idx is not None,
        BLOCK_R=block_r,
        BLOCK_N=bn,
        BLOCK_D=block_d,
    )
    _reduce_kernel[(groups,)](m, lsum, acc, out, rows, dim, count, BLOCK_R=block_r, BLOCK_D=block_d)
    return out.reshape(b, hq, blk, dim).to(q.dtype)
