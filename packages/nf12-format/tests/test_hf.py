"""nf12 as a transformers quantization method: save_pretrained / from_pretrained round trips."""

import json
import logging

import nf12
import nf12.hf
import pytest
import torch
from nf12.errors import Nf12Error
from nf12.hf import NF12Config, NF12HfQuantizer
from nf12.nn import NF12Linear
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoModelForCausalLM, LlamaConfig, Qwen3Config
from transformers.quantizers import auto as quantizer_auto

IDS = torch.randint(0, 256, (2, 11), generator=torch.Generator().manual_seed(5))


def bf16_checkpoint(path, config) -> None:
    """A randomly initialised model saved in BF16, the way a user's checkpoint looks."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    torch.nn.Module.to(model, torch.bfloat16)
    model.save_pretrained(path)


def qwen3(tied: bool = False) -> Qwen3Config:
    return Qwen3Config(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=64, tie_word_embeddings=tied,
    )  # fmt: skip


def llama() -> LlamaConfig:
    return LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        tie_word_embeddings=False,
    )  # fmt: skip


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(IDS).logits


CONFIGS = {"qwen3": qwen3(), "tied": qwen3(tied=True), "llama": llama()}


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_save_pretrained_then_from_pretrained_gives_identical_logits(tmp_path, config):
    bf16_checkpoint(tmp_path / "bf16", config)
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "bf16")
    expected = logits(model)
    nf12.quantize_model(model)
    assert torch.equal(logits(model), expected)
    model.save_pretrained(tmp_path / "nf12")
    saved = json.loads((tmp_path / "nf12" / "config.json").read_text())["quantization_config"]
    assert saved["quant_method"] == "nf12"
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "nf12")
    layer = reloaded.model.layers[1].mlp.down_proj
    assert isinstance(layer, NF12Linear)
    assert layer.weight.dtype == torch.uint8
    assert torch.equal(logits(reloaded), expected)
    greedy = reloaded.generate(IDS[:1, :4], max_new_tokens=6, do_sample=False)
    assert torch.equal(greedy, model.generate(IDS[:1, :4], max_new_tokens=6, do_sample=False))


def test_tied_embeddings_stay_tied_and_are_stored_once(tmp_path):
    bf16_checkpoint(tmp_path / "bf16", qwen3(tied=True))
    model = nf12.quantize_model(AutoModelForCausalLM.from_pretrained(tmp_path / "bf16"))
    model.save_pretrained(tmp_path / "nf12")
    stored = load_file(str(tmp_path / "nf12" / "model.safetensors"))
    assert "model.embed_tokens.weight" in stored
    assert not any(k.startswith("lm_head") for k in stored)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "nf12")
    assert reloaded.lm_head.weight is reloaded.model.embed_tokens.weight
    assert reloaded.lm_head.weight.dtype == torch.bfloat16


def test_sharded_checkpoint_round_trips(tmp_path):
    bf16_checkpoint(tmp_path / "bf16", qwen3())
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "bf16")
    expected = logits(model)
    nf12.quantize_model(model).save_pretrained(tmp_path / "nf12", max_shard_size="60KB")
    shards = sorted(p.name for p in (tmp_path / "nf12").glob("model-*-of-*.safetensors"))
    assert len(shards) >= 3
    assert (tmp_path / "nf12" / "model.safetensors.index.json").is_file()
    assert torch.equal(logits(AutoModelForCausalLM.from_pretrained(tmp_path / "nf12")), expected)


def test_quantizing_while_loading_with_a_config(tmp_path):
    bf16_checkpoint(tmp_path / "bf16", qwen3())
    expected = logits(AutoModelForCausalLM.from_pretrained(tmp_path / "bf16"))
    model = AutoModelForCausalLM.from_pretrained(
        tmp_path / "bf16", quantization_config=NF12Config(group=16)
    )
    assert isinstance(model.model.layers[0].self_attn.q_proj, NF12Linear)
    assert model.model.layers[0].self_attn.q_proj.group == 16
    assert torch.equal(logits(model), expected)
    model.save_pretrained(tmp_path / "nf12")
    assert torch.equal(logits(AutoModelForCausalLM.from_pretrained(tmp_path / "nf12")), expected)


def test_loading_without_nf12_registered_raises_instead_of_random_weights(
    tmp_path, monkeypatch, caplog
):
    bf16_checkpoint(tmp_path / "bf16", qwen3())
    model = nf12.quantize_model(AutoModelForCausalLM.from_pretrained(tmp_path / "bf16"))
    model.save_pretrained(tmp_path / "nf12")
    # What a machine without nf12 sees: transformers has never heard of "nf12".
    monkeypatch.delitem(quantizer_auto.AUTO_QUANTIZER_MAPPING, "nf12")
    monkeypatch.delitem(quantizer_auto.AUTO_QUANTIZATION_CONFIG_MAPPING, "nf12")
    with caplog.at_level(logging.WARNING), pytest.raises(RuntimeError, match="mismatched_sizes"):
        AutoModelForCausalLM.from_pretrained(tmp_path / "nf12")
    assert "nf12" in caplog.text  # transformers names the quantization it skipped


def test_a_corrupted_plane_fails_the_load_naming_the_layer(tmp_path):
    bf16_checkpoint(tmp_path / "bf16", qwen3())
    model = nf12.quantize_model(AutoModelForCausalLM.from_pretrained(tmp_path / "bf16"))
    model.save_pretrained(tmp_path / "nf12")
    path = tmp_path / "nf12" / "model.safetensors"
    state = load_file(str(path))
    state["model.layers.1.mlp.up_proj.weight"][17] ^= 0x01
    save_file(state, str(path), metadata={"format": "pt"})
    with pytest.raises(Nf12Error, match=r"model\.layers\.1\.mlp\.up_proj.*sha256"):
        AutoModelForCausalLM.from_pretrained(tmp_path / "nf12")


def test_config_refuses_what_it_cannot_honour():
    with pytest.raises(Nf12Error, match="group 6"):
        NF12Config(group=6)
    with pytest.raises(Nf12Error, match="format_version 2"):
        NF12Config.from_dict({"quant_method": "nf12", "format_version": 2})
    assert NF12Config.from_dict(NF12Config(group=32).to_dict()).group == 32
    assert NF12HfQuantizer(NF12Config(), pre_quantized=False).update_dtype(torch.float32) == (
        torch.bfloat16
    )


def test_real_minilm_weights_round_trip_through_save_and_load(tmp_path):
    from paperstack.embed import model_dir

    model = AutoModel.from_pretrained(model_dir(), dtype=torch.bfloat16)
    ids = torch.randint(0, model.config.vocab_size, (2, 16),
                        generator=torch.Generator().manual_seed(0))  # fmt: skip
    with torch.no_grad():
        expected = model(ids).last_hidden_state
    nf12.quantize_model(model).save_pretrained(tmp_path / "minilm-nf12")
    reloaded = AutoModel.from_pretrained(tmp_path / "minilm-nf12")
    assert isinstance(reloaded.encoder.layer[0].attention.self.query, NF12Linear)
    with torch.no_grad():
        assert torch.equal(reloaded(ids).last_hidden_state, expected)


@pytest.mark.gpu
def test_on_cuda_the_reloaded_model_is_identical_and_fused_is_close(tmp_path):
    pytest.importorskip("triton")
    bf16_checkpoint(tmp_path / "bf16", qwen3())
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "bf16").cuda()
    ids = IDS.cuda()
    with torch.no_grad():
        expected = model(ids).logits
    nf12.quantize_model(model.cpu()).save_pretrained(tmp_path / "nf12")
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "nf12").cuda()
    with torch.no_grad():
        assert torch.equal(reloaded(ids).logits, expected)
    fused = nf12.set_fused(AutoModelForCausalLM.from_pretrained(tmp_path / "nf12").cuda())
    assert fused.model.layers[0].mlp.up_proj.fused
    with torch.no_grad():
        torch.testing.assert_close(fused(ids[:1, :1]).logits, expected[:1, :1], rtol=5e-2,
                                   atol=5e-2)  # fmt: skip
