"""The checkpoint zoo: each checkpoint is what its architecture's save_pretrained writes, with the
quirks the zoo's table promises, and the broken ones fail the way users' broken folders do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from paperstack.checkpoint import CheckpointError, check_model_dir  # noqa: E402
from paperstack.testing import zoo  # noqa: E402


@pytest.mark.parametrize("name", list(zoo.WORKING))
def test_working_checkpoints_load_generate_and_match_their_description(name: str) -> None:
    path = zoo.checkpoint(name)
    info = zoo.describe(name)
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == info.model_type
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    assert (tokenizer.pad_token is not None) == info.pad_token
    assert bool(getattr(tokenizer, "chat_template", None)) == info.chat_template
    limit = getattr(model.config, "max_position_embeddings", None) or model.config.n_positions
    assert limit == info.max_positions
    ids = tokenizer("What is 2 + 3?", return_tensors="pt")["input_ids"]
    assert tokenizer.decode(ids[0], skip_special_tokens=True) == "What is 2 + 3?"
    out = model.generate(
        ids, max_new_tokens=3, do_sample=False, pad_token_id=tokenizer.eos_token_id
    )
    assert out.shape == (1, ids.shape[1] + 3)


def test_architecture_features_are_present() -> None:
    def params(name: str) -> set[str]:
        return set(
            transformers.AutoModelForCausalLM.from_pretrained(zoo.checkpoint(name)).state_dict()
        )

    qwen2, qwen3, llama = params("qwen2"), params("qwen3"), params("llama")
    assert "model.layers.0.self_attn.q_proj.bias" in qwen2
    assert "model.layers.0.self_attn.q_proj.bias" not in llama
    assert "model.layers.0.self_attn.q_norm.weight" in qwen3
    gpt2 = transformers.AutoModelForCausalLM.from_pretrained(zoo.checkpoint("gpt2"))
    assert type(gpt2.transformer.h[0].attn.c_attn).__name__ == "Conv1D"
    mistral = json.loads((zoo.checkpoint("mistral") / "config.json").read_text())
    assert mistral["sliding_window"] == 64
    llama_cfg = json.loads((zoo.checkpoint("llama") / "config.json").read_text())
    assert llama_cfg["num_key_value_heads"] < llama_cfg["num_attention_heads"]  # GQA


def test_chat_templates_render_the_family_format() -> None:
    messages = [{"role": "user", "content": "hi"}]

    def render(name: str) -> str:
        tok = transformers.AutoTokenizer.from_pretrained(zoo.checkpoint(name))
        return str(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    assert render("qwen2") == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert render("mistral") == "<s>[INST] hi [/INST]"
    assert render("llama").endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_broken_folders_fail_in_one_line_naming_the_file() -> None:
    truncated = zoo.checkpoint("truncated")
    with pytest.raises(CheckpointError, match=r"model\.safetensors: truncated"):
        check_model_dir(truncated)
    no_tok = zoo.checkpoint("no-tokenizer")
    check_model_dir(no_tok)  # weights and config are whole
    assert not any(p.name.startswith("tokenizer") for p in no_tok.iterdir())


def test_built_once_into_the_cache(tmp_path: Path) -> None:
    first = zoo.checkpoint("llama", cache_dir=tmp_path)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    again = zoo.checkpoint("llama", cache_dir=tmp_path)
    assert again == first
    assert (again / "model.safetensors").stat().st_mtime_ns == stamp
    copy = zoo.copy("llama", tmp_path / "mine")
    assert (copy / "config.json").read_text() == (first / "config.json").read_text()


def test_unknown_checkpoint_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="qwen3"):
        zoo.checkpoint("falcon")
