"""Triton kernels for NF12: decode to BF16, fused decode + GEMV, and a fused small-M GEMM.

Each kernel sits beside its PyTorch reference (``*_reference``) and is tested for equality with
it under ``TRITON_INTERPRET=1`` on small shapes; on a GPU the same kernels run compiled.

The fused kernels never materialise the BF16 matrix: each program loads a tile of the ``sm`` and
``ex`` planes (12 bits per weight from memory instead of 16), rebuilds the BF16 bits in registers
(``hi = s | (e4 + b) >> 1``, ``lo = ((e4 + b) & 1) << 7 | m``: the add of the window base is the
paper's OR with ``0x3800`` and exact ``2^-k`` rescale in one step, so outputs need no rescaling),
replaces escaped groups (slot 0 == sentinel) by their verbatim BF16 group, and accumulates in
fp32. ``y = sum_g (slot0_g == S ? esc[idx_g] : dec(c_g)) . x_g``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from nf12.errors import Nf12Error
from nf12.format import NF12Tensor, decode

__all__ = [
    "decode_reference",
    "decode_triton",
    "gemm_reference",
    "gemm_triton",
    "gemv_reference",
    "gemv_triton",
]


@triton.jit
def _slot_code(sm_ptr, ex_ptr, pos, mask):
    """12-bit code at flat plane position ``pos``: ``s<<11 | e4<<7 | m``."""
    sm = tl.load(sm_ptr + pos, mask=mask, other=0).to(tl.int32)
    exb = tl.load(ex_ptr + pos // 2, mask=mask, other=0).to(tl.int32)
    e4 = (exb >> ((pos % 2) * 4)) & 0xF
    return ((sm & 0x80) << 4) | (e4 << 7) | (sm & 0x7F)


@triton.jit
def _tile_bits(
    sm_ptr, ex_ptr, esc_ptr, rows, cols_p, base, sentinel,
    r, c0, G: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """BF16 bits (int32) of the tile ``W[r, c0:c0+BLOCK_K]``; escaped groups from the buffer."""
    c = c0 + tl.arange(0, BLOCK_K)
    mask = (r[:, None] < rows) & (c[None, :] < cols_p)
    pos = r[:, None] * cols_p + c[None, :]
    sm = tl.load(sm_ptr + pos, mask=mask, other=0).to(tl.int32)
    exb = tl.load(ex_ptr + pos // 2, mask=mask, other=0).to(tl.int32)
    e = ((exb >> ((c[None, :] % 2) * 4)) & 0xF) + base
    bits = ((sm & 0x80) << 8) | (e << 7) | (sm & 0x7F)
    # Slot codes once per group, broadcast over its G weights.
    gc = tl.arange(0, BLOCK_K // G)
    gpos = r[:, None] * cols_p + (c0 + gc * G)[None, :]
    gmask = (r[:, None] < rows) & ((c0 + gc * G)[None, :] < cols_p)
    code0 = _slot_code(sm_ptr, ex_ptr, gpos, gmask)
    is_esc = (code0 == sentinel) & gmask
    idx = (_slot_code(sm_ptr, ex_ptr, gpos + 1, is_esc) << 12) | _slot_code(
        sm_ptr, ex_ptr, gpos + 2, is_esc
    )
    is_esc_w = tl.reshape(tl.broadcast_to(is_esc[:, :, None], (BLOCK_R, BLOCK_K // G, G)),
                          (BLOCK_R, BLOCK_K))  # fmt: skip
    idx_w = tl.reshape(tl.broadcast_to(idx[:, :, None], (BLOCK_R, BLOCK_K // G, G)),
                       (BLOCK_R, BLOCK_K))  # fmt: skip
    esc_bits = tl.load(esc_ptr + idx_w * G + (c[None, :] % G), mask=is_esc_w & mask, other=0)
    esc_bits = esc_bits.to(tl.int32) & 0xFFFF
    return tl.where(is_esc_w, esc_bits, bits), mask


@triton.jit
def _decode_kernel(
    sm_ptr, ex_ptr, esc_ptr, out_ptr, rows, cols, cols_p, base, sentinel,
    G: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    c0 = tl.program_id(1) * BLOCK_K
    c = c0 + tl.arange(0, BLOCK_K)
    bits, mask = _tile_bits(sm_ptr, ex_ptr, esc_ptr, rows, cols_p, base, sentinel, r, c0,
                            G, BLOCK_R, BLOCK_K)  # fmt: skip
    keep = mask & (c[None, :] < cols)
    tl.store(out_ptr + r[:, None] * cols + c[None, :], bits.to(tl.int16), mask=keep)


@triton.jit
def _gemv_kernel(
    sm_ptr, ex_ptr, esc_ptr, x_ptr, y_ptr, rows, cols, cols_p, base, sentinel,
    G: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_R, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, cols_p, BLOCK_K):
        c = k0 + tl.arange(0, BLOCK_K)
        bits, mask = _tile_bits(sm_ptr, ex_ptr, esc_ptr, rows, cols_p, base, sentinel, r, k0,
                                G, BLOCK_R, BLOCK_K)  # fmt: skip
        w = bits.to(tl.int16).to(tl.bfloat16, bitcast=True).to(tl.float32)
        x = tl.load(x_ptr + c, mask=c < cols, other=0.0).to(tl.float32)
        acc += tl.where(mask & (c[None, :] < cols), w * x[None, :], 0.0)
    tl.store(y_ptr + r, tl.sum(acc, axis=1), mask=r < rows)


@triton.jit
def _gemm_kernel(
    sm_ptr, ex_ptr, esc_ptr, x_ptr, y_ptr, m, rows, cols, cols_p, base, sentinel,
    G: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    mi = tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
    for k0 in range(0, cols_p, BLOCK_K):
        c = k0 + tl.arange(0, BLOCK_K)
        bits, mask = _tile_bits(sm_ptr, ex_ptr, esc_ptr, rows, cols_p, base, sentinel, r, k0,
                                G, BLOCK_R, BLOCK_K)  # fmt: skip
        w = tl.where(mask & (c[None, :] < cols), bits, 0).to(tl.int16).to(tl.bfloat16, bitcast=True)
        xmask = (mi[:, None] < m) & (c[None, :] < cols)
        x = tl.load(x_ptr + mi[:, None] * cols + c[None, :], mask=xmask, other=0.0)
        # bf16 x bf16 products are exact in fp32, so an fp32 (IEEE) dot equals a bf16 one.
        acc += tl.dot(x.to(tl.float32), tl.trans(w.to(tl.float32)), input_precision="ieee")
    ymask = (mi[:, None] < m) & (r[None, :] < rows)
    tl.store(y_ptr + mi[:, None] * rows + r[None, :], acc, mask=ymask)


def _matrix(nt: NF12Tensor) -> tuple[int, int]:
    if len(nt.shape) != 2:
        raise Nf12Error(f"shape {nt.shape}: the kernels take a 2-D weight matrix")
    return nt.shape[0], nt.shape[1]


def _blocks(nt: NF12Tensor, block_k: int) -> int:
    if block_k % nt.group or block_k < nt.group:
        raise Nf12Error(f"block_k {block_k}: must be a multiple of the group size {nt.group}")
    return block_k


def decode_reference(nt: NF12Tensor) -> torch.Tensor:
    """PyTorch reference of :func:`decode_triton`: the codec's own decoder."""
    return decode(nt)


