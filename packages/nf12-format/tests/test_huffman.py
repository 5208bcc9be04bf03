import torch
from conftest import all_bf16_patterns, same_bits
from nf12.format import exponent_entropy, exponent_histogram
from nf12.huffman import MAX_CODE_LEN, canonical_codes, code_lengths, decode_bundle, encode_bundle


def test_huffman_baseline_is_bit_exact_on_every_pattern_and_odd_shapes(gaussian):
    tensors = [
        all_bf16_patterns(),
        gaussian,
        gaussian[:3, :7].contiguous(),
        torch.zeros(1, 1).bfloat16(),
    ]
    bundle = encode_bundle(tensors, chunk=64)
    for original, restored in zip(tensors, decode_bundle(bundle), strict=True):
        assert same_bits(restored, original)


def test_code_lengths_are_limited_and_prefix_free():
    hist = torch.tensor([2**i for i in range(30)] + [0] * 226)  # Fibonacci-like: deep tree
    lengths = code_lengths(hist)
    assert int(lengths.max()) <= MAX_CODE_LEN
    assert sum(2.0 ** -int(v) for v in lengths if v) <= 1.0
    codes = canonical_codes(lengths)
    words = {format(int(codes[s]), f"0{int(lengths[s])}b") for s in range(256) if lengths[s]}
    assert not any(a != b and b.startswith(a) for a in words for b in words)


def test_huffman_is_within_half_a_bit_of_the_entropy_bound(gaussian):
    bundle = encode_bundle([gaussian], chunk=128)
    bits = gaussian.view(torch.int16).to(torch.int32) & 0xFFFF
    bound = 8 + exponent_entropy(exponent_histogram(bits))
    stream_bits = 8 + bundle.stream_bits / gaussian.numel()
    assert bound <= stream_bits < bound + 0.2
    assert bundle.bits_per_weight > stream_bits  # offsets, codebook and header are counted
