"""Confidence intervals against known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paperstack.stats import bootstrap_ci, mean_ci, wilson_ci


def test_mean_ci_matches_student_t() -> None:
    mean, (lo, hi) = mean_ci([1.0, 2.0, 3.0])
    # t_{0.975, 2} = 4.302653, s = 1, n = 3
    half = 4.302653 / math.sqrt(3)
    assert mean == 2.0
    assert lo == pytest.approx(2.0 - half, rel=1e-6)
    assert hi == pytest.approx(2.0 + half, rel=1e-6)


def test_mean_ci_large_sample_uses_scipy_or_expansion() -> None:
    x = np.random.default_rng(0).normal(size=400)
    mean, (lo, hi) = mean_ci(x)
    half = 1.9659 * x.std(ddof=1) / math.sqrt(400)  # t_{0.975, 399}
    assert hi - mean == pytest.approx(half, rel=1e-3)
    assert mean - lo == pytest.approx(half, rel=1e-3)


def test_single_value_has_zero_width() -> None:
    assert mean_ci([0.5]) == (0.5, (0.5, 0.5))
    with pytest.raises(ValueError, match="at least one"):
        mean_ci([])


def test_wilson_known_values() -> None:
    lo, hi = wilson_ci(90, 100)
    assert lo == pytest.approx(0.8256, abs=1e-4)
    assert hi == pytest.approx(0.9448, abs=1e-4)
    assert wilson_ci(0, 10)[0] == 0.0
    assert wilson_ci(10, 10)[1] == 1.0
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wilson_ci(11, 10)


def test_bootstrap_is_seeded_and_covers_the_mean() -> None:
    x = np.arange(20.0)
    a = bootstrap_ci(x, seed=1)
    assert a == bootstrap_ci(x, seed=1)
    point, (lo, hi) = a
    assert lo < point < hi
    med, (mlo, mhi) = bootstrap_ci(x, np.median, resamples=300)
    assert mlo <= med <= mhi
