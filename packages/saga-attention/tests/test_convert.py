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
