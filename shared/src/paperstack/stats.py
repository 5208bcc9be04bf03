"""Confidence intervals for the numbers every paperstack report prints, and for the differences
every claim is judged on.

One number's interval:

- across seeds, :func:`mean_ci`: Student t, ``mean ± t_{0.975, n-1} · s / sqrt(n)``, with exact
  t quantiles from scipy (a base dependency of the core for exactly this: the normal or an
  expansion is far off at the 3-5 seeds reports use; t.975 at 2, 3, 4 dof is 4.303, 3.182,
  2.776);
- an accuracy over ``n`` independent items, :func:`wilson_ci`: stays inside [0, 1] and behaves at
  0% and 100%, unlike the normal approximation;
- an accuracy over items asked several times (``k`` samples of each question), where samples of
  one question are not independent, :func:`cluster_bootstrap_ci`: resample questions, not
  samples;
- any statistic of many values, :func:`bootstrap_ci`: percentile bootstrap with a fixed seed. It
  refuses fewer than :data:`MIN_BOOTSTRAP_N` values: with 3 seeds its nominal 95% interval covers
  the truth about 75% of the time (measured in the tests), so seeds get :func:`mean_ci`.

One difference's interval (what :meth:`paperstack.records.Claim.compare` judges a claim by):

- paired values (the same seeds or items on both sides), :func:`paired_diff_ci`: Student t over
  the per-key differences for seeds, a paired bootstrap over items (t below ten items);
- two proportions, :func:`newcombe_diff_ci`: Newcombe's hybrid score interval, built from the
  two Wilson intervals (method 10 of Newcombe 1998);
- two independent estimates with intervals of their own, :func:`mover_diff_ci`: the method of
  variance estimates recovery (Zou and Donner 2008), which is the normal approximation from the
  two half-widths and reduces to Newcombe's interval when both intervals are Wilson's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "MIN_BOOTSTRAP_N",
    "bootstrap_ci",
    "cluster_bootstrap_ci",
    "mean_ci",
    "mover_diff_ci",
    "newcombe_diff_ci",
    "normal_quantile",
    "paired_diff_ci",
    "t_quantile",
    "wilson_ci",
]

#: The percentile bootstrap is refused below this many values (use :func:`mean_ci`).
MIN_BOOTSTRAP_N = 10
#: Resamples and seed of every bootstrap a verdict depends on: fixed, so that ``paperstack
#: check`` recomputes the same interval from the same rows.
VERDICT_RESAMPLES = 10_000
VERDICT_SEED = 0


def t_quantile(p: float, df: float) -> float:
    """Student-t quantile ``t_{p, df}`` (exact, scipy)."""
    from scipy.stats import t

    if not 0 < p < 1:
        raise ValueError("quantile needs 0 < p < 1")
    if not df > 0:
        raise ValueError(f"t quantile needs df > 0, got {df}")
    return float(t.ppf(p, df))


def normal_quantile(p: float) -> float:
    """Standard-normal quantile ``z_p`` (exact, scipy)."""
    from scipy.stats import norm

    if not 0 < p < 1:
        raise ValueError("quantile needs 0 < p < 1")
    return float(norm.ppf(p))


def _finite(values: ArrayLike, what: str) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError(f"{what} needs at least one value")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} got a non-finite value")
    return x


def mean_ci(values: ArrayLike, level: float = 0.95) -> tuple[float, tuple[float, float]]:
    """Mean and Student-t interval ``mean ± t_{(1+level)/2, n-1} · s / sqrt(n)``.

    One value gives a zero-width interval (there is no spread to estimate); a claim judged on it
    is inconclusive, and the report shows ``n`` beside it so a reader knows.
    """
    x = _finite(values, "mean_ci")
    mean = float(x.mean())
    if x.size == 1:
        return mean, (mean, mean)
    half = t_quantile(0.5 + level / 2, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, (mean - half, mean + half)


def wilson_ci(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes out of ``n``.

    ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`` with ``p = k/n``.
    """
    if n <= 0:
        raise ValueError("wilson_ci needs n > 0")
    if not 0 <= k <= n:
        raise ValueError(f"wilson_ci needs 0 <= k <= n, got k={k}, n={n}")
    z = normal_quantile(0.5 + level / 2)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def bootstrap_ci(
    values: ArrayLike,
    statistic: Callable[[np.ndarray], float] | None = None,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, tuple[float, float]]:
    """Statistic of ``values`` (default: the mean) and its percentile-bootstrap interval.

    Needs at least :data:`MIN_BOOTSTRAP_N` values: below that the percentile interval is far too
    narrow (75% coverage at n = 3); average seeds with :func:`mean_ci`. The resamples are drawn
    as one ``(resamples, n)`` index matrix and the mean is computed in one vectorised call.
    """
    x = _finite(values, "bootstrap_ci")
    if x.size < MIN_BOOTSTRAP_N:
        raise ValueError(
            f"bootstrap_ci needs at least {MIN_BOOTSTRAP_N} values, got {x.size}: its coverage "
            "is far below the nominal level on so few; use mean_ci (Student t) for seeds"
        )
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    samples = x[idx]
    if statistic is None:
        point = float(x.mean())
        stats = samples.mean(axis=1)
    else:
        point = float(statistic(x))
        stats = np.array([statistic(s) for s in samples])
    lo, hi = np.quantile(stats, [(1 - level) / 2, 1 - (1 - level) / 2])
    return point, (float(lo), float(hi))


