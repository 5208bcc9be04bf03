"""mage-attention: MAGE, [MASK]-guided sparse attention for block-diffusion LMs.

A block-diffusion LM denoises a block of ``B`` tokens in ``T`` steps over a KV cache; MAGE runs
one exact attention pass at the first step (the all-[MASK] block), keeps per layer and KV head
the top-``k`` prefix keys by that pass's attention mass (plus sinks and a local window), gathers
them once, and reuses them for steps ``2..T``. Heavy modules (torch, transformers) load on use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.3.0"

_EXPORTS = {
    "Budget": "mage_attention.attention",
    "Policy": "mage_attention.attention",
    "block_attention": "mage_attention.attention",
    "mass_recall": "mage_attention.attention",
    "Mage": "mage_attention.mage",
    "Exact": "mage_attention.baselines",
    "Quest": "mage_attention.baselines",
    "SparseD": "mage_attention.baselines",
    "RandomK": "mage_attention.baselines",
    "make_policy": "mage_attention.baselines",
    "generate": "mage_attention.decoding",
    "ModelSpec": "mage_attention.modeling",
    "build_model": "mage_attention.modeling",
    "load_model": "mage_attention.modeling",
    "load_tokenizer": "mage_attention.modeling",
    "RetrievalTask": "mage_attention.task",
    "MageError": "mage_attention.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'mage_attention' has no attribute {name!r}")
