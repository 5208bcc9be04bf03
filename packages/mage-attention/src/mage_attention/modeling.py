"""A block-diffusion LM in transformers terms: any causal-LM architecture of transformers (a
Llama built from a config here; a real checkpoint folder alike) run with a block-causal mask
and the ``"mage"`` attention implementation.

Block diffusion (BD3-LM, SDAR, Fast-dLLM v2) splits a sequence into blocks of ``B`` tokens:
attention is bidirectional inside a block and causal across blocks,

    M[i, j] = 1  iff  ⌊j / B⌋ <= ⌊i / B⌋                      (block-causal mask)

so a block's keys and values depend only on earlier blocks and itself, and a committed block's
KV cache entries never change. Generation denoises one block of all-[MASK] tokens at a time
over that cache (:mod:`mage_attention.decoding`).

Three transformers pieces carry it:

- the config: the architecture's own config with two extra fields, ``block_size`` and
  ``mask_token_id`` (saved in ``config.json``, so ``save_pretrained``/``from_pretrained``
  round-trips them);
- :func:`mage_attention_forward`, registered as the attention implementation ``"mage"``: SDPA
  under the 4-D mask it is given (training, prefill), or, during denoising, the sparse
  attention of the decoder's :class:`~mage_attention.decoding.SparseAttentionState` passed
  through the model's ``**kwargs`` as ``mage_state``;
- :class:`BlockCache`, a ``DynamicCache`` whose ``frozen`` flag keeps a block being denoised
  out of the cache: the denoising steps see the committed prefix and the block's current
  states, and only the committed block is appended.
"""

from __future__ import annotations

import inspect
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import AttentionInterface, AutoModelForCausalLM, DynamicCache, LlamaConfig

from mage_attention.errors import MageError

__all__ = [
    "ATTENTION",
    "BlockCache",
    "ModelSpec",
    "block_causal_mask",
    "build_model",
    "check_block_size",
    "forward_kwargs",
    "load_model",
    "load_tokenizer",
    "mage_attention_forward",
]

#: The attention implementation name the models run under.
ATTENTION = "mage"


def block_causal_mask(
    length: int, block_size: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """``M[1, 1, L, L]`` (True = may attend): ``⌊j/B⌋ <= ⌊i/B⌋``."""
    check_block_size(length, block_size, "sequence")
    blocks = torch.arange(length, device=device) // block_size
    return (blocks[None, :] <= blocks[:, None]).view(1, 1, length, length)


def check_block_size(length: int, block_size: int, what: str) -> None:
    """One line when ``block_size`` does not divide ``length`` (blocks must tile the sequence)."""
    if block_size < 1:
        raise MageError(f"block size: must be >= 1, got {block_size}")
    if length % block_size:
        raise MageError(
            f"block size {block_size} does not divide the {what} length {length} (pad the "
            f"{what} to a multiple of {block_size} or choose a block size that divides it)"
        )


def mage_attention_forward(
    module: Any, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, **kwargs: Any
) -> tuple[Tensor, None]:
    """transformers' attention interface: ``query[b, H_q, T, d]``, ``key/value[b, H_kv, S, d]``
    -> ``(out[b, T, H_q, d], None)``; ``mask`` is the 4-D mask (or None), ``kwargs`` carry
    ``scaling`` and the model's own keyword arguments.

    With a ``mage_state`` in ``kwargs`` and a frozen cache, ``key``/``value`` are only the
    block's own states and the state attends over the cached prefix as its policy says (exact,
    MAGE, Quest, ...). Otherwise: SDPA under ``mask`` (None = every query sees every
    key, which is what committing a block over its prefix needs).
    """
    scaling = kwargs.get("scaling")
    state = kwargs.get("mage_state")
    if state is not None and state.active:
        out = state.attend(int(getattr(module, "layer_idx", 0)), query, key, value, scaling)
    else:
        if mask is not None and mask.dtype != torch.bool:
            mask = mask > torch.finfo(mask.dtype).min / 2
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, scale=scaling, enable_gqa=True
        )
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(ATTENTION, mage_attention_forward)


