"""A triton kernel for MAGE's sparse step: a block's queries over gathered keys and the block.

One program per (batch, KV head) holds the ``R = G·B`` query rows of that head's group (``G``
query heads, ``B`` block queries each) and folds two key sources into one online softmax
(:func:`paperstack.sparse.online_softmax_step`):

1. the selected prefix rows, either a contiguous buffer ``K_sel[k]`` (MAGE gathers it once per
   block) or, with ``idx``, rows ``K[idx]`` read straight from the cache (a per-step selection,
   such as Quest's, needs no separate gather);
2. the block's own ``B`` keys.

    o = softmax(q [K_sel; K_blk]ᵀ · s) [V_sel; V_blk]

It equals :func:`mage_attention.attention.block_attention` on the same inputs; the tests run it
interpreted on the CPU (``TRITON_INTERPRET=1``, set only where there is no CUDA device) and
compiled on CUDA (gpu-marked; not run in this release: no GPU was lent).
"""

from __future__ import annotations

from typing import Any

import torch

from mage_attention.errors import MageError
from paperstack.sparse import HAVE_TRITON, online_softmax_step, tl, triton, triton_available

__all__ = ["gathered_attention_triton"]


if HAVE_TRITON:

    @triton.jit
    def _block_gather_kernel(
        q_ptr,
        ks_ptr,
        vs_ptr,
        idx_ptr,
        kb_ptr,
        vb_ptr,
        out_ptr,
        rows,
        n,
        src_len,
        blk,
        dim,
        scale,
        GATHER: tl.constexpr,
        BLOCK_R: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_B: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        head = tl.program_id(0).to(tl.int64)  # batch * H_kv + kv head
        offs_r = tl.arange(0, BLOCK_R)
        offs_d = tl.arange(0, BLOCK_D)
        in_r = offs_r < rows
        in_d = offs_d < dim
        q_rows = (head * rows + offs_r)[:, None] * dim + offs_d[None, :]
        tile_r = in_r[:, None] & in_d[None, :]
        q = tl.load(q_ptr + q_rows, mask=tile_r, other=0.0).to(tl.float32)
        acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)  # running output, sum and max
        acc_l = tl.zeros([BLOCK_R], dtype=tl.float32)
        m = acc_l - float("inf")
        for start in range(0, n, BLOCK_N):
            offs_n = start + tl.arange(0, BLOCK_N)
            ok = offs_n < n
            if GATHER:
                pos = tl.load(idx_ptr + head * n + offs_n, mask=ok, other=0).to(tl.int64)
            else:
                pos = offs_n.to(tl.int64)
            src = head * src_len + pos
            tile = ok[:, None] & in_d[None, :]
            k = tl.load(ks_ptr + src[:, None] * dim + offs_d[None, :], mask=tile, other=0.0)
            v = tl.load(vs_ptr + src[:, None] * dim + offs_d[None, :], mask=tile, other=0.0)
            m, acc_l, acc = online_softmax_step(
                q, k.to(tl.float32), v.to(tl.float32), ok, m, acc_l, acc, scale
            )
        offs_b = tl.arange(0, BLOCK_B)
        ok_b = offs_b < blk
        rows_b = (head * blk + offs_b)[:, None] * dim + offs_d[None, :]
        tile_b = ok_b[:, None] & in_d[None, :]
        k = tl.load(kb_ptr + rows_b, mask=tile_b, other=0.0).to(tl.float32)
        v = tl.load(vb_ptr + rows_b, mask=tile_b, other=0.0).to(tl.float32)
        m, acc_l, acc = online_softmax_step(q, k, v, ok_b, m, acc_l, acc, scale)
        out = acc / tl.where(acc_l > 0, acc_l, 1.0)[:, None]
        tl.store(out_ptr + q_rows, out, mask=tile_r)


def _pow2(x: int, floor: int = 16) -> int:
    return max(floor, 1 << max(0, int(x) - 1).bit_length())


def gathered_attention_triton(
    q: torch.Tensor,
    k_sel: torch.Tensor,
    v_sel: torch.Tensor,
    k_blk: torch.Tensor,
    v_blk: torch.Tensor,
    scaling: float,
    idx: torch.Tensor | None = None,
    block_n: int = 32,
) -> torch.Tensor:
    """``o[b, H_q, B, d]`` over ``[K_sel; K_blk]`` (``idx[b, H_kv, k]``: read ``K_sel[idx]``)."""
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
    out = torch.empty(b, hkv, rows, dim, dtype=torch.float32, device=q.device)
    grid: Any = (b * hkv,)
    _block_gather_kernel[grid](
        q.reshape(b, hkv, rows, dim).contiguous(),
        k_sel.contiguous(),
        v_sel.contiguous(),
        (
            idx if idx is not None else torch.zeros(1, dtype=torch.int64, device=q.device)
        ).contiguous(),
        k_blk.contiguous(),
        v_blk.contiguous(),
        out,
        rows,
        n,
        k_sel.shape[2],
        blk,
        dim,
        float(scaling),
        GATHER=idx is not None,
        BLOCK_R=_pow2(rows),
        BLOCK_N=_pow2(min(block_n, n)),
        BLOCK_B=_pow2(blk),
        BLOCK_D=_pow2(dim),
    )
    return out.reshape(b, hq, blk, dim).to(q.dtype)
