import pytest
import torch
from conftest import all_bf16_patterns, same_bits
from nf12.errors import Nf12Error
from nf12.format import (
    GROUPS,
    HEADER_BYTES,
    NF12Tensor,
    choose_window,
    coverage,
    decode,
    encode,
    exponent_entropy,
    exponent_histogram,
)


def bf16(bits: list[int]) -> torch.Tensor:
    return torch.tensor(bits, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


@pytest.mark.parametrize("group", GROUPS)
def test_roundtrip_is_bit_exact_over_all_65536_bf16_patterns(group):
    w = all_bf16_patterns()
    nt = encode(w, group)
    assert nt.n_escaped > 0  # zeros, subnormals, inf/NaN and 224 other exponents escape
    assert same_bits(decode(nt), w)


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (3, 5, 9), (2, 1000), (129, 3), (5,)])
@pytest.mark.parametrize("group", [4, 8, 32])
def test_random_matrices_of_awkward_shapes_round_trip(shape, group):
    gen = torch.Generator().manual_seed(sum(shape) + group)
    w = (torch.randn(*shape, generator=gen) * 0.05).to(torch.bfloat16)
    w.view(-1)[:: max(w.numel() // 3, 1)] = 0.0  # a few escapes in every shape
    nt = encode(w, group)
    assert same_bits(decode(nt), w)
    assert nt.shape == tuple(shape)


def test_every_escape_path_round_trips():
    gen = torch.Generator().manual_seed(1)
    w = (torch.randn(64, 64, generator=gen) * 0.02).to(torch.bfloat16)
    flat = w.view(-1).view(torch.int16)
    specials = {
        0: 0x0000,  # +0
        9: 0x8000,  # -0
        17: 0x0001,  # smallest subnormal
        25: 0x807F,  # negative subnormal
        33: 0x7F80,  # +inf
        41: 0xFF80,  # -inf
        49: 0x7FC0,  # quiet NaN
        57: 0x7F81,  # signalling NaN payload
        65: 0xFFFF,  # negative NaN, all payload bits
        73: 0x4F00,  # far above the window
        81: 0x0080,  # smallest normal: below the window
    }
    for i, bits in specials.items():
        flat[i] = torch.tensor(bits, dtype=torch.int32).to(torch.int16)
    w[:, 61:] = 1.0  # the padded last group of a 64-col row at group 8 is whole: use 61 cols too
    for cols in (64, 61):
        part = w[:, :cols].contiguous()
        nt = encode(part)
        assert nt.n_escaped >= len(specials)
        assert same_bits(decode(nt), part)


def test_slot0_equal_to_sentinel_forces_an_escape():
    # Every group starts with a code from a set that covers all 4096 codes except one, then the
    # sentinel is the unused one; now make one group's slot 0 equal to it.
    codes = torch.arange(4096, dtype=torch.int32)
    base = 112
    bits = ((codes & 0x800) << 4) | (((codes >> 7) & 0xF) + base) << 7 | (codes & 0x7F)
    w = torch.zeros(4096, 8, dtype=torch.int32)
    w[:] = 0x3F80  # 1.0: in window
    w[:, 0] = bits
    m = w.to(torch.int16).view(torch.bfloat16)
    nt = encode(m)
    # every code appears once at slot 0: the least used one still collides once
    assert nt.n_escaped == 1
    assert same_bits(decode(nt), m)


def test_more_than_4096_escapes_use_both_index_slots():
    w = torch.zeros(5000, 8, dtype=torch.bfloat16)
    w[:, 1:] = 0.5
    nt = encode(w)
    assert nt.n_escaped == 5000
    assert same_bits(decode(nt), w)


def test_code_layout_matches_the_spec():
    # 1.0 = 0x3F80 (e=127), -1.5 = 0xBFC0, 2^-15 = 0x3800 (e=112); window is [112, 127].
    w = bf16([0x3F80, 0xBFC0, 0x3800, 0x3F80, 0x3800, 0x3800, 0x3800, 0x3800]).view(1, 8)
    nt = encode(w)
    assert nt.base == 112
    assert nt.scale_exp == 0
    assert nt.sm.tolist() == [[0x00, 0xC0, 0, 0, 0, 0, 0, 0]]  # sign<<7 | mantissa
    assert nt.ex.tolist() == [[15 | 15 << 4, 0 | 15 << 4, 0, 0]]  # col 2j low, 2j+1 high nibble
    assert nt.n_escaped == 0
    assert nt.nbytes == 8 + 4 + HEADER_BYTES


def test_window_is_the_16_exponents_holding_the_most_weights():
    hist = torch.zeros(256, dtype=torch.int64)
    hist[100:110] = 10  # 100 weights
    hist[120:140] = 9  # 180 weights spread over 20 exponents: best 16 hold 144
    assert choose_window(hist) == 120
    hist[0] = 10**6  # zeros never count
    hist[255] = 10**6
    assert choose_window(hist) == 120


def test_gaussian_weights_cost_about_12_bits(gaussian):
    nt = encode(gaussian)
    assert nt.escape_rate < 0.01
    assert 12.0 < nt.bits_per_weight < 12.2
    assert coverage(gaussian) > 0.997
    bits = gaussian.view(torch.int16).to(torch.int32) & 0xFFFF
    assert 2.0 < exponent_entropy(exponent_histogram(bits)) < 3.2


def test_rejects_non_bf16_tensors():
    with pytest.raises(Nf12Error, match="float32"):
        encode(torch.zeros(4, 8))
    with pytest.raises(Nf12Error, match="group"):
        encode(torch.zeros(4, 8, dtype=torch.bfloat16), group=6)


def test_decode_rejects_corrupted_planes(gaussian):
    g = gaussian.clone()
    g[0, 0] = 0.0
    nt = encode(g)
    broken = NF12Tensor(nt.sm, nt.ex, nt.esc[:0], nt.shape, nt.base, nt.sentinel, nt.group)
    with pytest.raises(Nf12Error, match="escape buffer"):
        decode(broken)
    sm = nt.sm.clone()
    sm[0, 2] = 0x7F  # slot 2 of the escaped group: the index now points past the buffer
    ex = nt.ex.clone()
    ex[0, 1] |= 0xF
    bad = NF12Tensor(sm, ex, nt.esc, nt.shape, nt.base, nt.sentinel, nt.group)
    with pytest.raises(Nf12Error, match="escape index"):
        decode(bad)
    with pytest.raises(Nf12Error, match="planes"):
        decode(NF12Tensor(nt.sm[:, :8], nt.ex, nt.esc, nt.shape, nt.base, nt.sentinel, nt.group))


@pytest.mark.gpu
def test_codec_is_bit_exact_on_cuda():
    w = all_bf16_patterns().cuda()
    nt = encode(w)
    assert nt.device.type == "cuda"
    assert same_bits(decode(nt).cpu(), w.cpu())
    cpu = encode(w.cpu())
    assert torch.equal(cpu.sm, nt.sm.cpu())
    assert torch.equal(cpu.ex, nt.ex.cpu())


def test_chunked_encoding_equals_one_chunk_and_keeps_escape_indices_global():
    w = all_bf16_patterns().reshape(1024, 64)
    whole = encode(w, chunk_weights=1 << 30)
    chunked = encode(w, chunk_weights=64 * 5)  # 5 rows per chunk, escapes in every chunk
    assert torch.equal(whole.sm, chunked.sm)
    assert torch.equal(whole.ex, chunked.ex)
    assert same_bits(whole.esc, chunked.esc)
    assert same_bits(decode(chunked), w)
