"""Triton kernels for NF12: decode to BF16, fused decode + GEMV (M = 1), fused small-M GEMM.

Each kernel sits beside its PyTorch reference (``*_reference``) and is tested for equality with
it under ``TRITON_INTERPRET=1`` on small shapes; on a GPU the same kernels run compiled and
autotuned.

**Packed decode.** A group of 8 weights is one ``u64`` of the ``sm`` plane (8 sign/mantissa
bytes) and one ``u32`` of the ``ex`` plane (8 exponent nibbles), both aligned, so a tile is
loaded as whole words, never byte by byte. In registers, 15 SWAR integer ops turn the two words
into the two BF16 byte planes of all 8 weights::

    e  = spread(ex)                          # 8 nibbles -> 8 bytes (3 shift-or-mask steps)
    E  = e + b * 0x0101010101010101          # + window base per byte: the paper's OR 0x3800
    lo = (E & 0x01..01) << 7 | (sm & 0x7F..7F)            # exponent bit 0 | mantissa
    hi = ((sm >> 7) & 0x01..01) << 7 | (E >> 1) & 0x7F..7F   # sign | exponent bits 7..1

and one shift and mask per weight takes its BF16 out (``hi_j << 8 | lo_j``). Adding the base
``b`` is the paper's OR with ``0x3800`` and its exact ``2^-k`` rescale in one op, so outputs
need no rescaling. The escape test reads slots 0-2 of a group from the words already in
registers (each slot once, no second load); only an escaped group loads its verbatim BF16 from
the escape buffer (a masked load that costs nothing for the others). All offsets are int64, so
a matrix may hold more than 2^31 weights.

``y = sum_g (slot0_g == S ? esc[idx_g] : dec(c_g)) . x_g``, accumulated in fp32.

**Tiling.** ``triton.autotune`` picks tile sizes, warps and a split of K (several programs per
row block, summed with fp32 atomics, when rows are few) per shape on a GPU; under the
interpreter there is one small configuration. The BF16 kernels (``bf16_gemv_triton``,
``bf16_gemm_triton``) are the same code with plain BF16 loads: the matched baseline, runnable
with the NF12 kernel's own tiling (``config=``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl
import triton.testing

from nf12.errors import Nf12Error
from nf12.format import NF12Tensor, decode

__all__ = [
    "KernelConfig",
    "bf16_gemm_triton",
    "bf16_gemv_triton",
    "decode_reference",
    "decode_triton",
    "gemm_reference",
    "gemm_triton",
    "gemv_reference",
    "gemv_triton",
    "tuned_config",
]

#: Rows of the small-M GEMM tile: the smallest M ``tl.dot`` takes. Calls hold 1..16 rows.
BLOCK_M = 16
#: True when the kernels run in Triton's interpreter (CPU): one configuration, fp32 dot.
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@dataclass(frozen=True)
class KernelConfig:
    """One tiling: rows and columns of a tile, programs per row block along K, warps, stages."""

    block_r: int
    block_k: int
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 2

    def meta(self) -> dict[str, int]:
        return {"BLOCK_R": self.block_r, "BLOCK_K": self.block_k, "SPLIT_K": self.split_k,
                "num_warps": self.num_warps, "num_stages": self.num_stages}  # fmt: skip


def _zero_y(nargs: dict[str, Any]) -> None:
    nargs["y_ptr"].zero_()  # split-K programs add their partial sums into y


def _configs(space: list[KernelConfig], interpret: KernelConfig) -> list[triton.Config]:
    chosen = [interpret] if INTERPRET else space
    return [
        triton.Config({"BLOCK_R": c.block_r, "BLOCK_K": c.block_k, "SPLIT_K": c.split_k},
                      num_warps=c.num_warps, num_stages=c.num_stages,
                      pre_hook=_zero_y if c.split_k > 1 else None)
        for c in chosen
    ]  # fmt: skip


# Search spaces, chosen for memory-bound shapes (4096..28672 wide) and kept small (every
# candidate is compiled once per kernel: the bench's tuning must fit in a couple of minutes):
# long K tiles, few rows per program, split-K so that a few thousand rows still fill a GPU's
# SMs. BLOCK_K stays a multiple of every group size (8..128).
_GEMV_SPACE = [
    KernelConfig(br, bk, sk, 4) for br in (4, 8, 16, 32) for bk in (256, 512) for sk in (1, 4)
] + [KernelConfig(16, 512, 8, 8), KernelConfig(32, 256, 8, 8)]
_GEMM_SPACE = [
    KernelConfig(br, bk, sk, 4, 3) for br in (32, 64, 128) for bk in (128, 256) for sk in (1, 4)
]
_DECODE_SPACE = [KernelConfig(br, bk, 1, 4) for br in (8, 32) for bk in (512, 1024)]
_INTERPRET_CONFIG = KernelConfig(16, 128)


# --------------------------------------------------------------------------- device code


@triton.jit
def _nf12_tile(
    sm_ptr, ex_ptr, esc_ptr, r, k0, rows, words, base8, sentinel,
    G: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """BF16 bits (int32) of ``W[r, k0:k0+BLOCK_K]`` from packed words; escaped groups from
    the buffer. ``words`` is the row length in 8-weight words (the padded columns / 8)."""
    BW: tl.constexpr = BLOCK_K // 8
    GW: tl.constexpr = G // 8
    NG: tl.constexpr = BLOCK_K // G
    w = k0 // 8 + tl.arange(0, BW)
    rmask = r < rows
    wmask = rmask[:, None] & (w[None, :] < words)
    off = r.to(tl.int64)[:, None] * words + w[None, :]
    smw = tl.load(sm_ptr + off, mask=wmask, other=0)  # int64: 8 sign|mantissa bytes
    exw = tl.load(ex_ptr + off, mask=wmask, other=0).to(tl.int64) & 0xFFFFFFFF  # 8 nibbles
    # SWAR: nibble j of ex -> byte j, plus the window base in every byte (no carry: <= 254).
    e = (exw | (exw << 16)) & 0x0000FFFF0000FFFF
    e = (e | (e << 8)) & 0x00FF00FF00FF00FF
    e = (e | (e << 4)) & 0x0F0F0F0F0F0F0F0F
    big_e = e + base8
    lo = ((big_e & 0x0101010101010101) << 7) | (smw & 0x7F7F7F7F7F7F7F7F)
    hi = (((smw >> 7) & 0x0101010101010101) << 7) | ((big_e >> 1) & 0x7F7F7F7F7F7F7F7F)
    shift = (tl.arange(0, 8) * 8).to(tl.int64)[None, None, :]
    lo8 = (lo[:, :, None] >> shift) & 0xFF
    hi8 = (hi[:, :, None] >> shift) & 0xFF
    bits = tl.reshape((hi8 << 8) | lo8, (BLOCK_R, BLOCK_K)).to(tl.int32)
    # Slots 0-2 of each group are bytes/nibbles 0-2 of its first word, already in registers.
    if GW == 1:
        s0 = smw
        e0 = exw
    else:
        first = (tl.arange(0, GW) == 0)[None, None, :]
        s0 = tl.sum(tl.where(first, tl.reshape(smw, (BLOCK_R, NG, GW)), 0), axis=2)
        e0 = tl.sum(tl.where(first, tl.reshape(exw, (BLOCK_R, NG, GW)), 0), axis=2)
    gw = k0 // 8 + tl.arange(0, NG) * GW
    gmask = rmask[:, None] & (gw[None, :] < words)
    code0 = ((s0 & 0x80) << 4) | ((e0 & 0xF) << 7) | (s0 & 0x7F)
    is_esc = (code0 == sentinel) & gmask
    slot1 = (((s0 >> 8) & 0x80) << 4) | (((e0 >> 4) & 0xF) << 7) | ((s0 >> 8) & 0x7F)
    slot2 = (((s0 >> 16) & 0x80) << 4) | (((e0 >> 8) & 0xF) << 7) | ((s0 >> 16) & 0x7F)
    idx = (slot1 << 12) | slot2  # int64
    is_esc_w = tl.reshape(tl.broadcast_to(is_esc[:, :, None], (BLOCK_R, NG, G)),
                          (BLOCK_R, BLOCK_K))  # fmt: skip
    pos = idx[:, :, None] * G + tl.arange(0, G).to(tl.int64)[None, None, :]
    esc = tl.load(esc_ptr + tl.reshape(pos, (BLOCK_R, BLOCK_K)), mask=is_esc_w, other=0)
    return tl.where(is_esc_w, esc.to(tl.int32) & 0xFFFF, bits)


@triton.jit
def _weights(
    w_ptr, ex_ptr, esc_ptr, r, k0, rows, cols, stride, base8, sentinel,
    G: tl.constexpr, PACKED: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """The BF16 tile ``W[r, k0:k0+BLOCK_K]`` (zero outside the matrix): decoded from NF12
    words when ``PACKED``, else loaded from a plain BF16 matrix of row stride ``stride``."""
    c = k0 + tl.arange(0, BLOCK_K)
    mask = (r < rows)[:, None] & (c < cols)[None, :]
    if PACKED:
        bits = _nf12_tile(w_ptr, ex_ptr, esc_ptr, r, k0, rows, stride, base8, sentinel,
                          G, BLOCK_R, BLOCK_K)  # fmt: skip
        w = bits.to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        off = r.to(tl.int64)[:, None] * stride + c[None, :]
        w = tl.load(w_ptr + off, mask=mask, other=0.0)
    return tl.where(mask, w, 0.0)


@triton.jit
def _decode_kernel(
    sm_ptr, ex_ptr, esc_ptr, out_ptr, rows, cols, words, base8, sentinel,
    G: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
):  # fmt: skip
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    k0 = tl.program_id(1) * BLOCK_K
    c = k0 + tl.arange(0, BLOCK_K)
    bits = _nf12_tile(sm_ptr, ex_ptr, esc_ptr, r, k0, rows, words, base8, sentinel,
                      G, BLOCK_R, BLOCK_K)  # fmt: skip
    keep = (r < rows)[:, None] & (c < cols)[None, :]
    off = r.to(tl.int64)[:, None] * cols + c[None, :]
    tl.store(out_ptr + off, bits.to(tl.int16), mask=keep)


@triton.jit
def _gemv_kernel(
    w_ptr, ex_ptr, esc_ptr, x_ptr, y_ptr, rows, cols, k_total, stride, base8, sentinel,
    G: tl.constexpr, PACKED: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
):  # fmt: skip
    """``y[r] = sum_k W[r, k] x[k]`` for a block of rows over one of ``SPLIT_K`` K ranges."""
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    chunk = tl.cdiv(tl.cdiv(k_total, BLOCK_K), SPLIT_K) * BLOCK_K
    k_lo = tl.program_id(1) * chunk
    k_hi = tl.minimum(k_lo + chunk, k_total)
    acc = tl.zeros((BLOCK_R, BLOCK_K), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        w = _weights(w_ptr, ex_ptr, esc_ptr, r, k0, rows, cols, stride, base8, sentinel,
                     G, PACKED, BLOCK_R, BLOCK_K)  # fmt: skip
        c = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + c, mask=c < cols, other=0.0).to(tl.float32)
        acc += w.to(tl.float32) * x[None, :]
    y = tl.sum(acc, axis=1)
    if SPLIT_K == 1:
        tl.store(y_ptr + r, y, mask=r < rows)
    else:
        tl.atomic_add(y_ptr + r, y, mask=r < rows)


@triton.jit
def _gemm_kernel(
    w_ptr, ex_ptr, esc_ptr, x_ptr, y_ptr, m, rows, cols, k_total, stride, base8, sentinel,
    G: tl.constexpr, PACKED: tl.constexpr, FP32_DOT: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
):  # fmt: skip
    """``Y[i, r] = sum_k X[i, k] W[r, k]`` for ``i < m <= BLOCK_M``: one ``tl.dot`` per tile."""
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    mi = tl.arange(0, BLOCK_M)
    chunk = tl.cdiv(tl.cdiv(k_total, BLOCK_K), SPLIT_K) * BLOCK_K
    k_lo = tl.program_id(1) * chunk
    k_hi = tl.minimum(k_lo + chunk, k_total)
    acc = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        w = _weights(w_ptr, ex_ptr, esc_ptr, r, k0, rows, cols, stride, base8, sentinel,
                     G, PACKED, BLOCK_R, BLOCK_K)  # fmt: skip
        c = k0 + tl.arange(0, BLOCK_K)
        xmask = (mi < m)[:, None] & (c < cols)[None, :]
        x = tl.load(x_ptr + mi[:, None].to(tl.int64) * cols + c[None, :], mask=xmask, other=0.0)
        if FP32_DOT:  # the interpreter's BF16 dot is wrong; BF16 products are exact in fp32
            acc += tl.dot(x.to(tl.float32), tl.trans(w.to(tl.float32)), input_precision="ieee")
        else:
            acc += tl.dot(x.to(tl.bfloat16), tl.trans(w.to(tl.bfloat16)))
    ymask = (mi < m)[:, None] & (r < rows)[None, :]
    off = mi[:, None].to(tl.int64) * rows + r[None, :]
    if SPLIT_K == 1:
        tl.store(y_ptr + off, acc, mask=ymask)
    else:
        tl.atomic_add(y_ptr + off, acc, mask=ymask)


def _bench_config(kernel_call: Any, quantiles: Any) -> Any:
    # Short timings per candidate tiling (the defaults, 25 + 100 ms, would make tuning the
    # bench's 4 shapes x 4 batches take minutes); an L2 flush between runs, as do_bench does.
    return triton.testing.do_bench(kernel_call, warmup=5, rep=20, quantiles=quantiles)


def _tuned(space: list[KernelConfig], fn: Any, key: list[str]) -> Any:
    configs = _configs(space, _INTERPRET_CONFIG)
    return triton.autotune(configs=configs, key=key, do_bench=_bench_config)(fn)


# One autotuner per kernel and weight kind, so NF12 and BF16 each get their own best tiling.
_DECODE = _tuned(_DECODE_SPACE, _decode_kernel, ["rows", "words"])
_GEMV_NF12 = _tuned(_GEMV_SPACE, _gemv_kernel, ["rows", "k_total"])
_GEMV_BF16 = _tuned(_GEMV_SPACE, _gemv_kernel, ["rows", "k_total"])
_GEMM_NF12 = _tuned(_GEMM_SPACE, _gemm_kernel, ["m", "rows", "k_total"])
_GEMM_BF16 = _tuned(_GEMM_SPACE, _gemm_kernel, ["m", "rows", "k_total"])
_TUNERS = {"decode": _DECODE, "gemv": _GEMV_NF12, "gemm": _GEMM_NF12,
           "bf16_gemv": _GEMV_BF16, "bf16_gemm": _GEMM_BF16}  # fmt: skip


# --------------------------------------------------------------------------- host wrappers


@dataclass(frozen=True)
class _Packed:
    """An NF12 matrix as the kernels read it: word views of the planes and two numbers."""

    sm: torch.Tensor  # int64[R, Cp/8]
    ex: torch.Tensor  # int32[R, Cp/8]
    esc: torch.Tensor  # int16[max(n_esc, 1), G]
    rows: int
    cols: int
    words: int
    base8: int  # window base in every byte of a u64, as a signed int64
    sentinel: int
    group: int


def _aligned(t: torch.Tensor, nbytes: int) -> torch.Tensor:
    t = t.contiguous()
    return t if t.data_ptr() % nbytes == 0 else t.clone()


def _packed(nt: NF12Tensor) -> _Packed:
    if len(nt.shape) != 2:
        raise Nf12Error(f"shape {nt.shape}: the kernels take a 2-D weight matrix")
    if nt.group < 8:
        raise Nf12Error(f"group {nt.group}: the packed kernels need groups of 8 or more weights")
    rows, cols = nt.shape
    words = nt.padded_cols // 8
    base8 = nt.base * 0x0101010101010101
    if nt.n_escaped:
        esc = nt.esc.view(torch.int16)
    else:
        esc = torch.zeros(1, nt.group, dtype=torch.int16, device=nt.device)
    return _Packed(
        sm=_aligned(nt.sm, 8).view(torch.int64),
        ex=_aligned(nt.ex, 4).view(torch.int32),
        esc=esc,
        rows=rows,
        cols=cols,
        words=words,
        base8=base8 - (1 << 64) if base8 >= 1 << 63 else base8,
        sentinel=nt.sentinel,
        group=nt.group,
    )


def _launch(
    tuner: Any, grid: Any, config: KernelConfig | None, args: tuple[Any, ...],
    y: torch.Tensor | None = None, **const: Any,
) -> None:  # fmt: skip
    """Run ``tuner`` (autotuned) or its kernel with one explicit ``config``."""
    if config is None:
        tuner[grid](*args, **const)
        return
    if config.block_k % const.get("G", 8) or config.block_k < 8:
        raise Nf12Error(f"block_k {config.block_k}: must be a multiple of the group size")
    if config.split_k > 1 and y is not None:
        y.zero_()
    tuner.fn[grid](*args, **const, **config.meta())


def tuned_config(kernel: str) -> KernelConfig | None:
    """The tiling the autotuner chose at the last call of ``kernel`` (``gemv``, ``gemm``,
    ``decode``, ``bf16_gemv``, ``bf16_gemm``), or None before the first call."""
    best = getattr(_TUNERS[kernel], "best_config", None)
    if best is None:
        return None
    kw = best.kwargs
    return KernelConfig(kw["BLOCK_R"], kw["BLOCK_K"], kw["SPLIT_K"], best.num_warps,
                        best.num_stages)  # fmt: skip


def _y(shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    # Autotuned split-K configurations zero y in their pre-hook, explicit ones in _launch: the
    # split-free hot path pays for no memset.
    return torch.empty(shape, dtype=torch.float32, device=device)


def decode_reference(nt: NF12Tensor) -> torch.Tensor:
    """PyTorch reference of :func:`decode_triton`: the codec's own decoder."""
    return decode(nt)


