"""Checkpoint layouts of real block-diffusion LMs, loaded without their remote code.

Released block-diffusion checkpoints ship their own ``configuration_*.py``/``modeling_*.py``
(``auto_map``, ``trust_remote_code=True``), written for one transformers version and for
flash-attn. Their weights, though, are a stock architecture's: read from the public sources,

==================== ================================ =========== ==================================
layout               config.json                      weights     block size / [MASK]
==================== ================================ =========== ==================================
SDAR (JetAstra)      ``model_type: "sdar"``,          Qwen3's     ``block_size`` (4 in SDAR-1.7B),
                     ``SDARForCausalLM``, ``auto_map``            ``mask_token_id`` (151669,
                     (``modeling_sdar.SDARModel``)                tokenizer ``<|MASK|>``)
Fast-dLLM v2 (NVlabs) ``model_type: "Fast_dLLM_Qwen"`` Qwen2's     ``bd_size`` (32); the [MASK] is
                     ``Fast_dLLM_QwenForCausalLM``,   (q/k/v      the tokenizer's ``|<MASK>|``
                     ``auto_map`` (``modeling.*``)    biases)     (151665, a ``generate`` default)
==================== ================================ =========== ==================================

so a layout here maps the config onto the stock transformers config (its own fields renamed:
``bd_size -> block_size``; ``auto_map``, ``architectures`` and the ``attn_implementation`` it
names dropped), finds the [MASK] token (config, else the tokenizer's added tokens), renames
weights where a layout's names differ from the stock ones (``key_mapping``, passed to
``from_pretrained``; the identity for both layouts above: SDAR's modeling file is Qwen3's with
the same module names, Fast-dLLM v2's is Qwen2's), and checks that every weight of the stock
model was found in the checkpoint (a layout whose names do not match would otherwise load as
random weights without a word).

Fast-dLLM v2 also predicts with a **token shift**: the logits at position ``i`` are the
prediction for ``i + 1`` (it keeps the AR model's head), so a masked position ``j`` of a block
reads the logits of ``j - 1``, and the block's first position the last logits of the committed
prefix. The layout records it in the mapped config (``token_shift``), and
:func:`mage_attention.decoding.generate` follows it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mage_attention.errors import MageError

__all__ = ["LAYOUTS", "Layout", "find_layout", "find_mask_token", "mapped_config"]


@dataclass(frozen=True)
class Layout:
    """How one family's checkpoint folder maps onto a stock transformers architecture."""

    name: str
    model_types: tuple[str, ...]  # config.json's model_type, compared lower-cased
    architectures: tuple[str, ...]  # config.json's architectures (also identify the layout)
    base: str  # the stock transformers model_type its weights are
    renamed: dict[str, str] = field(default_factory=dict)  # its config field -> the stock name
    mask_tokens: tuple[str, ...] = ()  # the tokenizer's [MASK] token, where the config has none
    key_mapping: dict[str, str] = field(default_factory=dict)  # regex -> replacement (weights)
    token_shift: bool = False  # logits at i predict token i + 1 (module doc)


LAYOUTS: dict[str, Layout] = {
    "sdar": Layout(
        "SDAR", ("sdar",), ("SDARForCausalLM",), "qwen3", mask_tokens=("<|MASK|>",)
    ),
    "fast-dllm-v2": Layout(
        "Fast-dLLM v2", ("fast_dllm_qwen",), ("Fast_dLLM_QwenForCausalLM",), "qwen2",
        renamed={"bd_size": "block_size"}, mask_tokens=("|<MASK>|",), token_shift=True,
    ),
}  # fmt: skip

#: config.json fields that belong to the remote code, not to the stock config.
_DROPPED = ("auto_map", "architectures", "model_type", "attn_implementation", "_name_or_path")


def find_layout(data: dict[str, Any]) -> Layout | None:
    """The layout a ``config.json`` (as a dict) names, or None for a stock architecture."""
    model_type = str(data.get("model_type", "")).lower()
    archs = set(data.get("architectures") or ())
    for layout in LAYOUTS.values():
        if model_type in layout.model_types or archs & set(layout.architectures):
            return layout
    return None


def mapped_config(data: dict[str, Any], layout: Layout) -> Any:
    """The stock transformers config of a layout's ``config.json`` (module doc)."""
    from transformers import AutoConfig

    fields = {k: v for k, v in data.items() if k not in _DROPPED}
    for old, new in layout.renamed.items():
        if old in fields:
            fields.setdefault(new, fields.pop(old))
    fields["token_shift"] = layout.token_shift
    try:
        return AutoConfig.for_model(layout.base, **fields)
    except (TypeError, ValueError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MageError(
            f"config.json: cannot map the {layout.name} config onto {layout.base}: {first}"
        ) from None


def _added_tokens(folder: Path) -> dict[str, int]:
    """Added tokens (content -> id) from ``tokenizer.json`` and ``tokenizer_config.json``."""
    found: dict[str, int] = {}
    for name in ("tokenizer.json", "tokenizer_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise MageError(f"{path}: cannot read ({exc})") from None
        if not isinstance(data, dict):
            continue
        for tok in data.get("added_tokens") or ():
            if isinstance(tok, dict) and isinstance(tok.get("id"), int):
                found.setdefault(str(tok.get("content")), tok["id"])
        for idx, tok in (data.get("added_tokens_decoder") or {}).items():
            if isinstance(tok, dict) and str(idx).isdigit():
                found.setdefault(str(tok.get("content")), int(idx))
    return found


def find_mask_token(folder: Path, layout: Layout | None) -> int | None:
    """The [MASK] token id of a layout's checkpoint from its tokenizer files (None: not found).

    Stock folders have no agreed [MASK] token name, so only a layout's names are looked up."""
    if layout is None or not layout.mask_tokens:
        return None
    added = _added_tokens(folder)
    for name in layout.mask_tokens:
        if name in added:
            return added[name]
    return None
