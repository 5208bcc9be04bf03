"""meta-pref: meta-learned reward models and DPO initialisations for low-resource languages.

Source languages are tasks; first-order MAML or Reptile (:mod:`meta_pref.meta`, with
``torch.func``) learns an initialisation of a reward model (Bradley-Terry loss) or a policy
(DPO loss) that adapts to a target language from a few preference pairs; adaptation runs trl's
``RewardTrainer`` and ``DPOTrainer`` (:mod:`meta_pref.adapt`). The toy world
(:mod:`meta_pref.world`) writes one concept grammar in languages at a controllable distance,
with a known true reward.
"""

from __future__ import annotations

from typing import Any

from meta_pref.data import (
    PreferencePair,
    by_language,
    check_pairs,
    load_pairs,
    select_languages,
    write_pairs,
)
from meta_pref.errors import MetaPrefError
from meta_pref.world import Language, MultilingualWorld, default_world

# torch, transformers and trl load on first use, so `import meta_pref` and `--help` are fast.
_LAZY = {
    "MetaConfig": "meta_pref.meta",
    "MetaResult": "meta_pref.meta",
    "meta_train": "meta_pref.meta",
    "joint_train": "meta_pref.meta",
    "bradley_terry_objective": "meta_pref.meta",
    "dpo_objective": "meta_pref.meta",
    "bradley_terry_loss": "meta_pref.loss",
    "dpo_loss": "meta_pref.loss",
    "sequence_logps": "meta_pref.loss",
    "AdaptSettings": "meta_pref.adapt",
    "adapt_reward_model": "meta_pref.adapt",
    "adapt_policy": "meta_pref.adapt",
    "reward_accuracy": "meta_pref.adapt",
    "win_rate": "meta_pref.adapt",
    "lora_only": "meta_pref.adapt",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'meta_pref' has no attribute {name!r}")


__version__ = "0.3.0"

__all__ = [
    "AdaptSettings",
    "Language",
    "MetaConfig",
    "MetaPrefError",
    "MetaResult",
    "MultilingualWorld",
    "PreferencePair",
    "__version__",
    "adapt_policy",
    "adapt_reward_model",
    "bradley_terry_loss",
    "bradley_terry_objective",
    "by_language",
    "check_pairs",
    "default_world",
    "dpo_loss",
    "dpo_objective",
    "joint_train",
    "load_pairs",
    "lora_only",
    "meta_train",
    "reward_accuracy",
    "select_languages",
    "sequence_logps",
    "win_rate",
    "write_pairs",
]
