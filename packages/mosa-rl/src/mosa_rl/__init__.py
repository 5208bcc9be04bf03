"""mosa-rl: MOSA (mean order-statistic alignment) as a regulariser for GRPO, on trl.

RL fine-tuning sharpens every next-token distribution and so loses the exploration that
pass@K measures in the base model. MOSA holds the policy's *mean order-statistic profile*
(next-token probabilities sorted by rank, averaged over tokens) close to the base model's
with a KL, leaving free which token ranks first. The loss is :func:`mosa_loss`; the trl
trainer is :class:`MOSATrainer` (torch and trl are imported lazily, so ``import mosa_rl`` and
``mosa --help`` stay instant).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mosa_rl.errors import MosaError

__version__ = "0.3.0"

if TYPE_CHECKING:  # pragma: no cover
    from mosa_rl.evaluation import pass_at_k
    from mosa_rl.loss import mosa_loss, order_statistic_profile, profile_kl
    from mosa_rl.trainer import MOSAConfig, MOSATrainer

__all__ = [
    "MOSAConfig",
    "MOSATrainer",
    "MosaError",
    "__version__",
    "mosa_loss",
    "order_statistic_profile",
    "pass_at_k",
    "profile_kl",
]

_LAZY = {
    "mosa_loss": "mosa_rl.loss",
    "order_statistic_profile": "mosa_rl.loss",
    "profile_kl": "mosa_rl.loss",
    "pass_at_k": "mosa_rl.evaluation",
    "MOSAConfig": "mosa_rl.trainer",
    "MOSATrainer": "mosa_rl.trainer",
}


def __getattr__(name: str) -> Any:
    """Import torch/trl only when their parts are used, so ``import mosa_rl`` stays light."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mosa_rl' has no attribute {name!r}")
