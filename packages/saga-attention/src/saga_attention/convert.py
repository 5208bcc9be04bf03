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

Every family of :data:`~saga_attention.modeling.FAMILIES` converts into its own SAGA class, so
what the architecture has beyond Llama is carried: Qwen2's q/k/v biases (the key bias is pooled
like the weight, ``b'[i] = mean_j b[i·r + j]``, so a pooled key is still the mean of its group's
keys), Qwen3's ``q_norm``/``k_norm`` (one ``head_dim`` weight shared by the heads: kept as is)
and Mistral's ``sliding_window`` (a config field the SAGA config keeps; the mask applies it).
With ``H_k = H_kv`` nothing is pooled and the converted model is the source model (tested: equal
logits under dense attention at 1K tokens for each family). With Qwen3's ``k_norm`` the pooled
key is normalised after pooling, not the mean of normalised keys: the fine-tune absorbs it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from saga_attention.heads import SagaError
from saga_attention.modeling import FAMILIES, enable_saga_attention

__all__ = ["convert_gqa_to_saga", "has_tokenizer", "pool_key_heads", "save_converted"]


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


def convert_gqa_to_saga(model: PreTrainedModel, num_key_heads: int) -> PreTrainedModel:
    """The SAGA model (:data:`~saga_attention.modeling.FAMILIES`: Llama, Qwen2, Qwen3, Mistral)
    with ``num_key_heads`` pooled key heads of a GQA ``model`` of that family, dense attention."""
    cfg = model.config
    family = FAMILIES.get(getattr(cfg, "model_type", None) or "")
    if family is None:
        raise SagaError(
            f"checkpoint: model_type {getattr(cfg, 'model_type', None)!r} is not supported "
            f"(saga converts {', '.join(FAMILIES)})"
        )
    for field in ("num_attention_heads", "num_key_value_heads", "hidden_size"):
        if not isinstance(getattr(cfg, field, None), int):
            raise SagaError(f"checkpoint config: field {field!r} missing; not a Llama-style model")
    h_kv = int(cfg.num_key_value_heads)
    if num_key_heads < 1 or h_kv % num_key_heads:
        raise SagaError(
            f"key heads: {num_key_heads} does not divide the checkpoint's {h_kv} key/value heads"
        )
    config_class: Any = family.config_class
    settings: dict[str, Any] = {
        k: v for k, v in cfg.to_dict().items() if k in config_class.__dataclass_fields__
    }
    for drop in ("model_type", "architectures", "num_key_heads", "transformers_version"):
        settings.pop(drop, None)
    saga: Any = family(config_class(num_key_heads=num_key_heads, **settings))
    saga = saga.to(model.dtype)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for name in list(state):
        if ".self_attn.k_proj." in name:
            state[name] = pool_key_heads(state[name], h_kv, num_key_heads)
    missing, unexpected = saga.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("lm_head.weight")]  # tied to the embeddings
    if missing or unexpected:
        raise SagaError(
            f"checkpoint: weights do not match the {cfg.model_type} layout (missing "
            f"{missing[:3]}, unexpected {unexpected[:3]})"
        )
    if getattr(cfg, "tie_word_embeddings", False):
        saga.tie_weights()
    saga.generation_config = model.generation_config
    enable_saga_attention(saga, "dense")
    return saga.eval()


#: Files that mark a folder as holding a tokenizer (fast, sentencepiece or BPE vocabularies).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def has_tokenizer(folder: Path) -> bool:
    """Whether ``folder`` holds a tokenizer (a training run's checkpoint folder often does not)."""
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


def save_converted(model: PreTrainedModel, out: Path, tokenizer: Any | None = None) -> Path:
    """Save ``model`` (and ``tokenizer`` beside it) into ``out`` so that a crash, a kill or a
    full disk never leaves a folder that looks whole.

    Everything is written into a staging folder inside ``out`` first; then any old
    ``config.json`` in ``out`` is removed, the files are renamed into ``out`` (a rename within one
    folder is atomic) and ``config.json``, what makes a folder loadable, is renamed last. A
    failure before that leaves ``out`` without a config (``from_pretrained`` refuses it) and
    removes the staging folder.
    """
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".saga-convert-", dir=out))
    try:
        model.save_pretrained(staging)
        if tokenizer is not None:
            tokenizer.save_pretrained(staging)
        config = staging / "config.json"
        if not config.is_file():
            raise SagaError(f"--out {out}: the model was saved without a config.json")
        (out / "config.json").unlink(missing_ok=True)
        for path in sorted(staging.iterdir()):
            if path != config:
                os.replace(path, out / path.name)
        os.replace(config, out / "config.json")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out
