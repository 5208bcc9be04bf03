"""The triton kernel against the PyTorch reference, interpreted on the CPU (TRITON_INTERPRET=1)."""

import pytest
import torch

pytest.importorskip("triton")

from mage_attention.attention import block_attention, gather_rows
from mage_attention.kernels import gathered_attention_triton, plan_splits


@pytest.mark.parametrize(("hq", "hkv", "blk", "n"), [(8, 4, 8, 20), (4, 1, 4, 37), (6, 2, 3, 5)])
@pytest.mark.parametrize("splits", [1, 3, None])
def test_kernel_equals_the_reference_on_a_gathered_buffer(hq, hkv, blk, n, splits):
    """One split is 0.2's one-program-per-group kernel; several are reduced (flash decoding),
    including a chunk boundary inside the block's own keys (n = 37: keys 32..40 of 41)."""
    q = torch.randn(2, hq, blk, 16)
    ks, vs = torch.randn(2, hkv, n, 16), torch.randn(2, hkv, n, 16)
    kb, vb = torch.randn(2, hkv, blk, 16), torch.randn(2, hkv, blk, 16)
    ref, _ = block_attention(q, ks, vs, kb, vb, 0.3)
    out = gathered_attention_triton(q, ks, vs, kb, vb, 0.3, block_n=16, splits=splits)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_the_grid_fills_an_h100_at_batch_one():
    """MAGE's step at k = 512, B = 8 with 8 KV heads at batch 1: 0.2 launched 8 programs on
    132 SMs; the split grid launches at least one per SM, every chunk whole tiles, none empty."""
    splits, chunk = plan_splits(groups=8, keys=520, block_n=32, sms=132)
    assert 8 * splits >= 132
    assert chunk % 32 == 0
    assert (splits - 1) * chunk < 520 <= splits * chunk
    assert plan_splits(groups=64, keys=520, block_n=32, sms=132)[0] == 5  # batch 8: fewer
    assert plan_splits(groups=8, keys=20, block_n=32, sms=132) == (1, 32)  # one tile: one split


def test_kernel_gathers_from_the_cache_by_index():
    q = torch.randn(1, 8, 8, 32)
    k, v = torch.randn(1, 2, 300, 32), torch.randn(1, 2, 300, 32)
    kb, vb = torch.randn(1, 2, 8, 32), torch.randn(1, 2, 8, 32)
    idx = torch.randint(0, 300, (1, 2, 40))
    ref, _ = block_attention(q, gather_rows(k, idx), gather_rows(v, idx), kb, vb, 32**-0.5)
    out = gathered_attention_triton(q, k, v, kb, vb, 32**-0.5, idx=idx)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_the_decoder_runs_on_the_kernel():
    from mage_attention.attention import Budget
    from mage_attention.baselines import make_policy
    from mage_attention.decoding import generate
    from mage_attention.modeling import ModelSpec, build_model

    spec = ModelSpec(hidden_size=32, intermediate_size=64, layers=1, query_heads=4, kv_heads=2,
                     block_size=4, max_positions=128)  # fmt: skip
    model = build_model(spec, 40, 3).eval()
    prompt = torch.randint(4, 40, (2, 32))
    a = generate(model, prompt, 8, make_policy("mage", Budget(8, 2, 2)), backend="torch")
    b = generate(model, prompt, 8, make_policy("mage", Budget(8, 2, 2)), backend="triton")
    assert torch.equal(a.tokens, b.tokens)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_kernel_equals_the_reference_on_cuda(dtype):
    q = torch.randn(1, 32, 8, 128, device="cuda", dtype=dtype)
    k = torch.randn(1, 8, 65536, 128, device="cuda", dtype=dtype)
    v = torch.randn(1, 8, 65536, 128, device="cuda", dtype=dtype)
    kb = torch.randn(1, 8, 8, 128, device="cuda", dtype=dtype)
    vb = torch.randn(1, 8, 8, 128, device="cuda", dtype=dtype)
    idx = torch.randint(0, 65536, (1, 8, 4096), device="cuda")
    ref, _ = block_attention(q, gather_rows(k, idx), gather_rows(v, idx), kb, vb, 128**-0.5)
    tol = 2e-2 if dtype == torch.bfloat16 else 2e-3  # tf32 / bf16 tensor-core dots
    for out in (
        gathered_attention_triton(q, gather_rows(k, idx), gather_rows(v, idx), kb, vb, 128**-0.5),
        gathered_attention_triton(q, k, v, kb, vb, 128**-0.5, idx=idx),
        gathered_attention_triton(q, k, v, kb, vb, 128**-0.5, idx=idx, splits=1),
    ):
        torch.testing.assert_close(out.float(), ref.float(), atol=tol, rtol=tol)


@pytest.mark.gpu
def test_cuda_block_bench_runs_the_kernel_and_matches_exact():
    from mage_attention.timing import BlockShape, bench_block

    cmp = bench_block(BlockShape(), 32768, 8, 512, repeats=3, device="cuda", triton=True)
    assert set(cmp.times) == {"exact", "mage", "quest", "mage-triton"}
    for system in ("mage", "quest", "mage-triton"):  # the planted cache: exact's output
        assert cmp.matches(system), (system, cmp.diff[system])
