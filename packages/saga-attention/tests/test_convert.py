from pathlib import Path

import pytest
import torch
from saga_attention import SagaError
from saga_attention.convert import convert_gqa_to_saga, pool_key_heads
from saga_attention.modeling import SagaForCausalLM
from transformers import LlamaConfig, LlamaForCausalLM

CFG = {
    "vocab_size": 40,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "tie_word_embeddings": True,
}


def test_pooling_averages_the_heads_of_each_group():
    w = torch.arange(4 * 2 * 3, dtype=torch.float32).reshape(4 * 2, 3)  # 4 heads of dim 2
    pooled = pool_key_heads(w, 4, 2)
    torch.testing.assert_close(pooled[:2], (w[0:2] + w[2:4]) / 2)
    torch.testing.assert_close(pooled[2:], (w[4:6] + w[6:8]) / 2)


def test_conversion_with_as_many_key_heads_is_the_same_model():
    gqa = LlamaForCausalLM(LlamaConfig(**CFG)).eval()
    saga = convert_gqa_to_saga(gqa, 4)
    ids = torch.randint(3, 40, (2, 12))
    torch.testing.assert_close(saga(ids).logits, gqa(ids).logits)


def test_conversion_keeps_values_and_pools_keys():
    gqa = LlamaForCausalLM(LlamaConfig(**CFG)).eval()
    saga = convert_gqa_to_saga(gqa, 1)
    assert isinstance(saga, SagaForCausalLM)
    a, b = gqa.model.layers[0].self_attn, saga.model.layers[0].self_attn
    assert b.k_proj.weight.shape == (4, 32)
    torch.testing.assert_close(b.k_proj.weight, a.k_proj.weight.reshape(4, 4, 32).mean(0))
    torch.testing.assert_close(b.v_proj.weight, a.v_proj.weight)
    assert saga.generate(torch.randint(3, 40, (1, 5)), max_new_tokens=3, do_sample=False).shape == (
        1,
        8,
    )


def test_rejects_key_heads_that_do_not_divide():
    gqa = LlamaForCausalLM(LlamaConfig(**CFG))
    with pytest.raises(SagaError, match="key heads: 3 does not divide the checkpoint's 4"):
        convert_gqa_to_saga(gqa, 3)


# ------------------------------------------------------------------ real checkpoint layouts
# The zoo's tiny Llama, Qwen2 (q/k/v biases), Qwen3 (q_norm/k_norm, head_dim apart from
# hidden/H_q) and Mistral (sliding_window 64): 1024 tokens are 16 windows of Mistral's.

FAMILIES = ["llama", "qwen2", "qwen3", "mistral"]


def _zoo_model(arch):
    from transformers import AutoModelForCausalLM

    from paperstack.testing import zoo

    return AutoModelForCausalLM.from_pretrained(zoo.checkpoint(arch)).eval()


def _ids(model, length, batch=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.config.vocab_size, (batch, length), generator=g)


@pytest.mark.parametrize("arch", FAMILIES)
def test_zoo_conversion_keeps_dense_logits_at_1k_tokens(arch):
    source = _zoo_model(arch)
    saga = convert_gqa_to_saga(source, source.config.num_key_value_heads)
    assert type(saga).__name__ == {"llama": "SagaForCausalLM"}.get(
        arch, f"Saga{type(source).__name__}"
    )
    ids = _ids(source, 1024)
    with torch.no_grad():
        torch.testing.assert_close(saga(ids).logits, source(ids).logits, atol=2e-5, rtol=1e-4)


def test_mistral_sliding_window_is_kept_and_matters_at_1k():
    source = _zoo_model("mistral")
    saga = convert_gqa_to_saga(source, 1)
    assert saga.config.sliding_window == source.config.sliding_window == 64
    ids = _ids(source, 1024)
    with torch.no_grad():
        windowed = saga(ids).logits[:, -1]
        saga.config.sliding_window = None  # the same weights attending to everything
        full = saga(ids).logits[:, -1]
    assert (windowed - full).abs().max() > 1e-3  # the window is what the equality above needs


def test_qwen2_biases_are_carried_and_pooled():
    source = _zoo_model("qwen2")
    a = source.model.layers[1].self_attn
    same = convert_gqa_to_saga(source, 2).model.layers[1].self_attn
    pooled = convert_gqa_to_saga(source, 1).model.layers[1].self_attn
    for name in ("q_proj", "k_proj", "v_proj"):
        assert torch.equal(getattr(same, name).bias, getattr(a, name).bias)
    torch.testing.assert_close(pooled.k_proj.bias, a.k_proj.bias.reshape(2, 16).mean(0))
    assert torch.equal(pooled.v_proj.bias, a.v_proj.bias)


