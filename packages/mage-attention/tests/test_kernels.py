"""The triton kernel against the PyTorch reference, interpreted on the CPU (TRITON_INTERPRET=1)."""

import pytest
import torch

pytest.importorskip("triton")

from mage_attention.attention import block_attention, gather_rows
from mage_attention.kernels import gathered_attention_triton


@pytest.mark.parametrize(("hq", "hkv", "blk", "n"), [(8, 4, 8, 20), (4, 1, 4, 37), (6, 2, 3, 5)])
def test_kernel_equals_the_reference_on_a_gathered_buffer(hq, hkv, blk, n):
    q = torch.randn(2, hq, blk, 16)
    ks, vs = torch.randn(2, hkv, n, 16), torch.randn(2, hkv, n, 16)
    kb, vb = torch.randn(2, hkv, blk, 16), torch.randn(2, hkv, blk, 16)
    ref, _ = block_attention(q, ks, vs, kb, vb, 0.3)
    out = gathered_attention_triton(q, ks, vs, kb, vb, 0.3, block_n=16)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


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
    ):
        torch.testing.assert_close(out.float(), ref.float(), atol=tol, rtol=tol)


@pytest.mark.gpu
def test_cuda_block_timing_runs_with_the_kernel():
    from mage_attention.timing import BlockShape, time_block

    times = time_block([32768], 2, BlockShape(), device="cuda")
    assert set(times) >= {"exact", "mage", "quest"}
    assert all(len(t[32768]) == 2 for t in times.values())
