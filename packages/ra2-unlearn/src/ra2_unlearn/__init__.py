"""ra2-unlearn: RA^2 retain-anchored attraction unlearning, its baselines and evaluation.

RA^2 moves forget-token hidden states at layer l toward kernel-weighted nearby retain
representations (not RMU's random direction) while matching every higher layer on retain
data. Torch-dependent parts import lazily, so ``import ra2_unlearn`` and ``ra2 --help`` are
instant.
"""

from __future__ import annotations

from typing import Any

from ra2_unlearn.config import METHODS, UnlearnConfig
from ra2_unlearn.errors import UnlearnError

__version__ = "0.3.0"

__all__ = [
    "METHODS",
    "AnchorBank",
    "UnlearnConfig",
    "UnlearnError",
    "UnlearnTrainer",
    "__version__",
    "build_anchor_bank",
    "fact_splits",
    "load_mc_jsonl",
    "qa_scores",
    "unlearn",
]

_LAZY = {
    "AnchorBank": "ra2_unlearn.anchors",
    "UnlearnTrainer": "ra2_unlearn.trainer",
    "build_anchor_bank": "ra2_unlearn.trainer",
    "unlearn": "ra2_unlearn.trainer",
    "fact_splits": "ra2_unlearn.data",
    "load_mc_jsonl": "ra2_unlearn.data",
    "qa_scores": "ra2_unlearn.evaluate",
}


def __getattr__(name: str) -> Any:
    """Import torch-dependent parts on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ra2_unlearn' has no attribute {name!r}")
