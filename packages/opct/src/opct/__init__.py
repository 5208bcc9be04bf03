"""opct: On-Policy Consistency Training (OPCT) as a trl trainer.

Consistency training teaches a model to answer a prompt with a sycophancy cue or a jailbreak
wrapper as it answers the clean prompt. OPCT computes the objective over the model's own
responses to the wrapped prompt, supervised by the frozen initial model conditioned on the
clean prompt (:func:`consistency_divergence`, :class:`OPCTTrainer`); the baseline fits targets
generated once, offline, from the clean prompt with SFT (:func:`train_bct`).
"""

from __future__ import annotations

from typing import Any

from opct.base import BaseRecipe, sycophantic_base
from opct.errors import OPCTError
from opct.pairs import (
    Pair,
    jailbreak_pairs,
    load_pairs,
    mixed_pairs,
    safety_pairs,
    sycophancy_pairs,
    write_pairs,
)
from opct.world import AlignmentWorld

# torch, transformers and trl load on first use, so `import opct` and `opct --help` are fast.
_LAZY = {
    "OPCTConfig": "opct.trainer",
    "OPCTTrainer": "opct.trainer",
    "TrainSettings": "opct.harness",
    "bct_targets": "opct.harness",
    "pairs_dataset": "opct.harness",
    "train_bct": "opct.harness",
    "train_opct": "opct.harness",
    "consistency_divergence": "opct.loss",
    "token_divergence": "opct.loss",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'opct' has no attribute {name!r}")


__version__ = "0.3.0"

__all__ = [
    "AlignmentWorld",
    "BaseRecipe",
    "OPCTConfig",
    "OPCTError",
    "OPCTTrainer",
    "Pair",
    "TrainSettings",
    "__version__",
    "bct_targets",
    "consistency_divergence",
    "jailbreak_pairs",
    "load_pairs",
    "mixed_pairs",
    "pairs_dataset",
    "safety_pairs",
    "sycophancy_pairs",
    "sycophantic_base",
    "token_divergence",
    "train_bct",
    "train_opct",
    "write_pairs",
]
