"""Primal gap and primal integral (Berthold 2013) from incumbent timelines.

A timeline is a list of ``(seconds, objective)`` pairs, one per improving incumbent, in the
internal minimisation sense (the gap is symmetric under negating both values, so the model's
sense does not matter).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["primal_gap", "primal_integral"]


def primal_gap(value: float | None, reference: float) -> float:
    """``gamma = |f* - f| / max(|f*|, |f|)``; 0 if both are 0; 1 if no incumbent or the signs
    differ (``f* * f < 0``)."""
    if value is None or not np.isfinite(value):
        return 1.0
    if value == reference:
        return 0.0
    if value * reference < 0:
        return 1.0
    return float(min(1.0, abs(reference - value) / max(abs(reference), abs(value))))


def primal_integral(
    timeline: Sequence[tuple[float, float]], reference: float, horizon: float
) -> float:
    """``PI = (1/T) int_0^T gamma(t) dt`` with ``gamma`` a step function that is 1 until the
    first incumbent; events after ``horizon`` are ignored."""
    if horizon <= 0:
        return 1.0
    t_prev, g_prev, area = 0.0, 1.0, 0.0
    for t, value in sorted(timeline):
        t = min(max(t, 0.0), horizon)
        area += g_prev * (t - t_prev)
        t_prev = t
        g_prev = min(g_prev, primal_gap(value, reference))
    area += g_prev * (horizon - t_prev)
    return float(area / horizon)