def test_qwen3_norms_are_carried():
    source = _zoo_model("qwen3")
    saga = convert_gqa_to_saga(source, 1)
    for old, new in zip(source.model.layers, saga.model.layers, strict=True):
        assert torch.equal(new.self_attn.q_norm.weight, old.self_attn.q_norm.weight)
        assert torch.equal(new.self_attn.k_norm.weight, old.self_attn.k_norm.weight)
    assert saga.model.layers[0].self_attn.k_proj.weight.shape == (16, 64)  # head_dim 16


@pytest.mark.parametrize("arch", FAMILIES)
def test_stock_static_and_dynamic_caches_generate_alike(arch):
    """A stock StaticCache(config=...) and DynamicCache, handed to generate(), on a converted
    model with H_k = 1 < H_v = 2; the prompt is longer than Mistral's window, so its static
    cache is a full sliding-window layer that rolls."""
    from saga_attention import enable_saga_attention
    from transformers import DynamicCache, StaticCache

    saga = enable_saga_attention(convert_gqa_to_saga(_zoo_model(arch), 1), "atop", 16)
    ids = _ids(saga, 80, batch=2)
    kw = {"max_new_tokens": 6, "do_sample": False, "pad_token_id": 0}
    static = StaticCache(config=saga.config, max_cache_len=90)
    with_static = saga.generate(ids, cache=static, **kw)
    with_dynamic = saga.generate(ids, cache=DynamicCache(config=saga.config), **kw)
    assert torch.equal(with_static, with_dynamic)
    assert static.layers[0].keys.shape[1] == 1
    assert static.layers[0].values.shape[1] == 2


def test_converted_mistral_decodes_like_the_original_with_a_static_cache():
    """Decode (not only the prefill) honours the sliding window: with H_k = H_kv, greedy
    decoding past the window equals stock Mistral's."""
    source = _zoo_model("mistral")
    saga = convert_gqa_to_saga(source, source.config.num_key_value_heads)
    ids = _ids(source, 100)
    kw = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": 0}
    expected = source.generate(ids, cache_implementation="static", **kw)
    assert torch.equal(saga.generate(ids, cache_implementation="static", **kw), expected)


# ------------------------------------------------------------------ saga convert (the CLI)


def test_convert_saves_the_tokenizer_and_loads_back_as_saga(tmp_path, capsys):
    """Qwen3 in, SagaQwen3ForCausalLM out, with the source's tokenizer (and chat template)
    beside it; from_pretrained gives back the same model."""
    from saga_attention.cli import main
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paperstack.testing import zoo

    source, out = zoo.checkpoint("qwen3"), tmp_path / "saga"
    argv = ["convert", "--model", str(source), "--key-heads", "1", "--out", str(out)]
    assert main([*argv, "--steps", "0", "--quick"]) == 0
    assert "tokenizer saved" in capsys.readouterr().out
    assert not [p for p in out.iterdir() if p.name.startswith(".saga-convert-")]  # no staging
    ours, theirs = AutoTokenizer.from_pretrained(out), AutoTokenizer.from_pretrained(source)
    text = "What is 2 + 3?"
    assert ours(text).input_ids == theirs(text).input_ids
    assert ours.chat_template == theirs.chat_template
    loaded = AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(loaded).__name__ == "SagaQwen3ForCausalLM"
    assert loaded.config.num_key_heads == 1
    expected = convert_gqa_to_saga(_zoo_model("qwen3"), 1)
    ids = _ids(loaded, 64)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, expected(ids).logits)


def test_a_full_disk_leaves_no_config_json(tmp_path, monkeypatch, capsys):
    """ENOSPC in the middle of saving: one line, exit 1, and --out still holds the previous
    conversion, whole (no 0-byte config.json, no half-written weights)."""
    import errno

    from saga_attention.cli import main
    from transformers import PreTrainedModel

    from paperstack.testing import zoo

    out = tmp_path / "saga"
    argv = ["convert", "--model", str(zoo.checkpoint("llama")), "--key-heads", "1",
            "--out", str(out), "--steps", "0", "--quick"]  # fmt: skip
    assert main(argv) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert before["config.json"]
    assert before["model.safetensors"]

    def full_disk(self, path, *args, **kwargs):
        (Path(path) / "model.safetensors").write_bytes(b"\0" * 10)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", full_disk)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "space" in err.lower(), err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert not [p for p in out.iterdir() if p.name.startswith(".saga-convert-")]
