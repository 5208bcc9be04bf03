"""Triton kernels against the PyTorch reference, interpreted on the CPU (TRITON_INTERPRET=1)."""

import pytest
import torch

pytest.importorskip("triton")

from saga_attention.attention import aggregate_scores, dense_decode, sparse_decode
from saga_attention.kernels import (
    atop_select_triton,
    dense_decode_triton,
    score_triton,
    sparse_attention_triton,
    sparse_decode_triton,
)
from saga_attention.selection import atop_n, exact_top_n


def _sets(idx, ok):
    return [set(i[o].tolist()) for i, o in zip(idx, ok, strict=True)]


def test_score_kernel_equals_grouped_query_scores():
    q, k = torch.randn(2, 8, 1, 16), torch.randn(2, 2, 100, 16)
    valid = torch.rand(4, 100) > 0.2
    ref = aggregate_scores(q, k, 0.25).reshape(4, 100).masked_fill(~valid, float("-inf"))
    q_sum = q.reshape(2, 2, 4, 16).sum(2).reshape(4, 16)
    out = score_triton(q_sum, k.reshape(4, 100, 16), valid, 0.25, block_l=32)
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("selection", ["exact", "atop"])
def test_select_kernel_equals_the_reference_selection(selection):
    scores = torch.randn(6, 3000)
    scores[0, :500] = float("-inf")  # masked tokens
    # chunks of 256: 12 programs per row, each writing its survivors after the earlier chunks'
    idx, ok = atop_select_triton(scores, 8, selection, block_l=64, chunk=256)
    ref = atop_n(scores, 8) if selection == "atop" else exact_top_n(scores, 8)
    assert _sets(idx, ok) == _sets(*ref)


@pytest.mark.parametrize(
    ("hk", "hv", "selection"), [(2, 4, "atop"), (4, 2, "exact"), (1, 8, "atop")]
)
def test_sparse_decode_kernels_equal_the_reference(hk, hv, selection):
    q, k, v = torch.randn(2, 8, 16), torch.randn(2, hk, 200, 16), torch.randn(2, hv, 200, 16)
    valid = torch.ones(2, 200, dtype=torch.bool)
    valid[1, :30] = False
    ref = sparse_decode(q, k, v, 12, valid, selection=selection)
    out = sparse_decode_triton(q, k, v, 12, valid, selection=selection)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_gather_attention_kernel_handles_empty_slots():
    q, k, v = torch.randn(1, 4, 8), torch.randn(1, 2, 20, 8), torch.randn(1, 2, 20, 8)
    idx = torch.tensor([[[0, 3, 5, 0], [1, 2, 0, 0]]])
    ok = torch.tensor([[[True, True, True, False], [True, True, False, False]]])
    out = sparse_attention_triton(q, k, v, idx, ok, 8**-0.5)
    for h in range(4):
        kh = h // 2
        sel = idx[0, kh][ok[0, kh]]
        p = torch.softmax(q[0, h] @ k[0, kh, sel].T * 8**-0.5, -1)
        torch.testing.assert_close(out[0, h], p @ v[0, kh, sel])


@pytest.mark.parametrize(("hk", "hv"), [(2, 4), (4, 4), (4, 2), (1, 8)])
def test_flash_decoding_kernel_equals_dense_decode(hk, hv):
    q, k, v = torch.randn(2, 8, 16), torch.randn(2, hk, 300, 16), torch.randn(2, hv, 300, 16)
    valid = torch.ones(2, 300, dtype=torch.bool)
    valid[1, :40] = False  # left padding
    out = dense_decode_triton(q, k, v, valid, chunk=64, block_l=32)  # 5 splits, merged
    torch.testing.assert_close(out, dense_decode(q, k, v, valid), atol=1e-5, rtol=1e-5)


def test_kernels_refuse_head_counts_that_do_not_nest():
    from saga_attention import SagaError

    q, k, v = torch.randn(1, 12, 16), torch.randn(1, 3, 64, 16), torch.randn(1, 4, 64, 16)
    with pytest.raises(SagaError, match="must divide one another"):
        dense_decode_triton(q, k, v)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_flash_decoding_equals_sdpa_on_cuda(dtype):
    q = torch.randn(1, 32, 128, device="cuda", dtype=dtype)
    k = torch.randn(1, 8, 65536, 128, device="cuda", dtype=dtype)
    v = torch.randn(1, 8, 65536, 128, device="cuda", dtype=dtype)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.unsqueeze(2), k, v, enable_gqa=True
    ).squeeze(2)
    tol = 2e-2 if dtype == torch.bfloat16 else 2e-3  # tf32 / bf16 tensor-core dots
    torch.testing.assert_close(
        dense_decode_triton(q, k, v).float(), ref.float(), atol=tol, rtol=tol
    )


@pytest.mark.gpu
def test_compiled_split_select_equals_the_reference_on_cuda():
    scores = torch.randn(2, 131072, device="cuda")
    idx, ok = atop_select_triton(scores, 64)
    assert _sets(idx.cpu(), ok.cpu()) == _sets(*(t.cpu() for t in atop_n(scores, 64)))