def cluster_bootstrap_ci(
    values: ArrayLike,
    clusters: Sequence[object] | np.ndarray,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, tuple[float, float]]:
    """Mean of ``values`` with a bootstrap interval that resamples whole clusters.

    For an accuracy over repeated items (``k`` samples of each of ``m`` questions; ``clusters[i]``
    names the question of ``values[i]``) the samples of one question are correlated, so an
    interval that treats all ``k·m`` as independent is too narrow. Each resample draws ``m``
    questions with replacement and takes the mean over all their samples (so unequal cluster
    sizes weigh as they do in the point estimate). Needs :data:`MIN_BOOTSTRAP_N` clusters.
    """
    x = _finite(values, "cluster_bootstrap_ci")
    labels = np.asarray(clusters, dtype=object).ravel()
    if labels.size != x.size:
        raise ValueError(
            f"cluster_bootstrap_ci got {x.size} values and {labels.size} cluster labels"
        )
    _, inverse = np.unique(labels.astype(str), return_inverse=True)
    m = int(inverse.max()) + 1
    if m < MIN_BOOTSTRAP_N:
        raise ValueError(f"cluster_bootstrap_ci needs at least {MIN_BOOTSTRAP_N} clusters, got {m}")
    sums = np.bincount(inverse, weights=x, minlength=m)
    counts = np.bincount(inverse, minlength=m).astype(np.float64)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, m, size=(resamples, m))
    stats = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    lo, hi = np.quantile(stats, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(x.mean()), (float(lo), float(hi))


def paired_diff_ci(
    lhs: Mapping[str, float],
    rhs: Mapping[str, float],
    *,
    unit: str = "seed",
    level: float = 0.95,
) -> tuple[float, tuple[float, float], int]:
    """Mean difference ``lhs[k] - rhs[k]`` over the shared keys, its interval, and their count.

    Seeds (``unit="seed"``): Student t over the differences. Items (``unit="item"``): a paired
    percentile bootstrap of the mean difference over items (fixed seed, so the interval is
    reproducible), Student t below :data:`MIN_BOOTSTRAP_N` items. One shared key gives a
    zero-width interval.
    """
    keys = sorted(set(lhs) & set(rhs))
    if not keys:
        raise ValueError("paired_diff_ci: the two sides share no keys")
    d = np.array([float(lhs[k]) - float(rhs[k]) for k in keys], dtype=np.float64)
    if unit == "item" and d.size >= MIN_BOOTSTRAP_N:
        point, ci = bootstrap_ci(d, level=level, resamples=VERDICT_RESAMPLES, seed=VERDICT_SEED)
        return point, ci, int(d.size)
    if unit not in ("seed", "item"):
        raise ValueError(f"paired_diff_ci: unit must be 'seed' or 'item', got {unit!r}")
    point, ci = mean_ci(d, level)
    return point, ci, int(d.size)


def mover_diff_ci(
    lhs: float,
    lhs_ci: tuple[float, float],
    rhs: float,
    rhs_ci: tuple[float, float],
) -> tuple[float, float]:
    """Interval of ``lhs - rhs`` for two independent estimates from their own 95% intervals.

    ``L = d - sqrt((lhs - l1)² + (u2 - rhs)²)``, ``U = d + sqrt((u1 - lhs)² + (rhs - l2)²)``
    (Zou and Donner's MOVER). For symmetric intervals this is the normal approximation
    ``d ± sqrt(h1² + h2²)``; with Wilson intervals it is Newcombe's interval.
    """
    (l1, u1), (l2, u2) = lhs_ci, rhs_ci
    d = lhs - rhs
    lo = d - math.sqrt(max(lhs - l1, 0.0) ** 2 + max(u2 - rhs, 0.0) ** 2)
    hi = d + math.sqrt(max(u1 - lhs, 0.0) ** 2 + max(rhs - l2, 0.0) ** 2)
    return lo, hi


def newcombe_diff_ci(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """Newcombe's hybrid score interval for ``k1/n1 - k2/n2`` (two independent proportions)."""
    return mover_diff_ci(k1 / n1, wilson_ci(k1, n1), k2 / n2, wilson_ci(k2, n2))
