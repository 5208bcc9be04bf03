"""Baseline: a Huffman-coded exponent codec at DFloat11's design point, bit-exact.

DFloat11 keeps each BF16 weight's sign and mantissa as a raw byte plane and Huffman-codes the
8-bit exponent, because trained exponents carry only ~2.6 bits of information. Its GPU decoder
gives every thread a chunk of the bit stream whose starting bit offset is stored (the "gaps" /
"output positions" buffers), looks codes up in tables, and writes the BF16 block to a buffer.

This module is that design on torch, written to be fast so the comparison with NF12 is fair:

- one canonical Huffman codebook for a bundle of tensors (DFloat11 shares one per block), with
  code lengths limited to :data:`MAX_CODE_LEN` = 16 so a decoder can peek a fixed 16 bits;
- the exponent stream is cut into chunks of :data:`DEFAULT_CHUNK` symbols whose starting bit
  offsets are stored (32 bits each, counted in the size);
- decoding runs all chunks in lockstep: step ``t`` decodes symbol ``t`` of every chunk with one
  32-bit gather, a shift, and one lookup in a ``2^16``-entry table (symbol, length). The Python
  loop is over the ``chunk`` steps, never over weights.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from nf12.errors import Nf12Error
from nf12.format import HEADER_BYTES, exponent_histogram

__all__ = [
    "DEFAULT_CHUNK",
    "MAX_CODE_LEN",
    "HuffmanBundle",
    "canonical_codes",
    "code_lengths",
    "decode_bundle",
    "encode_bundle",
]

#: Longest code: the decoder peeks this many bits (a 64 Ki-entry table).
MAX_CODE_LEN = 16
#: Symbols per chunk. 32-bit offsets per 128 symbols cost 0.25 bits/weight, about what
#: DFloat11's gaps and output-position buffers cost.
DEFAULT_CHUNK = 128
_OFFSET_BYTES = 4
_CODEBOOK_BYTES = 256  # one length byte per exponent: a canonical code is rebuilt from lengths


@dataclass(frozen=True)
class HuffmanBundle:
    """Several BF16 tensors, exponents Huffman-coded with one codebook, sign/mantissa raw."""

    stream: torch.Tensor  # uint8: the exponent codes, MSB first, back to back
    offsets: torch.Tensor  # int64[n_chunks]: bit offset where each chunk starts
    sm: torch.Tensor  # uint8[total]: sign<<7 | mantissa of every weight
    lengths: torch.Tensor  # int64[256]: code length per exponent (0 = unused)
    shapes: tuple[tuple[int, ...], ...]
    chunk: int
    stream_bits: int

    @property
    def numel(self) -> int:
        return int(self.sm.numel())

    @property
    def nbytes(self) -> int:
        """Stream, offsets, sign/mantissa plane, codebook and one header per tensor."""
        return int(
            math.ceil(self.stream_bits / 8)
            + _OFFSET_BYTES * self.offsets.numel()
            + self.sm.numel()
            + _CODEBOOK_BYTES
            + HEADER_BYTES * len(self.shapes)
        )

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.nbytes / max(self.numel, 1)

    def to(self, device: torch.device | str) -> HuffmanBundle:
        """The same bundle on another device (its decoder runs where its tensors are)."""
        return HuffmanBundle(
            stream=self.stream.to(device),
            offsets=self.offsets.to(device),
            sm=self.sm.to(device),
            lengths=self.lengths,
            shapes=self.shapes,
            chunk=self.chunk,
            stream_bits=self.stream_bits,
        )


def code_lengths(hist: torch.Tensor, max_len: int = MAX_CODE_LEN) -> torch.Tensor:
    """Huffman code lengths for a 256-symbol histogram, limited to ``max_len`` bits.

    Plain Huffman (merge the two lightest subtrees) gives lengths ``l_i`` with
    ``sum_i 2^-l_i = 1``. Lengths over ``max_len`` are clipped to it, then the Kraft sum is
    restored to ``<= 1`` by lengthening the least frequent codes still shorter than ``max_len``
    (the heuristic zlib and DFloat11's limit use). The loops are over the <= 256 symbols.
    """
    counts = [int(c) for c in hist.tolist()]
    used = [s for s, c in enumerate(counts) if c > 0]
    lengths = [0] * 256
    if not used:
        return torch.zeros(256, dtype=torch.int64)
    if len(used) == 1:
        lengths[used[0]] = 1
        return torch.tensor(lengths, dtype=torch.int64)
    heap: list[tuple[int, int, list[int]]] = [(counts[s], s, [s]) for s in used]
    heapq.heapify(heap)
    tie = 256
    while len(heap) > 1:
        c1, _, s1 = heapq.heappop(heap)
        c2, _, s2 = heapq.heappop(heap)
        for s in s1 + s2:
            lengths[s] += 1
        heapq.heappush(heap, (c1 + c2, tie, s1 + s2))
        tie += 1
    if max(lengths) > max_len:
        lengths = [min(v, max_len) for v in lengths]
        budget = 1 << max_len
        kraft = sum(1 << (max_len - v) for v in lengths if v)
        by_rarity = sorted(used, key=lambda s: (counts[s], -s))
        while kraft > budget:
            for s in sorted(by_rarity, key=lambda s: -lengths[s]):
                if lengths[s] < max_len:
                    kraft -= 1 << (max_len - lengths[s] - 1)
                    lengths[s] += 1
                    break
    return torch.tensor(lengths, dtype=torch.int64)


def canonical_codes(lengths: torch.Tensor) -> torch.Tensor:
    """Canonical Huffman codes: symbols sorted by (length, symbol) get consecutive codes."""
    lens = [int(v) for v in lengths.tolist()]
    codes = [0] * 256
    code = 0
    prev = 0
    for sym in sorted((s for s in range(256) if lens[s]), key=lambda s: (lens[s], s)):
        code <<= lens[sym] - prev
        codes[sym] = code
        code += 1
        prev = lens[sym]
    return torch.tensor(codes, dtype=torch.int64)


def _decode_table(lengths: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """``table[peek16] = symbol | length << 8`` for every 16-bit window starting at a code."""
    table = torch.zeros(1 << MAX_CODE_LEN, dtype=torch.int32)
    for sym in range(256):
        n = int(lengths[sym])
        if n:
            lo = int(codes[sym]) << (MAX_CODE_LEN - n)
            table[lo : lo + (1 << (MAX_CODE_LEN - n))] = sym | (n << 8)
    return table


def encode_bundle(
    tensors: Sequence[torch.Tensor], chunk: int = DEFAULT_CHUNK, *, name: str = "bundle"
) -> HuffmanBundle:
    """Entropy-code the exponents of BF16 ``tensors`` with one canonical Huffman codebook.

    Symbol ``i`` (the exponent of weight ``i`` in the concatenation) with code ``c_i`` of length
    ``l_i`` is written at bit ``p_i = sum_{j<i} l_j`` (MSB first). Each code spans at most 3 bytes,
    so the stream is built with one scatter-add per byte position (codes never share a bit, so
    adding their bytes is OR-ing them). Chunk ``k`` starts at bit ``p_{k * chunk}``.
    """
    if chunk < 1:
        raise Nf12Error(f"chunk {chunk}: must be positive")
    flats = []
    for i, t in enumerate(tensors):
        if t.dtype != torch.bfloat16:
            raise Nf12Error(f"{name}[{i}]: dtype {t.dtype} is not torch.bfloat16")
        flats.append(t.detach().contiguous().view(torch.int16).reshape(-1).to(torch.int32))
    if not flats:
        raise Nf12Error(f"{name}: no tensors to encode")
    bits = torch.cat(flats) & 0xFFFF
    exp = ((bits >> 7) & 0xFF).long()
    sm = (((bits >> 8) & 0x80) | (bits & 0x7F)).to(torch.uint8)
    lengths = code_lengths(exponent_histogram(bits))
    codes = canonical_codes(lengths).to(bits.device)
    length = lengths.to(device=bits.device, dtype=torch.int32)[exp]
    end = torch.cumsum(length, 0, dtype=torch.int64)
    total_bits = int(end[-1])
    pos = end - length
    offsets = pos[::chunk].clone()
    # The code left-aligned in a 24-bit window that starts at the byte holding bit p_i.
    value = codes.to(torch.int32)[exp] << (24 - length - (pos & 7).to(torch.int32))
    byte = pos >> 3
    stream = torch.zeros(total_bits // 8 + 3, dtype=torch.int32, device=bits.device)
    for shift, delta in ((16, 0), (8, 1), (0, 2)):
        stream.index_add_(0, byte + delta, (value >> shift) & 0xFF)
    stream = stream[: math.ceil(total_bits / 8)].to(torch.uint8)
    return HuffmanBundle(
        stream=stream,
        offsets=offsets,
        sm=sm,
        lengths=lengths,
        shapes=tuple(tuple(int(s) for s in t.shape) for t in tensors),
        chunk=chunk,
        stream_bits=total_bits,
    )


def decode_bundle(bundle: HuffmanBundle) -> list[torch.Tensor]:
    """Decode every tensor of ``bundle`` back to its BF16 bits.

    All chunks advance together: at step ``t`` each chunk peeks the 16 bits at its position
    ``p`` (one gather of a 32-bit big-endian word, a shift, a mask), looks up ``symbol | len<<8``,
    stores the symbol and moves ``p += len``. Then the BF16 bytes are rebuilt from the exponent
    and the sign/mantissa byte exactly as NF12's decoder does.
    """
    n = bundle.numel
    chunk = bundle.chunk
    n_chunks = int(bundle.offsets.numel())
    device = bundle.stream.device
    table = _decode_table(bundle.lengths.cpu(), canonical_codes(bundle.lengths.cpu())).to(device)
    # Pad so that a chunk decoding past the end of the stream (the last, short one) stays inside.
    pad = chunk * MAX_CODE_LEN // 8 + 8
    raw = torch.nn.functional.pad(bundle.stream.to(torch.int32), (0, pad))
    # word[j] = bytes j..j+3 big-endian; int32 wraps for byte j >= 128, but the shift below
    # is >= 9 and the mask keeps 16 bits, so the sign bits never reach the result.
    word = (raw[:-3] << 24) | (raw[1:-2] << 16) | (raw[2:-1] << 8) | raw[3:]
    index_dtype = torch.int64 if bundle.stream_bits + pad * 8 >= 2**31 else torch.int32
    pos = bundle.offsets.to(index_dtype)
    out = torch.empty(chunk, n_chunks, dtype=torch.int32, device=device)
    for step in range(chunk):
        peek = (word[pos >> 3] >> (16 - (pos & 7)).to(torch.int32)) & 0xFFFF
        entry = table[peek]
        out[step] = entry
        pos = pos + (entry >> 8)
    exp = (out.t().reshape(-1)[:n] & 0xFF).to(torch.uint8)
    lo = ((exp & 1) << 7) | (bundle.sm & 0x7F)
    hi = (bundle.sm & 0x80) | (exp >> 1)
    flat = torch.stack((lo, hi), dim=-1).view(torch.bfloat16).view(-1)
    result = []
    start = 0
    for shape in bundle.shapes:
        size = math.prod(shape)
        result.append(flat[start : start + size].view(shape))
        start += size
    return result