def decode_triton(nt: NF12Tensor, *, config: KernelConfig | None = None) -> torch.Tensor:
    """Decode an NF12 matrix to BF16 with the packed Triton kernel (bit-identical)."""
    p = _packed(nt)
    out = torch.empty(p.rows, p.cols, dtype=torch.int16, device=nt.device)

    def grid(meta: dict[str, int]) -> tuple[int, int]:
        return triton.cdiv(p.rows, meta["BLOCK_R"]), triton.cdiv(p.words * 8, meta["BLOCK_K"])

    _launch(_DECODE, grid, config, (p.sm, p.ex, p.esc, out, p.rows, p.cols, p.words, p.base8,
                                    p.sentinel), G=p.group)  # fmt: skip
    return out.view(torch.bfloat16)


def gemv_reference(nt: NF12Tensor, x: torch.Tensor) -> torch.Tensor:
    """``y = W x`` in fp32 from the decoded BF16 matrix (the kernel's contract)."""
    return decode(nt).float() @ x.float()


def _gemv_grid(rows: int) -> Any:
    def grid(meta: dict[str, int]) -> tuple[int, int]:
        return triton.cdiv(rows, meta["BLOCK_R"]), meta["SPLIT_K"]

    return grid


def gemv_triton(
    nt: NF12Tensor, x: torch.Tensor, *, config: KernelConfig | None = None
) -> torch.Tensor:
    """Fused NF12 decode + GEMV: ``y = W x`` (fp32) without materialising ``W``."""
    p = _packed(nt)
    if tuple(x.shape) != (p.cols,):
        raise Nf12Error(f"x: shape {tuple(x.shape)} does not match W's {p.cols} columns")
    y = _y((p.rows,), nt.device)
    args = (p.sm, p.ex, p.esc, x.contiguous(), y, p.rows, p.cols, p.words * 8, p.words, p.base8,
            p.sentinel)  # fmt: skip
    _launch(_GEMV_NF12, _gemv_grid(p.rows), config, args, y, G=p.group, PACKED=True)
    return y


