"""The conversion recipe: turn a pretrained GQA checkpoint into SAGA, then fine-tune briefly.

Key-head pooling (GQA-style uptraining, Ainslie et al. 2023, applied to keys only): the
``H_kv`` key heads of the GQA model are split into ``H_k`` consecutive groups of
``r = H_kv / H_k`` heads and each new key head's projection is the mean of its group's,

    W_K'[i] = (1/r) Σ_{j=0}^{r-1} W_K[i·r + j]        (rows of one head, ``d × hidden``)

so the new key of a token is the mean of the old keys of its group. RoPE rotates every head
the same way and is linear, so pooling before or after it is the same. The value heads are kept
(``H_v = H_kv``) and so are the query heads: query heads that used old key head ``i·r + j`` now
all use new key head ``i``, exactly SAGA's mapping ``h // (H_q / H_k)``. The pooled model then
fine-tunes for a few hundred steps (``transformers.Trainer``).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedModel

from saga_attention.heads import SagaError
from saga_attention.modeling import SagaConfig, SagaForCausalLM, enable_saga_attention

__all__ = ["convert_gqa_to_saga", "pool_key_heads"]


def pool_key_heads(weight: torch.Tensor, num_heads: int, num_groups: int) -> torch.Tensor:
    """Mean-pool a ``[num_heads · d, ...]`` projection into ``[num_groups · d, ...]``.

    ``W'[i] = mean_j W[i·r + j]`` over the ``r = num_heads / num_groups`` heads of group ``i``.
    Works for weights (``[H·d, hidden]``) and biases (``[H·d]``).
    """
    if num_groups < 1 or num_heads % num_groups:
        raise SagaError(
            f"key heads: {num_groups} does not divide the checkpoint's {num_heads} key heads"
        )
    head_dim = weight.shape[0] // num_heads
    rest = weight.shape[1:]
    grouped = weight.reshape(num_groups, num_heads // num_groups, head_dim, *rest)
    return grouped.mean(1).reshape(num_groups * head_dim, *rest)


def convert_gqa_to_saga(model: PreTrainedModel, num_key_heads: int) -> SagaForCausalLM:
    """A :class:`SagaForCausalLM` with ``num_key_heads`` pooled key heads from a Llama-style GQA
    model (``LlamaForCausalLM`` or compatible: ``model.layers[i].self_attn.k_proj``)."""
    cfg = model.config
    for field in ("num_attention_heads", "num_key_value_heads", "hidden_size"):
        if not isinstance(getattr(cfg, field, None), int):
            raise SagaError(f"checkpoint config: field {field!r} missing; not a Llama-style model")
    h_kv = int(cfg.num_key_value_heads)
    if num_key_heads < 1 or h_kv % num_key_heads:
        raise SagaError(
            f"key heads: {num_key_heads} does not divide the checkpoint's {h_kv} key/value heads"
        )
    settings: dict[str, Any] = {
        k: v for k, v in cfg.to_dict().items() if k in SagaConfig.__dataclass_fields__
    }
    for drop in ("model_type", "architectures", "num_key_heads", "transformers_version"):
        settings.pop(drop, None)
    saga = SagaForCausalLM(SagaConfig(num_key_heads=num_key_heads, **settings))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for name in list(state):
        if ".self_attn.k_proj." in name:
            state[name] = pool_key_heads(state[name], h_kv, num_key_heads)
    missing, unexpected = saga.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("lm_head.weight")]  # tied to the embeddings
    if missing or unexpected:
        raise SagaError(
            f"checkpoint: weights do not match a Llama layout (missing {missing[:3]}, "
            f"unexpected {unexpected[:3]})"
        )
    if getattr(cfg, "tie_word_embeddings", False):
        saga.tie_weights()
    saga.generation_config = model.generation_config
    enable_saga_attention(saga, "dense")
    return saga.eval()
