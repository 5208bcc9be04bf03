import nf12
import pytest
import torch
from conftest import same_bits
from nf12.errors import Nf12Error
from nf12.format import encode
from nf12.nn import NF12Linear, load_compressed, quantize_model
from safetensors.torch import save_file
from transformers import Qwen3Config, Qwen3ForCausalLM


def tiny_qwen3(tied: bool = False) -> Qwen3ForCausalLM:
    config = Qwen3Config(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=64, tie_word_embeddings=tied,
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
    assert isinstance(model.lm_head, NF12Linear)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, expected)


def test_tied_lm_head_stays_tied_and_bf16():
    model = tiny_qwen3(tied=True)
    nf12.quantize_model(model)
    assert isinstance(model.lm_head, torch.nn.Linear)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert model.config.quantization_config.modules_to_not_convert == ["lm_head"]


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


def test_quantize_rejects_non_bf16_layers_and_bad_groups():
    with pytest.raises(Nf12Error, match="bfloat16"):
        quantize_model(torch.nn.Sequential(torch.nn.Linear(8, 8)))
    with pytest.raises(Nf12Error, match="group 6"):
        quantize_model(torch.nn.Sequential(torch.nn.Linear(8, 8).bfloat16()), group=6)


@pytest.mark.parametrize("group", [4, 8, 32])
def test_linear_with_bias_matches_and_decodes_without_a_host_sync(group):
    lin = torch.nn.Linear(40, 24).to(torch.bfloat16)
    lin.weight.data[0, :5] = 0.0  # an escaped group
    x = torch.randn(3, 40).to(torch.bfloat16)
    layer = NF12Linear.from_linear(lin, group)
    assert torch.equal(layer(x), lin(x))
    assert same_bits(layer.decoded_weight(), lin.weight.detach())
    layer.check(verify=True)


def test_state_is_five_flat_tensors_and_a_corrupt_one_is_caught():
    lin = torch.nn.Linear(40, 24, bias=False).to(torch.bfloat16)
    layer = NF12Linear.from_linear(lin)
    state = layer.state_dict()
    assert sorted(state) == sorted(["weight", "weight_ex", "weight_esc", "weight_nf12",
                                    "weight_sha256"])  # fmt: skip
    assert state["weight"].ndim == 1  # never the shape of a linear weight
    layer.weight[3] ^= 1  # one mantissa bit
    with pytest.raises(Nf12Error, match="sha256"):
        layer.check(verify=True)
    empty = NF12Linear(40, 24)
    with pytest.raises(Nf12Error, match="no NF12 header"):
        empty.check()
    with pytest.raises(Nf12Error, match="do not match"):
        NF12Linear(41, 24).load_tensors(dict(state))


def test_from_nf12_keeps_what_the_encoder_chose():
    w = (torch.randn(16, 64) * 0.02).to(torch.bfloat16)
    nt = encode(w, 16)
    layer = NF12Linear.from_nf12(nt)
    assert layer.nf12_tensor().base == nt.base
    assert same_bits(layer.decoded_weight(), w)


@pytest.mark.gpu
@pytest.mark.parametrize("fused", [False, True])
def test_cuda_hot_path_has_no_host_sync(fused):
    pytest.importorskip("triton")
    lin = torch.nn.Linear(512, 384).to(torch.bfloat16).cuda()
    lin.weight.data[3, :8] = 0.0  # an escaped group
    layer = NF12Linear.from_linear(lin, fused=fused).cuda()
    inputs = [torch.randn(*shape, device="cuda").bfloat16() for shape in ((1, 512), (4, 512),
                                                                         (2, 20, 512))]  # fmt: skip
    for x in inputs:  # first calls autotune (which synchronises); then the hot path
        layer(x)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        outputs = [layer(x) for x in inputs]
    finally:
        torch.cuda.set_sync_debug_mode(0)
    for x, y in zip(inputs, outputs, strict=True):
        expected = lin(x)
        if fused and x.numel() // 512 <= 16:
            torch.testing.assert_close(y, expected, rtol=2e-2, atol=2e-2)
        else:
            assert torch.equal(y, expected)  # decode + F.linear: bit-identical
