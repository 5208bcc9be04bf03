"""Triton kernels against their PyTorch references: the interpreter on CPU, compiled on CUDA."""

import pytest
import torch
from conftest import all_bf16_patterns, same_bits

pytest.importorskip("triton")

from nf12.format import encode
from nf12.kernels import (
    decode_reference,
    decode_triton,
    gemm_reference,
    gemm_triton,
    gemv_reference,
    gemv_triton,
)


def exactly_summable(rows: int, cols: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights k/64 and integer inputs: every fp32 partial sum is exact, in any order."""
    gen = torch.Generator().manual_seed(seed)
    w = (torch.randint(-64, 64, (rows, cols), generator=gen).float() / 64).to(torch.bfloat16)
    w[1, 3] = 2.0**40  # out of the window: an escaped group, still exact
    w[2, 8:16] = 0.0
    x = torch.randint(-8, 8, (cols,), generator=gen).float()
    return w, x


def test_triton_decode_equals_the_codec_on_escapes_and_padding():
    w = all_bf16_patterns()[:48, :70].contiguous()  # escapes everywhere, 70 cols: padded
    nt = encode(w)
    assert same_bits(decode_triton(nt), decode_reference(nt))
    assert same_bits(decode_triton(nt), w)


def test_triton_decode_equals_the_codec_on_gaussian_weights(gaussian):
    nt = encode(gaussian, 16)
    assert same_bits(decode_triton(nt, block_k=32), gaussian)


def test_fused_gemv_equals_the_reference_exactly():
    w, x = exactly_summable(37, 83, 0)
    nt = encode(w)
    assert nt.n_escaped >= 2
    assert torch.equal(gemv_triton(nt, x), gemv_reference(nt, x))


def test_fused_gemv_matches_the_reference_on_gaussian_weights(gaussian):
    nt = encode(gaussian)
    x = torch.randn(gaussian.shape[1], generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(gemv_triton(nt, x), gemv_reference(nt, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m", [1, 5, 16])
def test_fused_small_m_gemm_equals_the_reference_exactly(m):
    w, _ = exactly_summable(40, 72, m)
    nt = encode(w)
    x = torch.randint(-8, 8, (m, 72), generator=torch.Generator().manual_seed(m)).float()
    assert torch.equal(gemm_triton(nt, x), gemm_reference(nt, x))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4096, 4096), (1000, 3000)])
def test_kernels_on_cuda(shape):
    gen = torch.Generator().manual_seed(0)
    w = (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)
    w[0, :8] = 0.0
    nt = encode(w).to("cuda")
    assert same_bits(decode_triton(nt).cpu(), w)
    x = torch.randn(shape[1], generator=gen).cuda()
    torch.testing.assert_close(gemv_triton(nt, x), gemv_reference(nt, x), rtol=1e-4, atol=1e-4)
    xs = torch.randn(8, shape[1], generator=gen).cuda()
    torch.testing.assert_close(gemm_triton(nt, xs), gemm_reference(nt, xs), rtol=1e-3, atol=1e-3)
