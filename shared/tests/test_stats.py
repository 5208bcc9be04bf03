"""Confidence intervals against known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paperstack.stats import (
    bootstrap_ci,
    cluster_bootstrap_ci,
    mean_ci,
    newcombe_diff_ci,
    paired_diff_ci,
    t_quantile,
    wilson_ci,
)


def test_mean_ci_matches_student_t() -> None:
    mean, (lo, hi) = mean_ci([1.0, 2.0, 3.0])
    # t_{0.975, 2} = 4.302653, s = 1, n = 3
    half = 4.302653 / math.sqrt(3)
    assert mean == 2.0
    assert lo == pytest.approx(2.0 - half, rel=1e-6)
    assert hi == pytest.approx(2.0 + half, rel=1e-6)


def test_mean_ci_large_sample() -> None:
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


def test_t_quantiles_are_the_table_values() -> None:
    assert t_quantile(0.975, 2) == pytest.approx(4.303, abs=5e-4)
    assert t_quantile(0.975, 3) == pytest.approx(3.182, abs=5e-4)
    assert t_quantile(0.975, 4) == pytest.approx(2.776, abs=5e-4)
    assert t_quantile(0.975, 1) == pytest.approx(12.706, abs=5e-4)
    assert t_quantile(0.95, 10) == pytest.approx(1.812, abs=5e-4)


def test_newcombe_interval_matches_the_published_example() -> None:
    # Newcombe (1998), Statistics in Medicine 17:873, table II example (56/70 - 48/80):
    # method 10 (hybrid score) gives 0.0524 to 0.3339.
    lo, hi = newcombe_diff_ci(56, 70, 48, 80)
    assert lo == pytest.approx(0.0524, abs=1e-4)
    assert hi == pytest.approx(0.3339, abs=1e-4)


def test_paired_interval_over_seeds_is_student_t_of_the_differences() -> None:
    d, (lo, hi), n = paired_diff_ci({"0": 3.0, "1": 5.0, "2": 4.0}, {"0": 1.0, "1": 2.0, "2": 2.0})
    # differences 2, 3, 2: mean 7/3, s = 0.57735
    half = 4.302653 * 0.5773503 / math.sqrt(3)
    assert (d, n) == (pytest.approx(7 / 3), 3)
    assert (lo, hi) == (pytest.approx(7 / 3 - half), pytest.approx(7 / 3 + half))
    with pytest.raises(ValueError, match="share no keys"):
        paired_diff_ci({"0": 1.0}, {"1": 1.0})


def test_percentile_bootstrap_is_refused_for_few_seeds_because_it_undercovers() -> None:
    with pytest.raises(ValueError, match="at least 10"):
        bootstrap_ci([0.1, 0.2, 0.3])
    # Why: with 3 normal seeds the percentile interval covers the true mean ~75% of the time,
    # where Student t covers 95%.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 3))
    idx = rng.integers(0, 3, size=(2000, 500, 3))
    means = np.take_along_axis(x[:, None, :].repeat(500, axis=1), idx, axis=2).mean(axis=2)
    lo, hi = np.quantile(means, [0.025, 0.975], axis=1)
    boot = float(np.mean((lo <= 0) & (hi >= 0)))
    half = 4.302653 * x.std(axis=1, ddof=1) / math.sqrt(3)
    t_cover = float(np.mean(np.abs(x.mean(axis=1)) <= half))
    assert 0.68 < boot < 0.82
    assert 0.93 < t_cover < 0.97


def test_cluster_bootstrap_is_wider_than_treating_repeats_as_independent() -> None:
    rng = np.random.default_rng(1)
    difficulty = rng.uniform(size=40)  # 40 questions, 8 samples each, correlated within
    values = (rng.uniform(size=(40, 8)) < difficulty[:, None]).astype(float)
    clusters = np.repeat(np.arange(40), 8)
    mean, (lo, hi) = cluster_bootstrap_ci(values.ravel(), clusters)
    _, (nlo, nhi) = bootstrap_ci(values.ravel())
    assert mean == pytest.approx(values.mean())
    assert hi - lo > 1.5 * (nhi - nlo)
    with pytest.raises(ValueError, match="at least 10 clusters"):
        cluster_bootstrap_ci([1.0, 0.0], ["a", "b"])


def test_bootstrap_is_seeded_and_covers_the_mean() -> None:
    x = np.arange(20.0)
    a = bootstrap_ci(x, seed=1)
    assert a == bootstrap_ci(x, seed=1)
    point, (lo, hi) = a
    assert lo < point < hi
    med, (mlo, mhi) = bootstrap_ci(x, np.median, resamples=300)
    assert mlo <= med <= mhi
