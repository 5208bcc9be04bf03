"""Triton kernels against their PyTorch references: the interpreter on CPU, compiled on CUDA."""

import pytest
import torch
from conftest import all_bf16_patterns, same_bits

pytest.importorskip("triton")

from nf12.errors import Nf12Error
from nf12.format import encode
from nf12.kernels import (
    INTERPRET,
    KernelConfig,
    bf16_gemm_triton,
    bf16_gemv_triton,
    decode_reference,
    decode_triton,
    gemm_reference,
    gemm_triton,
    gemv_reference,
    gemv_triton,
    tuned_config,
)

#: The CPU tests hand the kernels CPU tensors: only Triton's interpreter runs those. On a GPU
#: machine the `gpu` tests below check the same kernels compiled.
interpreted = pytest.mark.skipif(not INTERPRET, reason="CPU tensors run only in the interpreter")

#: Tilings the tests run explicitly (the interpreter's autotuner has only one): uneven splits
#: of K, tiles wider than a row, tiles of one group.
CONFIGS = [
    None,
    KernelConfig(block_r=8, block_k=128, split_k=3),
    KernelConfig(block_r=32, block_k=256, split_k=1),
]


def exactly_summable(rows: int, cols: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights k/64 and integer inputs: every fp32 partial sum is exact, in any order."""
    gen = torch.Generator().manual_seed(seed)
    w = (torch.randint(-64, 64, (rows, cols), generator=gen).float() / 64).to(torch.bfloat16)
    w[1, 3] = 2.0**40  # out of the window: an escaped group, still exact
    w[2, 8:16] = 0.0
    x = torch.randint(-8, 8, (cols,), generator=gen).float()
    return w, x


@interpreted
@pytest.mark.parametrize("group", [8, 16, 32, 128])
def test_packed_decode_equals_the_codec_on_every_bf16_pattern(group):
    w = all_bf16_patterns()[:48, :200].contiguous()  # escapes everywhere, 200 cols: padded
    nt = encode(w, group)
    assert nt.n_escaped > 0
    out = decode_triton(nt)
    assert same_bits(out, decode_reference(nt))
    assert same_bits(out, w)


@interpreted
def test_packed_decode_with_a_tile_of_one_group_and_many_escape_indices():
    w = torch.zeros(5000, 8, dtype=torch.bfloat16)
    w[:, 1:] = 0.5
    w[::7, 0] = 0.25  # most groups escaped (both index slots used), some not
    nt = encode(w)
    assert nt.n_escaped > 4096
    assert same_bits(decode_triton(nt, config=KernelConfig(block_r=64, block_k=8)), w)


@interpreted
def test_packed_decode_on_gaussian_weights(gaussian):
    nt = encode(gaussian, 16)
    assert same_bits(decode_triton(nt, config=KernelConfig(8, 256)), gaussian)


@interpreted
@pytest.mark.parametrize("config", CONFIGS)
def test_fused_gemv_equals_the_reference_exactly(config):
    w, x = exactly_summable(37, 1000, 0)
    nt = encode(w)
    assert nt.n_escaped >= 2
    assert torch.equal(gemv_triton(nt, x, config=config), gemv_reference(nt, x))


@interpreted
def test_fused_gemv_matches_the_reference_on_gaussian_weights(gaussian):
    nt = encode(gaussian, 32)
    x = torch.randn(gaussian.shape[1], generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(gemv_triton(nt, x), gemv_reference(nt, x), rtol=1e-5, atol=1e-6)


@interpreted
@pytest.mark.parametrize("m", [1, 5, 16])
@pytest.mark.parametrize("config", [None, KernelConfig(block_r=32, block_k=128, split_k=2)])
def test_fused_small_m_gemm_equals_the_reference_exactly(m, config):
    w, _ = exactly_summable(40, 300, m)
    nt = encode(w)
    x = torch.randint(-8, 8, (m, 300), generator=torch.Generator().manual_seed(m)).float()
    assert torch.equal(gemm_triton(nt, x, config=config), gemm_reference(nt, x))


@interpreted
def test_matched_bf16_kernels_are_the_same_code_on_plain_weights():
    w, x = exactly_summable(37, 1000, 1)
    exact = w.float() @ x
    for config in CONFIGS:
        assert torch.equal(bf16_gemv_triton(w, x, config=config), exact)
    xs = torch.randint(-8, 8, (4, 1000), generator=torch.Generator().manual_seed(2)).float()
    assert torch.equal(bf16_gemm_triton(w, xs), xs @ w.float().t())
    gemv_triton(encode(w), x)
    assert isinstance(tuned_config("gemv"), KernelConfig)


@interpreted
def test_kernels_refuse_what_they_cannot_run():
    w, x = exactly_summable(16, 64, 0)
    with pytest.raises(Nf12Error, match="groups of 8"):
        decode_triton(encode(w, 4))
    with pytest.raises(Nf12Error, match="columns"):
        gemv_triton(encode(w), x[:10])
    with pytest.raises(Nf12Error, match=r"1\.\.16"):
        gemm_triton(encode(w), torch.zeros(17, 64))
    with pytest.raises(Nf12Error, match="multiple of the group"):
        gemv_triton(encode(w, 32), x, config=KernelConfig(block_r=8, block_k=16))
    with pytest.raises(Nf12Error, match="2-D"):
        decode_triton(encode(torch.zeros(2, 4, 8, dtype=torch.bfloat16)))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4096, 4096), (1000, 3000)])
def test_kernels_on_cuda(shape):
    gen = torch.Generator().manual_seed(0)
    w = (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)
    w[0, :8] = 0.0
    nt = encode(w).to("cuda")
    assert same_bits(decode_triton(nt).cpu(), w)
    x = torch.randn(shape[1], generator=gen).cuda()
    torch.testing.assert_close(gemv_triton(nt, x), gemv_reference(nt, x), rtol=1e-4, atol=1e-3)
    wd = w.cuda()
    torch.testing.assert_close(bf16_gemv_triton(wd, x), wd.float() @ x, rtol=1e-4, atol=1e-3)
    for m in (2, 8, 16):
        xs = torch.randn(m, shape[1], generator=gen).cuda()
        torch.testing.assert_close(gemm_triton(nt, xs), gemm_reference(nt, xs), rtol=1e-3,
                                   atol=1e-2)  # fmt: skip


@pytest.mark.gpu
def test_decode_addresses_more_than_2_to_the_31_weights_on_cuda():
    rows, cols = 65600, 32768  # 2.15e9 weights: int32 offsets would wrap
    w = torch.full((rows, cols), 0.5, dtype=torch.bfloat16, device="cuda")
    w[-1, -8:] = torch.arange(8, device="cuda").to(torch.bfloat16)  # escaped group at the end
    w[-2, -3] = -0.75
    nt = encode(w)
    del w
    out = decode_triton(nt)
    assert out[-1, -8:].tolist() == list(range(8))
    assert out[-2, -3].item() == -0.75
    assert out[0, 0].item() == 0.5