def bf16_gemv_triton(
    w: torch.Tensor, x: torch.Tensor, *, config: KernelConfig | None = None
) -> torch.Tensor:
    """The matched baseline: the same GEMV kernel reading a plain BF16 matrix."""
    if w.dtype != torch.bfloat16 or w.ndim != 2 or tuple(x.shape) != (w.shape[1],):
        raise Nf12Error(f"w {tuple(w.shape)} {w.dtype}, x {tuple(x.shape)}: need BF16 [R, C], [C]")
    rows, cols = w.shape
    y = _y((rows,), w.device)
    w = w.contiguous()
    args = (w, w, w, x.contiguous(), y, rows, cols, cols, cols, 0, -1)
    _launch(_GEMV_BF16, _gemv_grid(rows), config, args, y, G=8, PACKED=False)
    return y


def gemm_reference(nt: NF12Tensor, x: torch.Tensor) -> torch.Tensor:
    """``Y = X W^T`` in fp32 from the decoded BF16 matrix."""
    return x.to(torch.bfloat16).float() @ decode(nt).float().t()


def _check_m(x: torch.Tensor, cols: int) -> int:
    if x.ndim != 2 or x.shape[1] != cols:
        raise Nf12Error(f"x: shape {tuple(x.shape)} is not [M, {cols}]")
    m = int(x.shape[0])
    if not 1 <= m <= BLOCK_M:
        raise Nf12Error(f"x: M = {m} rows; the small-M kernel takes 1..{BLOCK_M}")
    return m


