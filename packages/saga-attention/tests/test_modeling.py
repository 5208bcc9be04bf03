import pytest
import torch
from saga_attention import SagaError
from saga_attention.modeling import (
    SagaConfig,
    SagaForCausalLM,
    cache_kwargs,
    enable_saga_attention,
    kv_cache_bytes,
    measure_recall,
    static_cache,
)
from transformers import AutoModelForCausalLM, DynamicCache, LlamaConfig, LlamaForCausalLM

SMALL = {
    "vocab_size": 40,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "max_position_embeddings": 128,
}


def _saga(**kw):
    return SagaForCausalLM(SagaConfig(num_key_heads=1, saga_top_n=6, **{**SMALL, **kw})).eval()


def test_cache_holds_hk_plus_hv_heads_per_token():
    model = _saga()
    ids = torch.randint(3, 40, (2, 17))
    cache = model(ids, cache=DynamicCache(config=model.config), use_cache=True).past_key_values
    head_dim = 32 // 8
    assert kv_cache_bytes(cache) == 2 * 17 * 2 * (1 + 4) * head_dim * 4  # batch, T, layers, fp32
    assert cache.layers[0].keys.shape[1] == 1
    assert cache.layers[0].values.shape[1] == 4


@pytest.mark.parametrize("mode", ["dense", "exact", "atop"])
def test_scoring_a_sequence_equals_decoding_it_token_by_token(mode):
    model = enable_saga_attention(_saga(), mode, 6, sparse_prefill=True)
    seq = torch.randint(3, 40, (2, 40))
    with torch.no_grad():
        whole = model(seq).logits
        model.config.saga_sparse_prefill = False
        out = model(seq[:, :6], cache=DynamicCache(config=model.config), use_cache=True)
        steps = [out.logits[:, -1]]
        for t in range(6, 40):
            out = model(seq[:, t : t + 1], cache=out.past_key_values, use_cache=True)
            steps.append(out.logits[:, -1])
    torch.testing.assert_close(torch.stack(steps, 1), whole[:, 5:], atol=1e-5, rtol=1e-5)


def test_generate_works_with_sparse_decoding_and_padding():
    model = enable_saga_attention(_saga(), "atop", 6)
    ids = torch.randint(3, 40, (2, 20))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0
    out = model.generate(
        ids, attention_mask=mask, max_new_tokens=8, min_new_tokens=8, do_sample=False,
        pad_token_id=0,
    )  # fmt: skip
    assert out.shape == (2, 28)


def test_triton_backend_decodes_like_the_torch_backend():
    pytest.importorskip("triton")
    model = enable_saga_attention(_saga(), "atop", 6)
    ids = torch.randint(3, 40, (1, 12))
    ref = model.generate(
        ids, max_new_tokens=4, do_sample=False, output_scores=True, return_dict_in_generate=True
    )
    model.config.saga_backend = "triton"
    out = model.generate(
        ids, max_new_tokens=4, do_sample=False, output_scores=True, return_dict_in_generate=True
    )
    assert torch.equal(out.sequences, ref.sequences)
    torch.testing.assert_close(
        torch.stack(out.scores), torch.stack(ref.scores), atol=1e-4, rtol=1e-4
    )


def test_save_and_load_through_auto_classes(tmp_path):
    model = _saga()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert isinstance(loaded, SagaForCausalLM)
    ids = torch.randint(3, 40, (1, 10))
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits)


def test_stock_llama_runs_saga_attention_as_the_gqa_baseline():
    gqa = LlamaForCausalLM(LlamaConfig(**SMALL)).eval()
    ids = torch.randint(3, 40, (2, 16))
    ref = gqa(ids).logits
    enable_saga_attention(gqa, "dense")
    torch.testing.assert_close(gqa(ids).logits, ref, atol=1e-5, rtol=1e-5)


def test_recall_probe_sees_every_sparse_call():
    model = enable_saga_attention(_saga(), "atop", 6, sparse_prefill=True)
    with measure_recall() as probe, torch.no_grad():
        model(torch.randint(3, 40, (1, 64)))
    recalls = probe.recalls()
    # layers * key heads * rows longer than the exact zone of cap = 4N = 24 tokens
    assert recalls.numel() == 2 * 1 * (64 - 24)
    assert ((recalls >= 0) & (recalls <= 1)).all()


def test_bad_settings_are_one_line_errors():
    with pytest.raises(SagaError, match="num_key_heads: 3 does not divide num_query_heads=8"):
        SagaConfig(num_key_heads=3, **SMALL)
    with pytest.raises(SagaError, match="saga_mode"):
        enable_saga_attention(_saga(), "sparse", 6)
    with pytest.raises(SagaError, match="saga_top_n"):
        enable_saga_attention(_saga(), "atop", 0)


@pytest.mark.parametrize("mode", ["dense", "atop"])
def test_generate_with_the_static_cache_equals_the_dynamic_cache(mode):
    model = enable_saga_attention(_saga(), mode, 6)
    ids = torch.randint(3, 40, (2, 20))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # left padding
    kw = {"attention_mask": mask, "max_new_tokens": 10, "do_sample": False, "pad_token_id": 0}
    dynamic = model.generate(ids, **kw)
    static = model.generate(ids, cache_implementation="static", **kw)
    assert torch.equal(static, dynamic)


def test_static_cache_holds_hk_key_and_hv_value_heads():
    model = _saga()
    cache = static_cache(model.config, 32)
    model(torch.randint(3, 40, (1, 9)), **cache_kwargs(model, cache), use_cache=True)
    assert cache.layers[0].keys.shape == (1, 1, 32, 4)
    assert cache.layers[0].values.shape == (1, 4, 32, 4)
    assert int(cache.get_seq_length()) == 9


@pytest.mark.gpu
def test_a_static_cache_decode_step_is_captured_in_a_cuda_graph():
    """No host sync in the step: the sparse decode of a SAGA model replays as a CUDA graph."""
    model = enable_saga_attention(_saga().cuda(), "atop", 6)
    cache = static_cache(model.config, 64)
    prompt = torch.randint(3, 40, (1, 30), device="cuda")
    with torch.no_grad():
        model(prompt, **cache_kwargs(model, cache), use_cache=True)
        token = torch.tensor([[7]], device="cuda")
        for layer in cache.layers:
            layer.cumulative_length.fill_(30)
        eager = model(token, **cache_kwargs(model, cache), use_cache=True).logits.clone()
        for layer in cache.layers:
            layer.cumulative_length.fill_(30)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up on a side stream, as capture requires
            model(token, **cache_kwargs(model, cache), use_cache=True)
            for layer in cache.layers:
                layer.cumulative_length.fill_(30)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = model(token, **cache_kwargs(model, cache), use_cache=True).logits
        for layer in cache.layers:
            layer.cumulative_length.fill_(30)
        graph.replay()
        torch.cuda.synchronize()
    torch.testing.assert_close(out, eager, atol=1e-4, rtol=1e-4)
