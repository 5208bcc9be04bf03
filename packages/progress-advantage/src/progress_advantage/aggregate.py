"""Aggregations: token scores to step scores, step scores to one trajectory score.

The paper scores a step by aggregating its tokens (``sum`` is the definition that recovers the
advantage; ``mean``, ``last``, ``min`` and ``max`` are the variants its code offers) and a
trajectory by aggregating its steps (``sum``, ``mean``, ``min``, ``last`` and ``bottom10``: the
mean of the lowest 10% of steps, at least one). Both are vectorised: a trajectory's tokens carry
the index of their step, and ``ufunc.at`` reductions fold them in one call.
"""

from __future__ import annotations

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


def bottom_fraction_mean(values: ArrayLike, fraction: float = 0.1) -> float:
    """Mean of the lowest ``fraction`` of ``values`` (at least one): DeepConf's tail statistic."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    if v.size == 0:
        raise ProgressAdvantageError("bottom_fraction_mean: no values")
    k = max(1, int(np.ceil(fraction * v.size)))
    return float(v[:k].mean())


def aggregate_trajectory(step_scores: ArrayLike, how: TrajectoryAgg | str = "mean") -> float:
    """One score for a trajectory from its step scores."""
    v = np.asarray(step_scores, dtype=np.float64)
    if v.size == 0:
        raise ProgressAdvantageError("aggregate_trajectory: the trajectory has no steps")
    if how == "sum":
        return float(v.sum())
    if how == "mean":
        return float(v.mean())
    if how == "min":
        return float(v.min())
    if how == "last":
        return float(v[-1])
    if how == "bottom10":
        return bottom_fraction_mean(v, 0.1)
    raise ProgressAdvantageError(
        f"trajectory aggregation {how!r} is not one of {', '.join(TRAJECTORY_AGGREGATIONS)}"
    )