def gemm_triton(
    nt: NF12Tensor, x: torch.Tensor, *, config: KernelConfig | None = None
) -> torch.Tensor:
    """Fused NF12 decode + small-M GEMM: ``Y = X W^T`` (fp32), ``1 <= M <= 16``."""
    p = _packed(nt)
    m = _check_m(x, p.cols)
    y = _y((m, p.rows), nt.device)
    args = (p.sm, p.ex, p.esc, x.to(torch.bfloat16).contiguous(), y, m, p.rows, p.cols,
            p.words * 8, p.words, p.base8, p.sentinel)  # fmt: skip
    _launch(_GEMM_NF12, _gemv_grid(p.rows), config, args, y, G=p.group, PACKED=True,
            FP32_DOT=INTERPRET, BLOCK_M=BLOCK_M)  # fmt: skip
    return y


def bf16_gemm_triton(
    w: torch.Tensor, x: torch.Tensor, *, config: KernelConfig | None = None
) -> torch.Tensor:
    """The matched baseline of :func:`gemm_triton`: the same kernel on a plain BF16 matrix."""
    if w.dtype != torch.bfloat16 or w.ndim != 2:
        raise Nf12Error(f"w {tuple(w.shape)} {w.dtype}: need a BF16 matrix")
    rows, cols = w.shape
    m = _check_m(x, cols)
    y = _y((m, rows), w.device)
    w = w.contiguous()
    args = (w, w, w, x.to(torch.bfloat16).contiguous(), y, m, rows, cols, cols, cols, 0, -1)
    _launch(_GEMM_BF16, _gemv_grid(rows), config, args, y, G=8, PACKED=False,
            FP32_DOT=INTERPRET, BLOCK_M=BLOCK_M)  # fmt: skip
    return y