@pytest.mark.gpu
def test_compiled_kernels_equal_the_reference_on_cuda():
    q = torch.randn(1, 32, 128, device="cuda")
    k = torch.randn(1, 2, 16384, 128, device="cuda")
    v = torch.randn(1, 8, 16384, 128, device="cuda")
    ref = sparse_decode(q, k, v, 64)
    torch.testing.assert_close(sparse_decode_triton(q, k, v, 64), ref, atol=2e-3, rtol=2e-3)


@pytest.mark.gpu
def test_the_kernel_decode_step_replays_as_a_cuda_graph():
    """No host sync in the triton step: it is captured once and replayed (the bench times it
    so), and the replay writes what an eager call returns."""
    from saga_attention.timing import cuda_graph

    q = torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 2, 32768, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, 8, 32768, 128, device="cuda", dtype=torch.bfloat16)
    out = {}

    def step():
        out["o"] = sparse_decode_triton(q, k, v, 64)

    eager = sparse_decode_triton(q, k, v, 64).float()
    replay = cuda_graph(step)
    assert replay is not None, "the sparse decode step could not be captured in a CUDA graph"
    replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out["o"].float(), eager, atol=2e-2, rtol=2e-2)


def _kernel_bench_config():
    from dataclasses import replace

    from saga_attention.bench import TINY, BenchConfig
    from saga_attention.timing import DecodeShape

    config = BenchConfig.for_run("cpu", True, 2, (96,), (1,), (160,))
    shape = DecodeShape(query_heads=4, gqa_kv_heads=2, saga_key_heads=1, saga_value_heads=2,
                        head_dim=16, top_n=8)  # fmt: skip
    return replace(config, kernels=True, shape=shape, e2e_models=(replace(TINY, layers=1),))


@pytest.mark.slow  # about 70 s interpreted
def test_bench_kernel_path_checks_every_kernel_against_the_reference():
    """What `saga bench --device cuda` runs, with the kernels interpreted: the triton systems
    of the decode step and of the whole-model step (dense flash-decoding, Atop-N) are timed and
    each matches its PyTorch reference (the correctness rows)."""
    from saga_attention.bench import _Clock, _e2e_rows, _layer_rows

    config = _kernel_bench_config()
    notes = {}
    rows = _layer_rows(config, 0, lambda _: None, _Clock(None), notes)
    rows += _e2e_rows(config, 0, lambda _: None, _Clock(None), notes)
    got = {(r.system, r.metric, r.split): r.value for r in rows}
    for system in ("gqa-dense-triton", "gqa-atop", "saga-dense", "saga-atop", "saga-atop-hk1"):
        assert got[(system, "matches_reference", "L=96")] == 1.0, system
    for system in ("gqa-dense-triton", "gqa-atop", "saga-atop"):
        assert got[(system, "matches_reference", "tiny:L=160")] == 1.0, system
    assert got[("gqa-dense", "tokens_per_s", "tiny:L=160")] > 0  # the faster dense path
    assert ("saga-atop", "e2e_speedup_vs_gqa_atop", "tiny:L=160") in got


@pytest.mark.parametrize("mode", ["dense", "atop"])
def test_triton_backend_decode_step_of_a_model_equals_the_torch_backend(mode):
    """The e2e bench's GPU systems: a whole-model decode step with ``saga_backend="triton"``
    (flash-decoding when dense, the sparse kernels under Atop-N) equals the PyTorch backend."""
    from saga_attention.modeling import SagaConfig, SagaForCausalLM, enable_saga_attention
    from transformers import DynamicCache

    config = SagaConfig(vocab_size=40, hidden_size=32, intermediate_size=32, num_hidden_layers=1,
                        num_attention_heads=4, num_key_heads=1, num_key_value_heads=2)  # fmt: skip
    model = SagaForCausalLM(config).eval()
    ids = torch.randint(3, 40, (1, 48))
    logits = {}
    for backend in ("torch", "triton"):
        enable_saga_attention(model, mode, 8, backend=backend)
        with torch.no_grad():
            out = model(ids[:, :-1], cache=DynamicCache(config=model.config), use_cache=True)
            step = model(ids[:, -1:], cache=out.past_key_values, use_cache=True)
        logits[backend] = step.logits
    torch.testing.assert_close(logits["triton"], logits["torch"], atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_bench_e2e_on_cuda_is_graphed_and_matches_the_reference():
    """The GPU step's headline path at a small scale: every whole-model system is captured in a
    CUDA graph (a comparison that falls back to eager is reported, but should not happen) and
    every triton step matches the PyTorch step of the same model and cache."""
    from dataclasses import replace

    from saga_attention.bench import TINY, BenchConfig, _Clock, _e2e_rows

    config = BenchConfig.for_run("cuda", True, 6, (4096,), (1,), (4096,))
    config = replace(config, e2e_models=(replace(TINY, layers=2),))
    notes = {}
    rows = _e2e_rows(config, 0, lambda _: None, _Clock(None), notes)
    assert notes["e2e_graphed"] == {"tiny:L=4096": True}
    got = {(r.system, r.metric): r.value for r in rows}
    for system in ("gqa-dense-triton", "gqa-atop", "saga-atop"):
        assert got[(system, "matches_reference")] == 1.0, system
    assert got[("saga-atop", "e2e_speedup_vs_gqa_atop")] > 0
