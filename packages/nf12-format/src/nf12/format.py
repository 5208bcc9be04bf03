"""The NF12 format: a lossless 12-bit code for trained BF16 weights, and its codec.

A BF16 weight is ``s(1) | e(8, bias 127) | m(7)``. Trained weights cluster in a narrow band of
exponents: after a per-matrix power-of-two scale ``2^k`` almost all of them have ``e + k`` in
``[112, 127]``, whose upper exponent nibble is the constant ``0111``. Dropping that nibble leaves a
fixed-width 12-bit code ``c = s<<11 | (e - b)<<7 | m`` with ``b = 112 - k`` the lowest exponent of
the window. Weights outside the window (zeros, subnormals, inf/NaN, outliers) cannot be coded, so
the group of ``G`` consecutive weights of a row that holds one is *escaped*: its slot 0 carries a
per-matrix sentinel code ``S`` and its slots 1-2 a 24-bit index into a per-matrix buffer of
verbatim BF16 groups. Nothing per group is stored beyond the 12-bit slots themselves.

Memory layout of one matrix of ``R x C`` weights, ``C`` padded to ``Cp`` (a multiple of ``G``):

- ``sm``: ``uint8[R, Cp]``, ``sign<<7 | mantissa`` of each code (a byte plane, like DFloat11's
  ``sign_mantissa``);
- ``ex``: ``uint8[R, Cp/2]``, the 4-bit window exponents ``e - b``, column ``2j`` in the low
  nibble of byte ``j`` and column ``2j+1`` in the high nibble;
- ``esc``: ``bfloat16[n_esc, G]``, the escaped groups verbatim (row padding holds +0.0).

Both planes are row-major with power-of-two element widths, so a GPU warp loads them coalesced,
and a group of 8 codes is one ``uint64`` of ``sm`` plus one ``uint32`` of ``ex``.

Everything here is vectorised torch (no Python loop over weights) and runs on CPU or CUDA.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch

from nf12.errors import Nf12Error, TooManyEscapesError

__all__ = [
    "CHUNK_WEIGHTS",
    "CODE_BITS",
    "DEFAULT_GROUP",
    "FORMAT_VERSION",
    "GROUPS",
    "HEADER_BYTES",
    "MAX_ESCAPES",
    "WINDOW",
    "NF12Tensor",
    "choose_window",
    "coverage",
    "decode",
    "encode",
    "escape_rate",
    "exponent_entropy",
    "exponent_histogram",
]

#: Version of the layout described in this module and the README (stored in every file).
FORMAT_VERSION = 1
#: Width of one code: sign, 4 window-exponent bits, 7 mantissa bits.
CODE_BITS = 12
#: Number of exponents one 4-bit field covers.
WINDOW = 16
#: Weights per group. The paper leaves G open; 8 keeps >99.8% of MiniLM's groups escape-free
#: and makes a group exactly one u64 of ``sm`` plus one u32 of ``ex``.
DEFAULT_GROUP = 8
#: Group sizes the codec accepts: powers of two (aligned loads) with room for the 3 header slots.
GROUPS = (4, 8, 16, 32, 64, 128)
#: Escape indices live in two 12-bit slots: at most 2^24 escaped groups per matrix.
MAX_ESCAPES = 1 << 24
#: Fixed per-matrix header of the binary layout: magic(4) version(1) group(1) base(1) pad(1)
#: sentinel(2) pad(2) n_esc(4) rows(8) cols(8). Counted in every bits-per-weight figure.
HEADER_BYTES = 32

_EXP_MASK = 0xFF
_CODE_VALUES = 1 << CODE_BITS


def _check_little_endian() -> None:
    if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
        raise Nf12Error("nf12 assumes a little-endian host (BF16 byte order)")


@dataclass(frozen=True)
class NF12Tensor:
    """One NF12-encoded matrix: the two code planes, the escape buffer and four numbers.

    ``base`` is the lowest biased exponent ``b`` of the 16-exponent window; the paper's
    power-of-two scale is ``k = 112 - b`` (:attr:`scale_exp`). ``sentinel`` is ``S``.
    """

    sm: torch.Tensor
    ex: torch.Tensor
    esc: torch.Tensor
    shape: tuple[int, ...]
    base: int
    sentinel: int
    group: int

    @property
    def rows(self) -> int:
        return int(self.sm.shape[0])

    @property
    def cols(self) -> int:
        return int(self.shape[-1]) if self.shape else 1

    @property
    def padded_cols(self) -> int:
        return int(self.sm.shape[1])

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def n_escaped(self) -> int:
        return int(self.esc.shape[0])

    @property
    def scale_exp(self) -> int:
        """The paper's ``k``: ``W * 2^k`` has its window at biased exponents ``[112, 127]``."""
        return 112 - self.base

    @property
    def nbytes(self) -> int:
        """Bytes of the encoded matrix: planes, escape buffer and the fixed header."""
        return int(self.sm.numel() + self.ex.numel() + 2 * self.esc.numel() + HEADER_BYTES)

    @property
    def bits_per_weight(self) -> float:
        """Storage per original weight, escapes, row padding and header included."""
        return 8.0 * self.nbytes / max(self.numel, 1)

    @property
    def escape_rate(self) -> float:
        """Fraction of groups stored verbatim."""
        n_groups = self.rows * (self.padded_cols // self.group)
        return self.n_escaped / max(n_groups, 1)

    @property
    def device(self) -> torch.device:
        return self.sm.device

    def to(self, device: torch.device | str) -> NF12Tensor:
        """The same encoding on another device."""
        return NF12Tensor(
            sm=self.sm.to(device),
            ex=self.ex.to(device),
            esc=self.esc.to(device),
            shape=self.shape,
            base=self.base,
            sentinel=self.sentinel,
            group=self.group,
        )

    def decode(self) -> torch.Tensor:
        """The original BF16 tensor, bit for bit (see :func:`decode`)."""
        return decode(self)


def exponent_histogram(bits: torch.Tensor) -> torch.Tensor:
    """Counts of the 256 biased exponents ``e = (bits >> 7) & 0xFF`` of BF16 weights or bits."""
    if bits.dtype == torch.bfloat16:
        bits = bits.contiguous().view(torch.int16)
    e = (bits.to(torch.int32) >> 7) & _EXP_MASK
    return torch.bincount(e.flatten(), minlength=256)


def choose_window(hist: torch.Tensor) -> int:
    """The window base ``b``: the 16 consecutive normal exponents holding the most weights.

    ``b = argmax_b sum_{e=b}^{b+15} hist[e]`` over ``b in [1, 239]``: exponents 0 (zeros and
    subnormals) and 255 (inf/NaN) are never codable, so the window lies in ``[1, 254]``. Ties go
    to the lowest ``b``. A matrix with no normal weight gets ``b = 112`` (scale ``k = 0``). The
    paper's scale is ``k = 112 - b``.
    """
    h = hist.to(torch.int64).clone()
    h[0] = 0
    h[255] = 0
    if int(h.sum()) == 0:
        return 112
    cs = torch.cumsum(h, 0)
    starts = torch.arange(1, 256 - WINDOW, device=h.device)  # b = 1 .. 239
    sums = cs[starts + WINDOW - 1] - cs[starts - 1]
    return int(starts[int(torch.argmax(sums))])


def _check_tensor(tensor: torch.Tensor, group: int, name: str) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise Nf12Error(f"{name}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype != torch.bfloat16:
        raise Nf12Error(f"{name}: dtype {tensor.dtype} is not torch.bfloat16 (NF12 codes BF16)")
    if tensor.ndim == 0 or tensor.numel() == 0:
        raise Nf12Error(f"{name}: shape {tuple(tensor.shape)} has no rows of weights to encode")
    if group not in GROUPS:
        raise Nf12Error(f"group {group}: must be one of {GROUPS}")


#: Rows are encoded in chunks of about this many weights, so encoding a matrix needs a bounded
#: amount of scratch memory beyond its output planes (a 1G-weight embedding stays encodable).
CHUNK_WEIGHTS = 1 << 24


def _row_bits(rows2d: torch.Tensor, group: int) -> torch.Tensor:
    """BF16 bits of some rows as ``int32[r, Cp]`` (padded with +0.0 to a multiple of ``group``)."""
    bits = rows2d.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    cols = bits.shape[1]
    padded = -(-cols // group) * group
    if padded != cols:
        bits = torch.nn.functional.pad(bits, (0, padded - cols))
    return bits


def _codes(
    bits: torch.Tensor, cols: int, base: int, group: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """In-window codes ``int32[r, Cp/G, G]`` (0 where out of window) and the codable-group mask."""
    rows, cp = bits.shape
    e = (bits >> 7) & _EXP_MASK
    in_window = (e >= base) & (e <= base + WINDOW - 1)
    if cp != cols:
        in_window[:, cols:] = True  # padding is never decoded: it must not force an escape
    code = ((bits >> 4) & 0x800) | (((e - base) & 0xF) << 7) | (bits & 0x7F)
    code = torch.where(in_window, code, torch.zeros_like(code)).view(rows, cp // group, group)
    return code, in_window.view(rows, cp // group, group).all(dim=-1)


def encode(
    tensor: torch.Tensor,
    group: int = DEFAULT_GROUP,
    *,
    name: str = "tensor",
    chunk_weights: int = CHUNK_WEIGHTS,
) -> NF12Tensor:
    """Encode a BF16 tensor (rows = all leading dims, groups along the last dim) as NF12.

    Per weight with biased exponent ``e`` in the window ``[b, b+15]``:
    ``c = s<<11 | (e-b)<<7 | m``. A group is escaped when any of its weights is outside the
    window, or when its slot-0 code happens to equal the sentinel ``S`` (the decoder tests only
    slot 0). ``S`` is the 12-bit code least used at slot 0 of the otherwise codable groups, so it
    costs no escapes whenever some code is unused there (always, in practice). An escaped group
    ``i`` (row-major order) stores ``slot0 = S``, ``slot1 = i >> 12``, ``slot2 = i & 0xFFF`` and
    zeros after, and its weights go verbatim to ``esc[i]``.

    Three passes over row chunks of ``chunk_weights``: the exponent histogram (gives ``b``),
    the slot-0 code counts (give ``S``), then the planes.
    """
    _check_little_endian()
    _check_tensor(tensor, group, name)
    cols = int(tensor.shape[-1])
    rows = tensor.numel() // cols
    matrix = tensor.detach().reshape(rows, cols)
    cp = -(-cols // group) * group
    step = max(1, chunk_weights // cp)
    spans = [(r, min(r + step, rows)) for r in range(0, rows, step)]
    hist = torch.zeros(256, dtype=torch.int64, device=matrix.device)
    for r0, r1 in spans:
        hist += exponent_histogram(matrix[r0:r1])
    base = choose_window(hist)
    counts = torch.zeros(_CODE_VALUES, dtype=torch.int64, device=matrix.device)
    for r0, r1 in spans:
        code, codable = _codes(_row_bits(matrix[r0:r1], group), cols, base, group)
        counts += torch.bincount(code[..., 0][codable], minlength=_CODE_VALUES)
    sentinel = int(torch.argmin(counts))
    sm = torch.empty(rows, cp, dtype=torch.uint8, device=matrix.device)
    ex = torch.empty(rows, cp // 2, dtype=torch.uint8, device=matrix.device)
    escs: list[torch.Tensor] = []
    n_esc = 0
    for r0, r1 in spans:
        bits = _row_bits(matrix[r0:r1], group)
        code, codable = _codes(bits, cols, base, group)
        escaped = ~codable | (code[..., 0] == sentinel)
        k = int(escaped.sum())
        if n_esc + k >= MAX_ESCAPES:
            raise TooManyEscapesError(
                f"{name}: more than {MAX_ESCAPES - 1} escaped groups exceed the 24-bit escape "
                "index; keep this tensor verbatim"
            )
        if k:
            escs.append(bits.view(r1 - r0, cp // group, group)[escaped].to(torch.int16))
            idx = torch.arange(n_esc, n_esc + k, device=bits.device, dtype=torch.int32)
            header = torch.zeros(k, group, dtype=torch.int32, device=bits.device)
            header[:, 0] = sentinel
            header[:, 1] = idx >> 12
            header[:, 2] = idx & 0xFFF
            code[escaped] = header
            n_esc += k
        flat = code.view(r1 - r0, cp)
        sm[r0:r1] = (((flat >> 4) & 0x80) | (flat & 0x7F)).to(torch.uint8)
        e4 = ((flat >> 7) & 0xF).to(torch.uint8)
        ex[r0:r1] = e4[:, 0::2] | (e4[:, 1::2] << 4)
    if escs:
        esc = torch.cat(escs).view(torch.bfloat16)
    else:
        esc = torch.zeros(0, group, dtype=torch.bfloat16, device=matrix.device)
    return NF12Tensor(
        sm=sm,
        ex=ex,
        esc=esc.contiguous(),
        shape=tuple(int(s) for s in tensor.shape),
        base=base,
        sentinel=sentinel,
        group=group,
    )


def _check_encoded(nt: NF12Tensor) -> None:
    """Reject an NF12Tensor whose planes disagree with its numbers (corruption, hand edits)."""
    if nt.group not in GROUPS:
        raise Nf12Error(f"group {nt.group}: must be one of {GROUPS}")
    if not 1 <= nt.base <= 255 - WINDOW:
        raise Nf12Error(f"base {nt.base}: window must lie in the normal exponents [1, 254]")
    if not 0 <= nt.sentinel < _CODE_VALUES:
        raise Nf12Error(f"sentinel {nt.sentinel}: not a 12-bit code")
    if nt.sm.dtype != torch.uint8 or nt.ex.dtype != torch.uint8 or nt.esc.dtype != torch.bfloat16:
        raise Nf12Error("planes must be uint8 (sm, ex) and bfloat16 (esc)")
    if not nt.shape:
        raise Nf12Error("shape: empty")
    cp = -(-nt.cols // nt.group) * nt.group
    rows = nt.numel // max(nt.cols, 1)
    if tuple(nt.sm.shape) != (rows, cp) or tuple(nt.ex.shape) != (rows, cp // 2):
        raise Nf12Error(
            f"planes sm{tuple(nt.sm.shape)}/ex{tuple(nt.ex.shape)} do not fit shape {nt.shape} "
            f"at group {nt.group}"
        )
    if nt.esc.ndim != 2 or nt.esc.shape[1] != nt.group:
        raise Nf12Error(f"esc{tuple(nt.esc.shape)}: expected [n_esc, {nt.group}]")


def _slot_codes(sm: torch.Tensor, e4: torch.Tensor) -> torch.Tensor:
    """12-bit codes ``s<<11 | e4<<7 | m`` from the sign/mantissa byte and the 4-bit exponent."""
    s = sm.to(torch.int32)
    return ((s & 0x80) << 4) | (e4.to(torch.int32) << 7) | (s & 0x7F)


def _bf16_bytes(sm: torch.Tensor, ex: torch.Tensor, base: int) -> torch.Tensor:
    """The two BF16 byte planes ``(lo, hi)`` of every weight, as ``uint8[R, Cp, 2]``."""
    rows, cp = sm.shape
    e4 = torch.stack((ex & 0xF, ex >> 4), dim=-1).view(rows, cp)
    exp = e4 + base  # uint8: b + 15 <= 254, no wrap
    lo = ((exp & 1) << 7) | (sm & 0x7F)
    hi = (sm & 0x80) | (exp >> 1)
    return torch.stack((lo, hi), dim=-1)


def decode(nt: NF12Tensor, *, whole: bool = True, check: bool = True) -> torch.Tensor:
    """Rebuild the BF16 tensor from its NF12 encoding, bit for bit.

    With ``E = (e - b) + b`` (the 4-bit field plus the window base), the two bytes of each BF16
    weight are ``lo = (E & 1)<<7 | m`` and ``hi = s<<7 | E>>1``: uint8 work, the add being the
    paper's OR with ``0x3800`` followed by the exact ``2^-k`` rescale. Groups whose slot 0 equals
    the sentinel are then replaced by ``esc[slot1<<12 | slot2]``.

    ``check`` (the default) verifies that the sentinel count equals the escape buffer's length
    and that every index is in range, which costs two host syncs. ``check=False`` is the hot path
    of :class:`nf12.nn.NF12Linear` for planes checked when they were loaded: no host sync (a
    ``torch.where`` over gathered groups instead of a masked scatter). ``whole=False`` decodes a
    slice of rows whose escape indices point into the whole matrix's buffer (skips the check
    that every buffered group is referenced).
    """
    _check_little_endian()
    _check_encoded(nt)
    g = nt.group
    rows, cp = nt.rows, nt.padded_cols
    out = _bf16_bytes(nt.sm, nt.ex, nt.base).view(torch.bfloat16).view(rows, cp)
    # Only slots 0-2 of a group are read as codes: slot 0 for every group (column g*k, the low
    # nibble of ex byte g*k/2), slots 1-2 where escaped.
    escaped = _slot_codes(nt.sm[:, 0::g], nt.ex[:, 0 :: g // 2] & 0xF) == nt.sentinel
    if not check:
        if nt.n_escaped == 0:
            return out[:, : nt.cols].reshape(nt.shape)
        slot1 = _slot_codes(nt.sm[:, 1::g], nt.ex[:, 0 :: g // 2] >> 4)
        slot2 = _slot_codes(nt.sm[:, 2::g], nt.ex[:, 1 :: g // 2] & 0xF)
        idx = ((slot1 << 12) | slot2).clamp_(max=nt.n_escaped - 1).long()
        grouped = torch.where(escaped[..., None], nt.esc[idx], out.view(rows, cp // g, g))
        return grouped.view(rows, cp)[:, : nt.cols].reshape(nt.shape)
    n_found = int(escaped.sum())
    if whole and n_found != nt.n_escaped:
        raise Nf12Error(
            f"escape buffer holds {nt.n_escaped} groups but {n_found} groups carry the sentinel "
            f"{nt.sentinel} (corrupted planes)"
        )
    if n_found:
        r, k = escaped.nonzero(as_tuple=True)
        c0 = k * g
        e_lo = nt.ex[r, c0 // 2]
        e_hi = nt.ex[r, (c0 + 2) // 2]
        slot1 = _slot_codes(nt.sm[r, c0 + 1], e_lo >> 4)
        slot2 = _slot_codes(nt.sm[r, c0 + 2], e_hi & 0xF)
        idx = (slot1 << 12) | slot2
        if int(idx.max()) >= nt.n_escaped:
            raise Nf12Error(
                f"escape index {int(idx.max())} out of range for {nt.n_escaped} escaped groups"
            )
        out.view(rows, cp // g, g)[r, k] = nt.esc[idx.long()]
    return out[:, : nt.cols].reshape(nt.shape)


def escape_rate(tensor: torch.Tensor, group: int) -> float:
    """Fraction of groups of ``group`` weights that would be escaped (sentinel included)."""
    return encode(tensor, group).escape_rate


def exponent_entropy(hist: torch.Tensor) -> float:
    """Shannon entropy ``H = -sum_e p_e log2 p_e`` of an exponent histogram, in bits.

    ``8 + H`` bits per weight is the bound for any code that keeps sign and mantissa verbatim and
    entropy-codes the exponent (DFloat11's design point).
    """
    h = hist.to(torch.float64)
    total = float(h.sum())
    if total == 0:
        return 0.0
    p = h[h > 0] / total
    return float(-(p * torch.log2(p)).sum())


def coverage(tensor: torch.Tensor) -> float:
    """Fraction of a BF16 tensor's weights inside its best 16-exponent window."""
    bits = tensor.detach().contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    hist = exponent_histogram(bits)
    b = choose_window(hist)
    return float(hist[b : b + WINDOW].sum()) / max(tensor.numel(), 1)
