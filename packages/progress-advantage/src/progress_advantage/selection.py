"""Test-time selection: best-of-N by a score, and majority vote over comparable answers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from progress_advantage.errors import ProgressAdvantageError

__all__ = ["best_of_n", "group_indices", "majority_vote"]


def best_of_n(scores: ArrayLike) -> int:
    """Index of the highest-scoring candidate (the first one on ties).

    NaN scores (an unscorable candidate) never win unless all are NaN.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    if s.size == 0:
        raise ProgressAdvantageError("best_of_n: no candidates")
    s = np.where(np.isnan(s), -np.inf, s)
    return int(np.argmax(s))


def majority_vote(answers: Sequence[str | None]) -> int:
    """Index of a candidate whose answer is the most frequent (``None`` answers never vote).

    Ties between answers go to the one seen first; if no candidate has an answer, index 0.
    """
    if not answers:
        raise ProgressAdvantageError("majority_vote: no candidates")
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return 0
    best = max(counts.values())
    for i, a in enumerate(answers):
        if a is not None and counts[a] == best:
            return i
    return 0  # pragma: no cover - unreachable


def group_indices(groups: Sequence[str]) -> list[list[int]]:
    """Indices of each group's members, groups in order of first appearance."""
    out: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        out.setdefault(g, []).append(i)
    return list(out.values())
