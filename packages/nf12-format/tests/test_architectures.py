"""Every linear-like layer of the zoo's architectures converts, losslessly, and round-trips.

The zoo (paperstack.testing.zoo) holds what ``save_pretrained`` writes for Llama, Qwen2 (q/k/v
biases), Qwen3 (q_norm/k_norm, tied embeddings), Mistral (sliding window) and GPT-2 (``Conv1D``
layers, weights stored transposed, tied ``lm_head``).
"""

import json

import nf12
import nf12.hf
import pytest
import torch
from nf12.errors import Nf12Error
from nf12.nn import NF12Conv1D, NF12Linear, linear_like
from transformers import AutoModelForCausalLM

from paperstack.testing import zoo

ARCHITECTURES = sorted(zoo.WORKING)
IDS = torch.randint(3, 300, (2, 13), generator=torch.Generator().manual_seed(7))


def load(path, **kwargs):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, **kwargs).eval()


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(IDS).logits


def linear_like_names(model) -> list[str]:
    return [name for name, module in model.named_modules() if linear_like(module) is not None]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_linear_like_layer_converts_and_round_trips_bit_exactly(tmp_path, arch):
    model = load(zoo.checkpoint(arch))
    expected = logits(model)
    before = linear_like_names(model)
    nf12.quantize_model(model)
    kept = model.config.quantization_config.modules_to_not_convert
    tied = bool(model.config.tie_word_embeddings)
    assert kept == (["lm_head"] if tied else [])
    assert linear_like_names(model) == kept  # everything else is NF12 now
    converted = [n for n, m in model.named_modules() if isinstance(m, NF12Linear)]
    assert sorted(converted) == sorted(set(before) - set(kept))
    if arch == "gpt2":
        assert isinstance(model.transformer.h[0].attn.c_attn, NF12Conv1D)
        assert isinstance(model.transformer.h[1].mlp.c_proj, NF12Conv1D)
    assert torch.equal(logits(model), expected)

    model.save_pretrained(tmp_path / "nf12")
    saved = json.loads((tmp_path / "nf12" / "config.json").read_text())
    assert saved["quantization_config"]["quant_method"] == "nf12"
    reloaded = load(tmp_path / "nf12")
    assert sorted(n for n, m in reloaded.named_modules() if isinstance(m, NF12Linear)) == sorted(
        converted
    )
    assert torch.equal(logits(reloaded), expected)


@pytest.mark.parametrize("arch", ["gpt2", "qwen2"])
def test_quantizing_while_loading_matches_quantize_model(arch):
    path = zoo.checkpoint(arch)
    expected = logits(load(path))
    model = load(path, quantization_config=nf12.NF12Config())
    assert any(isinstance(m, NF12Linear) for m in model.modules())
    assert torch.equal(logits(model), expected)


def test_conv1d_layer_is_bit_identical_and_keeps_its_layout():
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(3)
    conv = Conv1D(48, 40).to(torch.bfloat16)  # nf = 48 outputs, nx = 40 inputs: weight (40, 48)
    x = torch.randn(3, 5, 40).to(torch.bfloat16)
    layer = NF12Conv1D.from_linear(conv)
    assert layer.matrix_shape == (40, 48)
    assert torch.equal(layer.decoded_weight().view(torch.int16), conv.weight.view(torch.int16))
    with torch.no_grad():
        assert torch.equal(layer(x), conv(x))


def test_a_model_with_nothing_to_quantize_is_refused_and_not_marked_nf12():
    model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.LayerNorm(8))
    with pytest.raises(
        Nf12Error, match=r"^Sequential: nothing to quantize: no nn.Linear or Conv1D"
    ):
        nf12.quantize_model(model)

    gpt2 = load(zoo.checkpoint("gpt2"))
    with pytest.raises(Nf12Error, match="every linear layer is tied or skipped") as info:
        nf12.quantize_model(gpt2, skip=["transformer"])
    assert "\n" not in str(info.value)
    assert getattr(gpt2.config, "quantization_config", None) is None


def test_quantizing_twice_is_refused_in_one_line():
    model = nf12.quantize_model(load(zoo.checkpoint("llama")))
    with pytest.raises(Nf12Error, match="already NF12"):
        nf12.quantize_model(model)


def test_loading_with_every_layer_skipped_is_refused():
    config = nf12.NF12Config(modules_to_not_convert=["model", "lm_head"])
    with pytest.raises(Nf12Error, match="nothing to quantize"):
        load(zoo.checkpoint("llama"), quantization_config=config)
