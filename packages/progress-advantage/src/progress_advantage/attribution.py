"""Failure attribution: which step of a failed trajectory went wrong.

Given step scores ``A_1..A_T`` the authors' code (``runners/fa.py``) offers three rules, the
first its default:

- ``min-cumulative``: ``argmin_t Σ_{k<=t} A_k``, the step where the running reward bottoms out
  (the README's ``err_step = argmin(cumsum(A))``). With ``A_t = V*(s_{t+1}) − V*(s_t)`` the
  running sum is the value after step ``t`` (less the start's), so this is the step after which
  the trajectory's prospects are lowest;
- ``sharpest-drop``: ``argmin_t A_t`` if some ``A_t < 0``, else the first step;
- ``sharpest-abs-drop``: ``argmin_t (A_t − A_{t−1})`` over ``t >= 2`` (the largest fall from one
  step's score to the next), the first step when no score falls.

``argmin`` (the plain ``argmin_t A_t``, 0.1's rule) is kept as a fourth. Ties go to the earliest
step: an error is blamed where it first shows. Accuracy is top-1 against the verifier's first
wrong step; the chance baselines are positional priors (always the first step, always the last,
a uniformly random step), and a fair comparison takes the best of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike

from progress_advantage.errors import ProgressAdvantageError

__all__ = [
    "ATTRIBUTION_RULES",
    "POSITIONAL_PRIORS",
    "AttributionRule",
    "attribute_failure",
    "attribution_accuracy",
    "chance_accuracy",
    "positional_hit",
]

AttributionRule = Literal["min-cumulative", "sharpest-drop", "sharpest-abs-drop", "argmin"]
ATTRIBUTION_RULES: tuple[str, ...] = get_args(AttributionRule)
POSITIONAL_PRIORS = ("first step", "last step", "uniform step")


def _scores(step_scores: ArrayLike) -> np.ndarray:
    s = np.asarray(step_scores, dtype=np.float64).ravel()
    if s.size == 0:
        raise ProgressAdvantageError("attribute_failure: the trajectory has no steps")
    if not np.isfinite(s).all():
        raise ProgressAdvantageError(
            "attribute_failure: step scores must be finite numbers (got NaN or infinity)"
        )
    return s


def _overflow_free(op: Callable[[np.ndarray], np.ndarray], s: np.ndarray) -> np.ndarray:
    """``op(s)`` (a cumulative sum or differences), recomputed on ``s * 2**-64`` when it
    overflows: huge finite scores (1e308) made the running sum Infinity and blamed the wrong
    step (issue #46). Scaling by a power of two is exact, so the order, and the blamed step, is
    that of the unscaled values; inputs that do not overflow take the first computation as
    before."""
    with np.errstate(over="ignore"):  # an overflow is detected below, not warned about
        out = np.asarray(op(s))
    if np.isfinite(out).all():
        return out
    return np.asarray(op(np.ldexp(s, -64)))


def attribute_failure(
    step_scores: ArrayLike, rule: AttributionRule | str = "min-cumulative"
) -> int:
    """The blamed step (0-based) under ``rule``; see the module docstring."""
    s = _scores(step_scores)
    if rule == "min-cumulative":
        return int(np.argmin(_overflow_free(np.cumsum, s)))
    if rule == "argmin":
        return int(np.argmin(s))
    if rule == "sharpest-drop":
        return int(np.argmin(s)) if (s < 0).any() else 0
    if rule == "sharpest-abs-drop":
        if s.size < 2:
            return 0
        delta = _overflow_free(np.diff, s)
        return int(np.argmin(delta)) + 1 if (delta <= 0).any() else 0
    raise ProgressAdvantageError(
        f"attribution rule {rule!r} is not one of {', '.join(ATTRIBUTION_RULES)}"
    )


def attribution_accuracy(
    step_scores: Sequence[ArrayLike],
    first_error: Sequence[int],
    rule: AttributionRule | str = "min-cumulative",
) -> tuple[int, int]:
    """``(hits, n)``: how often the blamed step equals the labelled first wrong step."""
    if len(step_scores) != len(first_error):
        raise ProgressAdvantageError(
            f"attribution_accuracy: {len(step_scores)} trajectories but {len(first_error)} labels"
        )
    hits = sum(
        attribute_failure(s, rule) == int(e) for s, e in zip(step_scores, first_error, strict=True)
    )
    return int(hits), len(first_error)


def positional_hit(prior: str, n_steps: int, first_error: int) -> float:
    """Expected top-1 hit of a positional prior on one trajectory of ``n_steps`` steps."""
    if n_steps < 1:
        raise ProgressAdvantageError(f"positional_hit: need n_steps >= 1, got {n_steps}")
    if prior == "first step":
        return float(first_error == 0)
    if prior == "last step":
        return float(first_error == n_steps - 1)
    if prior == "uniform step":
        return 1.0 / n_steps
    raise ProgressAdvantageError(f"positional prior {prior!r} is not one of {POSITIONAL_PRIORS}")


def chance_accuracy(n_steps: Sequence[int]) -> float:
    """Expected accuracy of a uniformly random step: mean of ``1 / T``."""
    t = np.asarray(n_steps, dtype=np.float64)
    if t.size == 0 or (t < 1).any():
        raise ProgressAdvantageError("chance_accuracy: need step counts >= 1")
    return float((1.0 / t).mean())
