"""Failure attribution: which step of a failed trajectory went wrong.

With step scores ``A_t`` the attributed step is ``argmin_t A_t``: the action that lost the most
value. Evaluated as top-1 accuracy against the verifier's first wrong step; chance is the mean
of ``1 / T`` over the failed trajectories.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from progress_advantage.errors import ProgressAdvantageError

__all__ = ["attribute_failure", "attribution_accuracy", "chance_accuracy"]


def attribute_failure(step_scores: ArrayLike) -> int:
    """``argmin_t A_t`` (the earliest on ties: an error is blamed where it first appears)."""
    s = np.asarray(step_scores, dtype=np.float64).ravel()
    if s.size == 0:
        raise ProgressAdvantageError("attribute_failure: the trajectory has no steps")
    return int(np.argmin(np.where(np.isnan(s), np.inf, s)))


def attribution_accuracy(
    step_scores: Sequence[ArrayLike], first_error: Sequence[int]
) -> tuple[int, int]:
    """``(hits, n)``: how often ``argmin`` equals the labelled first wrong step."""
    if len(step_scores) != len(first_error):
        raise ProgressAdvantageError(
            f"attribution_accuracy: {len(step_scores)} trajectories but {len(first_error)} labels"
        )
    hits = sum(
        attribute_failure(s) == int(e) for s, e in zip(step_scores, first_error, strict=True)
    )
    return int(hits), len(first_error)


def chance_accuracy(n_steps: Sequence[int]) -> float:
    """Expected accuracy of a uniformly random step: mean of ``1 / T``."""
    t = np.asarray(n_steps, dtype=np.float64)
    if t.size == 0 or (t < 1).any():
        raise ProgressAdvantageError("chance_accuracy: need step counts >= 1")
    return float((1.0 / t).mean())