def decode_triton(nt: NF12Tensor, *, block_r: int = 16, block_k: int = 64) -> torch.Tensor:
    """Decode an NF12 matrix to BF16 with the Triton kernel (bit-identical to the codec)."""
    rows, cols = _matrix(nt)
    _blocks(nt, block_k)
    out = torch.empty(rows, cols, dtype=torch.int16, device=nt.device)
    esc = nt.esc.view(torch.int16) if nt.n_escaped else torch.zeros(1, nt.group, dtype=torch.int16,
                                                                     device=nt.device)  # fmt: skip
    grid = (triton.cdiv(rows, block_r), triton.cdiv(nt.padded_cols, block_k))
    _decode_kernel[grid](nt.sm, nt.ex, esc, out, rows, cols, nt.padded_cols, nt.base,
                         nt.sentinel, G=nt.group, BLOCK_R=block_r, BLOCK_K=block_k)  # fmt: skip
    return out.view(torch.bfloat16)


def gemv_reference(nt: NF12Tensor, x: torch.Tensor) -> torch.Tensor:
    """``y = W x`` in fp32 from the decoded BF16 matrix (the kernel's contract)."""
    return decode(nt).float() @ x.float()


def gemv_triton(
    nt: NF12Tensor, x: torch.Tensor, *, block_r: int = 16, block_k: int = 64
) -> torch.Tensor:
    """Fused NF12 decode + GEMV: ``y = W x`` (fp32) without materialising ``W``."""
    rows, cols = _matrix(nt)
    _blocks(nt, block_k)
    if x.shape != (cols,):
        raise Nf12Error(f"x: shape {tuple(x.shape)} does not match W's {cols} columns")
    y = torch.empty(rows, dtype=torch.float32, device=nt.device)
    esc = nt.esc.view(torch.int16) if nt.n_escaped else torch.zeros(1, nt.group, dtype=torch.int16,
                                                                     device=nt.device)  # fmt: skip
    grid = (triton.cdiv(rows, block_r),)
    _gemv_kernel[grid](nt.sm, nt.ex, esc, x.contiguous(), y, rows, cols, nt.padded_cols,
                       nt.base, nt.sentinel, G=nt.group, BLOCK_R=block_r,
                       BLOCK_K=block_k)  # fmt: skip
    return y


def gemm_reference(nt: NF12Tensor, x: torch.Tensor) -> torch.Tensor:
    """``Y = X W^T`` in fp32 from the decoded BF16 matrix."""
    return x.to(torch.bfloat16).float() @ decode(nt).float().t()


def gemm_triton(
    nt: NF12Tensor, x: torch.Tensor, *, block_r: int = 32, block_k: int = 32
) -> torch.Tensor:
    """Fused NF12 decode + batched small-M GEMM: ``Y = X W^T`` (fp32), ``M <= 16``."""
    rows, cols = _matrix(nt)
    _blocks(nt, block_k)
    if x.ndim != 2 or x.shape[1] != cols:
        raise Nf12Error(f"x: shape {tuple(x.shape)} is not [M, {cols}]")
    m = int(x.shape[0])
    if not 1 <= m <= 16:
        raise Nf12Error(f"x: M = {m} rows; the small-M kernel takes 1..16 (use decode + matmul)")
    y = torch.empty(m, rows, dtype=torch.float32, device=nt.device)
    esc = nt.esc.view(torch.int16) if nt.n_escaped else torch.zeros(1, nt.group, dtype=torch.int16,
                                                                     device=nt.device)  # fmt: skip
    grid = (triton.cdiv(rows, block_r),)
    _gemm_kernel[grid](nt.sm, nt.ex, esc, x.to(torch.bfloat16).contiguous(), y, m, rows, cols,
                       nt.padded_cols, nt.base, nt.sentinel, G=nt.group, BLOCK_M=16,
                       BLOCK_R=block_r, BLOCK_K=block_k)  # fmt: skip
    return y
