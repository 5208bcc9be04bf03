"""saga-attention: SAGA asymmetric key/value heads with Atop-N sparse decode attention.

Under sparse attention the query-key scoring pass over the whole cache dominates a decode step,
so SAGA cuts the number of key heads while keeping the value heads, and selects the attended
tokens with an approximate top-N. The public API is re-exported here (torch-free parts eagerly,
the torch parts on first use, so ``import saga_attention`` and ``saga --help`` stay light).
"""

from __future__ import annotations

from typing import Any

from saga_attention.heads import HeadLayout, SagaError

__version__ = "0.3.0"

_LAZY = {
    "AtopConfig": "saga_attention.selection",
    "atop_n": "saga_attention.selection",
    "exact_top_n": "saga_attention.selection",
    "selection_recall": "saga_attention.selection",
    "dense_attention": "saga_attention.attention",
    "dense_decode": "saga_attention.attention",
    "sparse_attention": "saga_attention.attention",
    "sparse_decode": "saga_attention.attention",
    "SagaConfig": "saga_attention.modeling",
    "SagaForCausalLM": "saga_attention.modeling",
    "SagaQwen2ForCausalLM": "saga_attention.modeling",
    "SagaQwen3ForCausalLM": "saga_attention.modeling",
    "SagaMistralForCausalLM": "saga_attention.modeling",
    "static_cache": "saga_attention.modeling",
    "enable_saga_attention": "saga_attention.modeling",
    "register": "saga_attention.modeling",
    "convert_gqa_to_saga": "saga_attention.convert",
    "RecallTask": "saga_attention.recall",
}

__all__ = ["HeadLayout", "SagaError", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'saga_attention' has no attribute {name!r}")
