"""Released block-diffusion checkpoint layouts (SDAR, Fast-dLLM v2) load and decode.

Each test folder is a zoo checkpoint (tiny Qwen3 / Qwen2 with its tokenizer) dressed as the
family's Hub folder: its ``config.json`` fields (model_type, architectures, auto_map, the
``attn_implementation`` it names, its block-size field), a [MASK] token added to the tokenizer,
and remote-code files that fail if anything imports them.
"""

import json
import shutil

import pytest
import torch
from mage_attention import MageError
from mage_attention.attention import Budget
from mage_attention.baselines import make_policy
from mage_attention.decoding import generate
from mage_attention.layouts import find_layout
from mage_attention.modeling import block_causal_mask, load_model, load_tokenizer
from safetensors.torch import load_file, save_file
from test_modeling import reference_decode

from paperstack.testing import zoo

REMOTE_CODE = 'raise RuntimeError("remote code ran")\n'


def _dress(base: str, dest, mask_token: str, config: dict, remote: tuple[str, ...]):
    """``dest`` := zoo checkpoint ``base`` with ``mask_token`` added and config fields set."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = zoo.checkpoint(base)
    tok = AutoTokenizer.from_pretrained(src)
    tok.add_special_tokens({"additional_special_tokens": [mask_token]})
    model = AutoModelForCausalLM.from_pretrained(src)
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    data = json.loads((dest / "config.json").read_text())
    data.update(config)
    (dest / "config.json").write_text(json.dumps(data))
    for name in remote:
        (dest / name).write_text(REMOTE_CODE)
    return model.eval(), tok.convert_tokens_to_ids(mask_token)


SDAR_CONFIG = {
    "model_type": "sdar",
    "architectures": ["SDARForCausalLM"],
    "auto_map": {
        "AutoConfig": "configuration_sdar.SDARConfig",
        "AutoModel": "modeling_sdar.SDARModel",
        "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM",
    },
    "attn_implementation": "flex_attention",
    "block_size": 4,
    "fuse_cross_entropy": True,
    "use_sliding_window": False,
}
FAST_DLLM_CONFIG = {
    "model_type": "Fast_dLLM_Qwen",
    "architectures": ["Fast_dLLM_QwenForCausalLM"],
    "auto_map": {
        "AutoConfig": "configuration.Fast_dLLM_QwenConfig",
        "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM",
    },
    "bd_size": 4,
}


@pytest.fixture(scope="module")
def sdar(tmp_path_factory):
    dest = tmp_path_factory.mktemp("sdar")
    model, mask = _dress("qwen3", dest, "<|MASK|>", SDAR_CONFIG,
                         ("configuration_sdar.py", "modeling_sdar.py"))  # fmt: skip
    data = json.loads((dest / "config.json").read_text())
    data["mask_token_id"] = mask  # SDAR's config.json names it (151669 in SDAR-1.7B)
    (dest / "config.json").write_text(json.dumps(data))
    return dest, model, mask


@pytest.fixture(scope="module")
def fast_dllm(tmp_path_factory):
    dest = tmp_path_factory.mktemp("fast-dllm")
    model, mask = _dress("qwen2", dest, "|<MASK>|", FAST_DLLM_CONFIG,
                         ("configuration.py", "modeling.py"))  # fmt: skip
    return dest, model, mask


@pytest.mark.parametrize("layout", ["sdar", "fast_dllm"])
def test_layout_loads_as_its_stock_architecture_with_the_same_logits(layout, request):
    folder, original, mask = request.getfixturevalue(layout)
    model = load_model(folder)
    stock = "Qwen3ForCausalLM" if layout == "sdar" else "Qwen2ForCausalLM"
    assert type(model).__name__ == stock
    assert model.config.mask_token_id == mask  # Fast-dLLM: found in the tokenizer
    assert model.config.block_size == 4  # Fast-dLLM: bd_size
    assert model.config.token_shift is (layout == "fast_dllm")
    ids = torch.randint(0, mask, (2, 12))
    mask4d = block_causal_mask(12, 4)
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask4d).logits
        ref = original(input_ids=ids, attention_mask=mask4d).logits
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)  # every weight arrived


@pytest.mark.parametrize("layout", ["sdar", "fast_dllm"])
@pytest.mark.parametrize("policy", ["exact", "mage", "quest"])
def test_layout_decodes_a_tokenized_prompt_of_any_length(layout, policy, request):
    folder, _, mask = request.getfixturevalue(layout)
    model = load_model(folder)
    tok = load_tokenizer(folder)  # no custom-code prompt for the auto_map folder
    ids = tok("What is 2 + 3? The quick brown fox", return_tensors="pt").input_ids
    ids = ids[:, : ids.shape[1] // 4 * 4 - 1]  # not a whole number of blocks
    res = generate(model, ids, 6, make_policy(policy, Budget(4, 1, 1)), threshold=0.85)
    assert res.tokens.shape == (1, 6)
    assert not (res.tokens == mask).any()
    if policy == "exact":  # the token shift (Fast-dLLM) and the partial block, uncached
        assert torch.equal(res.tokens, reference_decode(model, ids, 6, threshold=0.85))


def test_sdar_remote_code_never_runs_and_save_pretrained_round_trips(sdar, tmp_path):
    folder, _, mask = sdar
    model = load_model(folder)  # configuration_sdar.py would raise if imported
    model.save_pretrained(tmp_path)
    again = load_model(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "qwen3"
    assert (again.config.mask_token_id, again.config.block_size) == (mask, 4)


def test_a_layout_missing_weights_is_one_line_naming_them(fast_dllm, tmp_path):
    folder, _, _ = fast_dllm
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    weights = load_file(tmp_path / "model.safetensors")
    weights["model.layers.0.attn.q.bias"] = weights.pop("model.layers.0.self_attn.q_proj.bias")
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(MageError, match=r"lacks 1 weights of its qwen2 layout "
                       r"\(model\.layers\.0\.self_attn\.q_proj\.bias\)"):  # fmt: skip
        load_model(tmp_path)


def test_an_unknown_remote_code_layout_and_a_missing_mask_token_are_refused(sdar, tmp_path):
    folder, _, _ = sdar
    shutil.copytree(folder, tmp_path / "other")
    data = json.loads((tmp_path / "other" / "config.json").read_text())
    data["model_type"], data["architectures"] = "llada", ["LLaDAModelLM"]
    (tmp_path / "other" / "config.json").write_text(json.dumps(data))
    with pytest.raises(MageError, match="model_type 'llada' needs its own remote code"):
        load_model(tmp_path / "other")
    shutil.copytree(folder, tmp_path / "nomask")
    data = json.loads((tmp_path / "nomask" / "config.json").read_text())
    del data["mask_token_id"]
    (tmp_path / "nomask" / "config.json").write_text(json.dumps(data))
    assert load_model(tmp_path / "nomask").config.mask_token_id == data["vocab_size"] - 1
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "nomask" / name).unlink()
    with pytest.raises(MageError, match=r"no mask_token_id or a <\|MASK\|> token"):
        load_model(tmp_path / "nomask")


def test_find_layout_by_model_type_or_architecture():
    assert find_layout({"model_type": "sdar"}).base == "qwen3"
    assert find_layout({"architectures": ["Fast_dLLM_QwenForCausalLM"]}).token_shift
    assert find_layout({"model_type": "qwen2"}) is None