class BlockCache(DynamicCache):
    """The committed prefix's keys and values; a frozen cache does not store new states.

    While ``frozen``, :meth:`update` hands the block's states back untouched and keeps the
    cache as it is, so every denoising step of a block sees the same prefix and positions
    continue from it; ``prefix(layer)`` gives the attention that prefix. Unfrozen, it is a
    plain ``DynamicCache`` (prefill, committing a block).
    """

    frozen: bool = False

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        if self.frozen:
            return key_states, value_states
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    def prefix(self, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(keys, values)`` of the committed prefix at ``layer_idx``: ``[b, H_kv, L, d]``."""
        layer: Any = self.layers[layer_idx]
        keys, values = layer.keys, layer.values
        if keys is None or values is None:
            raise MageError(f"cache: layer {layer_idx} holds no prefix (prefill first)")
        return keys, values


def forward_kwargs(model: torch.nn.Module, cache: BlockCache) -> dict[str, Any]:
    """The cache argument under the name this transformers version takes (5.24 renamed
    ``past_key_values`` to ``cache``; 5.17 on the GPU machine knows only the old name)."""
    name = "cache" if "cache" in inspect.signature(type(model).forward).parameters else None
    return {name or "past_key_values": cache}


@dataclass(frozen=True)
class ModelSpec:
    """A tiny Llama-style block-diffusion LM (grouped-query attention: ``H_q / H_kv`` heads
    per key head, the grouping MAGE selects per)."""

    hidden_size: int = 128
    intermediate_size: int = 256
    layers: int = 3
    query_heads: int = 8
    kv_heads: int = 4
    block_size: int = 8
    rope_theta: float = 1e6  # long-context RoPE base: evaluated beyond the training lengths
    max_positions: int = 8192
    init_std: float = 0.05


def build_model(spec: ModelSpec, vocab_size: int, mask_token_id: int, seed: int = 0) -> Any:
    """A randomly initialised block-diffusion LM from ``spec`` (a transformers Llama)."""
    if not 0 <= mask_token_id < vocab_size:
        raise MageError(f"mask_token_id {mask_token_id} is outside the vocabulary ({vocab_size})")
    fields: dict[str, Any] = {
        "vocab_size": vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.query_heads,
        "num_key_value_heads": spec.kv_heads,
        "max_position_embeddings": spec.max_positions,
        "rope_parameters": {"rope_type": "default", "rope_theta": spec.rope_theta},
        "initializer_range": spec.init_std,
        "tie_word_embeddings": False,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": None,
        # block diffusion's own fields, saved in config.json beside the architecture's
        "block_size": spec.block_size,
        "mask_token_id": mask_token_id,
    }
    config = LlamaConfig(**fields)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=ATTENTION)
    return model.float()


def _read_config(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise MageError(f"{folder / 'config.json'}: cannot read ({exc})") from None
    if not isinstance(data, dict):
        raise MageError(f"{folder / 'config.json'}: not a JSON object")
    return data


def load_model(
    path: str | os.PathLike[str],
    mask_token_id: int | None = None,
    block_size: int | None = None,
) -> Any:
    """A block-diffusion LM from a checkpoint folder, under the ``"mage"`` attention.

    The folder is checked first (truncated weights, a broken ``config.json``: one line naming
    the file). A block-diffusion checkpoint names its [MASK] token (``mask_token_id``) and
    block size in its config; ``mask_token_id``/``block_size`` here override or supply them.
    A checkpoint with neither is refused: denoising starts from [MASK] tokens, and guessing one
    would decode garbage without an error.

    Released layouts (SDAR's ``model_type: "sdar"``, Fast-dLLM v2's ``Fast_dLLM_Qwen``, both
    with ``auto_map`` remote code) load as the stock architecture their weights are
    (:mod:`mage_attention.layouts`): their config mapped, their [MASK] token found in the
    tokenizer where the config has none, every weight checked present. No remote code runs.
    """
    from mage_attention.layouts import LAYOUTS, find_layout, find_mask_token, mapped_config
    from paperstack.checkpoint import check_model_dir, load_pretrained

    folder = check_model_dir(path)
    data = _read_config(folder)
    layout = find_layout(data)
    if layout is None and data.get("auto_map"):
        known = ", ".join(f"{lay.name} ({lay.model_types[0]})" for lay in LAYOUTS.values())
        raise MageError(
            f"{folder / 'config.json'}: model_type {data.get('model_type')!r} needs its own "
            f"remote code (auto_map), which mage does not run; known layouts: {known}"
        )
    config = mapped_config(data, layout) if layout is not None else None
    fields = config.to_dict() if config is not None else data
    mask = mask_token_id if mask_token_id is not None else fields.get("mask_token_id")
    if mask is None:
        mask = find_mask_token(folder, layout)
    if mask is None:
        looked = f" or a {'/'.join(layout.mask_tokens)} token in its tokenizer" if layout else ""
        raise MageError(
            f"{folder / 'config.json'}: no mask_token_id{looked}: not a block-diffusion "
            "checkpoint (denoising starts from [MASK] tokens; pass the id of its mask token)"
        )
    vocab = int(fields.get("vocab_size", 0) or 0)
    if not isinstance(mask, int) or (vocab and not 0 <= mask < vocab):
        raise MageError(
            f"{folder / 'config.json'}: mask_token_id {mask!r} is not a token id of the "
            f"vocabulary ({vocab})"
        )
    size = block_size if block_size is not None else fields.get("block_size")
    if not isinstance(size, int) or size < 1:
        hint = " (bd_size)" if layout is not None and "bd_size" in layout.renamed else ""
        raise MageError(f"{folder / 'config.json'}: no valid block_size{hint} (got {size!r})")
    kwargs: dict[str, Any] = {"attn_implementation": ATTENTION}
    if layout is not None:
        kwargs.update(config=config, key_mapping=layout.key_mapping or None,
                      output_loading_info=True)  # fmt: skip
    loaded: Any = load_pretrained(folder, AutoModelForCausalLM.from_pretrained, **kwargs)
    if layout is not None:
        model, info = loaded
        missing = sorted(info.get("missing_keys") or ())
        if missing:
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise MageError(
                f"{folder}: {layout.name} checkpoint lacks {len(missing)} weights of its "
                f"{layout.base} layout ({', '.join(missing[:3])}{more}): a renamed layout "
                "this version does not map"
            )
    else:
        model = loaded
    model.config.mask_token_id = mask
    model.config.block_size = size
    return model.float().eval()


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """The tokenizer of a checkpoint folder, read from its ``tokenizer.json`` alone.

    ``AutoTokenizer`` reads ``config.json`` too, and for a folder whose config names remote
    code (SDAR's and Fast-dLLM v2's ``auto_map``) it stops to ask whether to run it; the
    tokenizer itself (a Qwen BPE in both families) needs none of it."""
    from transformers import PreTrainedTokenizerFast

    folder = Path(path)
    if not (folder / "tokenizer.json").is_file():
        raise MageError(f"{folder}: no tokenizer.json (pass token ids, or save the tokenizer)")
    try:
        return PreTrainedTokenizerFast.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MageError(f"{folder / 'tokenizer.json'}: cannot load: {first}") from None
