import nf12
import pytest
import torch
from nf12.errors import Nf12Error
from nf12.nn import NF12Linear, load_compressed, quantize_model
from safetensors.torch import save_file
from transformers import Qwen3Config, Qwen3ForCausalLM


def tiny_qwen3() -> Qwen3ForCausalLM:
    config = Qwen3Config(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=64, tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(0)
    return Qwen3ForCausalLM(config).to(torch.bfloat16).eval()


def test_quantized_model_outputs_are_identical_to_bf16():
    model = tiny_qwen3()
    ids = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(ids).logits
    nf12.quantize_model(model)
    assert isinstance(model.model.layers[0].mlp.down_proj, NF12Linear)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, expected)


def test_loading_a_compressed_checkpoint_into_a_model(tmp_path):
    model = tiny_qwen3()
    ids = torch.randint(0, 256, (1, 7), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = model(ids).logits
    src = tmp_path / "model.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(src))
    nf12.compress_file(src, tmp_path / "model.nf12.safetensors")
    fresh = tiny_qwen3()
    for p in fresh.parameters():
        p.data.zero_()
    load_compressed(fresh, tmp_path / "model.nf12.safetensors")
    assert isinstance(fresh.lm_head, NF12Linear)
    with torch.no_grad():
        assert torch.equal(fresh(ids).logits, expected)


def test_quantize_rejects_non_bf16_layers():
    with pytest.raises(Nf12Error, match="bfloat16"):
        quantize_model(torch.nn.Sequential(torch.nn.Linear(8, 8)))


def test_linear_with_bias_matches():
    lin = torch.nn.Linear(40, 24).to(torch.bfloat16)
    x = torch.randn(3, 40).to(torch.bfloat16)
    assert torch.equal(NF12Linear.from_linear(lin)(x), lin(x))
