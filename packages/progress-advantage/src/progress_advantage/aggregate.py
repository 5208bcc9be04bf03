"""Aggregations: token scores to step scores, step scores to one trajectory score.

The paper scores a step by aggregating its tokens (``sum`` is the definition that recovers the
advantage; ``mean``, ``last``, ``min`` and ``max`` are the variants its code offers) and a
trajectory by aggregating its steps (``sum``, ``mean``, ``min``, ``last`` and ``bottom10``: the
mean of the lowest 10% of steps, at least one). Both are vectorised: a trajectory's tokens carry
the index of their step, and ``ufunc.at`` reductions fold them in one call.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike

from progress_advantage.errors import ProgressAdvantageError

__all__ = [
    "STEP_AGGREGATIONS",
    "TRAJECTORY_AGGREGATIONS",
    "StepAgg",
    "TrajectoryAgg",
    "aggregate_steps",
    "aggregate_trajectory",
    "bottom_fraction_mean",
]

StepAgg = Literal["sum", "mean", "last", "min", "max"]
TrajectoryAgg = Literal["sum", "mean", "min", "last", "bottom10"]
STEP_AGGREGATIONS: tuple[str, ...] = get_args(StepAgg)
TRAJECTORY_AGGREGATIONS: tuple[str, ...] = get_args(TrajectoryAgg)


def aggregate_steps(
    values: ArrayLike, step: ArrayLike, n_steps: int, how: StepAgg | str = "sum"
) -> np.ndarray:
    """Per-step aggregate of token ``values``; ``step[i]`` is the step of token ``i``.

    Tokens must be in order (``last`` takes the highest token position of each step). A step
    without tokens (possible only when a tokenizer merges a step's characters into a token that
    starts in the previous step) gets 0, the paper's convention for truncated spans.
    """
    v = np.asarray(values, dtype=np.float64)
    s = np.asarray(step, dtype=np.int64)
    if v.shape != s.shape or v.ndim != 1:
        raise ProgressAdvantageError(
            f"aggregate_steps: values {v.shape} and step {s.shape} must be equal 1-d shapes"
        )
    if s.size and (s.min() < 0 or s.max() >= n_steps):
        raise ProgressAdvantageError(f"aggregate_steps: step index outside 0..{n_steps - 1}")
    counts = np.bincount(s, minlength=n_steps).astype(np.float64)
    if how in ("sum", "mean"):
        out = np.bincount(s, weights=v, minlength=n_steps).astype(np.float64)
        if how == "mean":
            out = np.divide(out, counts, out=np.zeros_like(out), where=counts > 0)
        return out
    if how in ("min", "max"):
        fill = np.inf if how == "min" else -np.inf
        out = np.full(n_steps, fill)
        (np.minimum if how == "min" else np.maximum).at(out, s, v)
        out[counts == 0] = 0.0
        return out
    if how == "last":
        last = np.full(n_steps, -1, dtype=np.int64)
        np.maximum.at(last, s, np.arange(s.size))
        return np.where(last >= 0, v[np.maximum(last, 0)] if v.size else 0.0, 0.0)
    raise ProgressAdvantageError(
        f"step aggregation {how!r} is not one of {', '.join(STEP_AGGREGATIONS)}"
    )


_SCALE = 64  # 2**-64 keeps a scaled fsum of any realistic number of float terms finite


def _finite_sum(v: np.ndarray) -> float:
    """The sum of finite values, correctly rounded (``math.fsum``), or a one-line error.

    A plain float sum of two step scores of 1e308 is Infinity, and best-of-N then ranked that
    trajectory as tied with every other overflowing one and picked the wrong one with exit 0
    (issue #46). ``fsum`` is exact until the final rounding (huge scores that cancel keep
    their small remainder) and raises instead of returning Infinity.
    """
    try:
        return math.fsum(v.tolist())
    except OverflowError:  # an intermediate partial sum overflowed, the total may not
        pass
    # Scaling by a power of two is exact (bar values below 2**-958, far beneath the rounding of
    # a total this large), so this is still the correctly rounded sum, computed out of reach of
    # overflow; ldexp raises if the total itself is beyond the float range.
    try:
        return math.ldexp(math.fsum(math.ldexp(x, -_SCALE) for x in v.tolist()), _SCALE)
    except OverflowError:
        raise ProgressAdvantageError(
            "the sum of the step scores is beyond the float range (about 1.8e308); "
            "rank by a mean (--traj-agg mean) or rescale the scores"
        ) from None


def _finite_mean(v: np.ndarray) -> float:
    """The mean of finite values without overflowing on the way (1e308 and 1e308 mean 1e308)."""
    try:
        return math.fsum(v.tolist()) / v.size
    except OverflowError:
        return math.fsum((v / v.size).tolist())


def bottom_fraction_mean(values: ArrayLike, fraction: float = 0.1) -> float:
    """Mean of the lowest ``fraction`` of ``values`` (at least one): DeepConf's tail statistic."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    if v.size == 0:
        raise ProgressAdvantageError("bottom_fraction_mean: no values")
    k = max(1, int(np.ceil(fraction * v.size)))
    if np.isfinite(v[:k]).all():
        return _finite_mean(v[:k])
    return float(v[:k].mean())


def aggregate_trajectory(step_scores: ArrayLike, how: TrajectoryAgg | str = "mean") -> float:
    """One score for a trajectory from its step scores.

    Finite scores are summed and averaged with ``math.fsum`` (correctly rounded, no silent
    overflow: a sum beyond the float range is a :class:`ProgressAdvantageError`); non-finite
    ones (NaN marks an unscorable step) keep numpy's semantics, so a NaN trajectory stays NaN.
    """
    v = np.asarray(step_scores, dtype=np.float64)
    if v.size == 0:
        raise ProgressAdvantageError("aggregate_trajectory: the trajectory has no steps")
    finite = bool(np.isfinite(v).all())
    if how == "sum":
        return _finite_sum(v) if finite else float(v.sum())
    if how == "mean":
        return _finite_mean(v) if finite else float(v.mean())
    if how == "min":
        return float(v.min())
    if how == "last":
        return float(v[-1])
    if how == "bottom10":
        return bottom_fraction_mean(v, 0.1)
    raise ProgressAdvantageError(
        f"trajectory aggregation {how!r} is not one of {', '.join(TRAJECTORY_AGGREGATIONS)}"
    )
