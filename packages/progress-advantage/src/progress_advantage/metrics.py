"""Rank statistics the evaluation needs, vectorised and dependency-free (no scipy/sklearn)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from progress_advantage.errors import ProgressAdvantageError

__all__ = ["auroc", "rankdata", "spearman"]


def rankdata(x: ArrayLike) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (as ``scipy.stats.rankdata``)."""
    a = np.asarray(x, dtype=np.float64).ravel()
    order = np.argsort(a, kind="mergesort")
    sorted_a = a[order]
    new = np.r_[True, sorted_a[1:] != sorted_a[:-1]]
    group = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], a.size]
    avg = (starts + ends + 1) / 2.0  # mean of ranks start+1..end
    ranks = np.empty(a.size)
    ranks[order] = avg[group]
    return ranks


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rank correlation (Pearson correlation of average ranks)."""
    rx, ry = rankdata(x), rankdata(y)
    if rx.size != ry.size or rx.size < 2:
        raise ProgressAdvantageError("spearman: need two equal-length arrays of >= 2 values")
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = np.sqrt((rx**2).sum() * (ry**2).sum())
    return float((rx * ry).sum() / denom) if denom > 0 else 0.0


def auroc(scores: ArrayLike, labels: ArrayLike) -> float:
    """Area under the ROC curve of ``scores`` predicting ``labels`` (Mann-Whitney U / n+ n-).

    Ties count one half. With one class only the AUROC is undefined and NaN is returned (not
    0.5, which would read as "measured: no discrimination"); callers say so.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels).astype(bool).ravel()
    if s.size != y.size:
        raise ProgressAdvantageError(f"auroc: {s.size} scores but {y.size} labels")
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    ranks = rankdata(s)
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))
