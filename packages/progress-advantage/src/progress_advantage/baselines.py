"""The confidence baselines, scored from the same policy forward pass as progress advantage.

- mean token log-probability of the policy (the classic "confidence");
- self-certainty (Kang et al. 2025): the mean over tokens of ``KL(U || p)``, how far each
  next-token distribution is from uniform;
- bottom-10% confidence (DeepConf, Fu et al. 2025): token confidence ``−mean top-k log p``,
  averaged over sliding windows of tokens ("groups"), then the mean of the lowest 10% of groups;
- random (a uniform score) and majority vote (in :mod:`progress_advantage.selection`).

Each baseline also has a step-level form (the per-step mean) for failure attribution.
"""

from __future__ import annotations

import numpy as np

from progress_advantage.aggregate import bottom_fraction_mean
from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.scoring import TokenScores

__all__ = [
    "CONFIDENCE_BASELINES",
    "DEEPCONF_WINDOW",
    "confidence_step_scores",
    "confidence_trajectory_scores",
    "group_confidence",
]

CONFIDENCE_BASELINES = ("mean-logprob", "self-certainty", "bottom10-confidence")
#: DeepConf's groups are 2048-token windows over traces of 10k+ tokens (about a tenth of a
#: trace); the toy traces are 20-40 tokens, so the window shrinks to 8 tokens in proportion.
DEEPCONF_WINDOW = 8


def group_confidence(confidence: np.ndarray, window: int = DEEPCONF_WINDOW) -> np.ndarray:
    """Sliding-window means of token confidence (one window if the trace is shorter)."""
    c = np.asarray(confidence, dtype=np.float64)
    if c.size == 0:
        raise ProgressAdvantageError("group_confidence: no tokens")
    w = min(window, c.size)
    cs = np.r_[0.0, np.cumsum(c)]
    return (cs[w:] - cs[:-w]) / w


def _need(ts: TokenScores, field: str) -> np.ndarray:
    value = getattr(ts, field)
    if value is None:
        raise ProgressAdvantageError(
            f"{field} needs the policy's full next-token distribution; the ChatModel scoring "
            "path gives chosen-token log-probabilities only"
        )
    return np.asarray(value)


def confidence_trajectory_scores(ts: TokenScores) -> dict[str, float]:
    """Trajectory scores of every confidence baseline (higher = more likely correct)."""
    if ts.policy_logp.size == 0:
        raise ProgressAdvantageError("confidence baselines: the trajectory has no scored tokens")
    return {
        "mean-logprob": float(ts.policy_logp.mean()),
        "self-certainty": float(_need(ts, "self_certainty").mean()),
        "bottom10-confidence": bottom_fraction_mean(group_confidence(_need(ts, "confidence")), 0.1),
    }


def confidence_step_scores(ts: TokenScores) -> dict[str, np.ndarray]:
    """Per-step mean of each baseline's token statistic (low = the suspect step)."""
    return {
        "mean-logprob": ts.step_values(ts.policy_logp, "mean"),
        "self-certainty": ts.step_values(_need(ts, "self_certainty"), "mean"),
        "bottom10-confidence": ts.step_values(_need(ts, "confidence"), "mean"),
    }
