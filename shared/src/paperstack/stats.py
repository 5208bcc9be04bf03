"""Confidence intervals for the numbers every paperstack report prints.

Reports give a 95% interval with every mean: across seeds (:func:`mean_ci`, Student t), for an
accuracy over ``n`` independent items (:func:`wilson_ci`, which stays inside [0, 1] and behaves at
0% and 100%, unlike the normal approximation), and for any statistic by resampling
(:func:`bootstrap_ci`, percentile bootstrap with a fixed seed so reports are reproducible).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["bootstrap_ci", "mean_ci", "wilson_ci"]

_Z95 = 1.959963984540054


def mean_ci(values: ArrayLike, level: float = 0.95) -> tuple[float, tuple[float, float]]:
    """Mean and Student-t interval ``mean ± t_{n-1} · s / sqrt(n)``.

    One value gives a zero-width interval (there is no spread to estimate); the report shows
    ``n`` beside it so a reader knows.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("mean_ci needs at least one value")
    if not np.all(np.isfinite(x)):
        raise ValueError("mean_ci got a non-finite value")
    mean = float(x.mean())
    if x.size == 1:
        return mean, (mean, mean)
    half = _t_quantile(0.5 + level / 2, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, (mean - half, mean + half)


def wilson_ci(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes out of ``n``.

    ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`` with ``p = k/n``.
    """
    if n <= 0:
        raise ValueError("wilson_ci needs n > 0")
    if not 0 <= k <= n:
        raise ValueError(f"wilson_ci needs 0 <= k <= n, got k={k}, n={n}")
    z = _Z95 if level == 0.95 else _normal_quantile(0.5 + level / 2)
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

    The resamples are drawn as one ``(resamples, n)`` index matrix; a statistic that accepts
    ``axis=-1`` (numpy reductions do) is evaluated in one vectorised call.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
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


# Two-sided 95% Student-t quantiles t_{0.975, df} for df = 1..30: reports usually average 3-10
# seeds, where the normal expansion below is inaccurate, and scipy is not a base dependency.
_T975 = (
    12.706205,
    4.302653,
    3.182446,
    2.776445,
    2.570582,
    2.446912,
    2.364624,
    2.306004,
    2.262157,
    2.228139,
    2.200985,
    2.178813,
    2.160369,
    2.144787,
    2.13145,
    2.119905,
    2.109816,
    2.100922,
    2.093024,
    2.085963,
    2.079614,
    2.073873,
    2.068658,
    2.063899,
    2.059539,
    2.055529,
    2.051831,
    2.048407,
    2.04523,
    2.042272,
)


def _t_quantile(p: float, df: int) -> float:
    """Student-t quantile: exact table at 97.5% for df <= 30, else scipy, else Cornish-Fisher."""
    if abs(p - 0.975) < 1e-12 and df <= len(_T975):
        return _T975[df - 1]
    try:
        from scipy.stats import t  # optional and heavy

        return float(t.ppf(p, df))
    except ImportError:  # pragma: no cover - depends on the environment
        z = _normal_quantile(p)
        g1 = (z**3 + z) / 4
        g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
        g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
        return z + g1 / df + g2 / df**2 + g3 / df**3


def _normal_quantile(p: float) -> float:
    """Inverse standard-normal CDF (Acklam's rational approximation, relative error < 1.2e-9)."""
    a = (
        -39.69683028665376,
        220.9460984245205,
        -275.9285104469687,
        138.3577518672690,
        -30.66479806614716,
        2.506628277459239,
    )
    b = (
        -54.47609879822406,
        161.5858368580409,
        -155.6989798598866,
        66.80131188771972,
        -13.28068155288572,
    )
    c = (
        -0.007784894002430293,
        -0.3223964580411365,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    )
    d = (0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416)
    if not 0 < p < 1:
        raise ValueError("quantile needs 0 < p < 1")
    lo = 0.02425
    if p < lo:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    if p > 1 - lo:
        return -_normal_quantile(1 - p)
    q = p - 0.5
    r = q * q
    return (
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
        * q
        / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    )
