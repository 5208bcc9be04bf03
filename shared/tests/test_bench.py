"""paperstack.bench: interleaved timing, medians with order-statistic intervals, output check."""

from __future__ import annotations

import math
import os
import statistics

import numpy as np
import pytest

from paperstack.bench import compare_speed, max_abs_diff, median_ci, set_threads
from paperstack.errors import PaperstackError


def test_median_ci_known_answers() -> None:
    # n = 10: l = 2 (P(Bin(10, .5) <= 1) = 0.0107 <= 0.025 < P(<= 2) = 0.0547) -> [x(2), x(9)]
    med, (lo, hi) = median_ci(range(1, 11))
    assert med == 5.5
    assert (lo, hi) == (2.0, 9.0)
    # below six values the interval is the whole range
    assert median_ci([3.0, 1.0, 2.0]) == (2.0, (1.0, 3.0))
    # n = 20: l = 6 -> [x(6), x(15)]
    assert median_ci(range(1, 21))[1] == (6.0, 15.0)


def test_median_ci_one_outlier_barely_moves_it() -> None:
    base = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, 1.01, 0.99, 1.03]
    spiked = [*base[:-1], 1000.0]
    m0, ci0 = median_ci(base)
    m1, ci1 = median_ci(spiked)
    assert statistics.mean(spiked) > 100  # the mean is ruled by the outlier
    assert abs(m1 - m0) < 0.05
    assert ci1[1] < 1.2
    assert ci0[1] < 1.2


def test_median_ci_refuses_empty_and_non_finite() -> None:
    with pytest.raises(PaperstackError, match="no values"):
        median_ci([])
    with pytest.raises(PaperstackError, match="finite"):
        median_ci([1.0, math.nan])


def test_max_abs_diff_structures() -> None:
    assert max_abs_diff([1.0, (2.0, 3.0)], [1.0, (2.0, 3.5)]) == 0.5
    assert max_abs_diff({"a": np.ones(3)}, {"a": np.ones(3)}) == 0.0
    assert max_abs_diff(np.array([np.nan]), np.array([np.nan])) == 0.0
    assert max_abs_diff(np.array([np.nan]), np.array([1.0])) == math.inf
    with pytest.raises(PaperstackError, match="shape"):
        max_abs_diff(np.ones(2), np.ones(3))


def _busy(n: int) -> float:
    return float(sum(i * i for i in range(n)))


def test_compare_speed_interleaves_and_checks() -> None:
    calls: list[str] = []

    def slow() -> float:
        calls.append("slow")
        return _busy(20000)

    def fast() -> float:
        calls.append("fast")
        return _busy(20000)

    def wrong() -> float:
        calls.append("wrong")
        return _busy(2000)

    cmp = compare_speed(
        {"slow": slow, "fast": fast, "wrong": wrong}, baseline="slow", repeats=12, warmup=1
    )
    assert cmp.repeats == 12
    assert len(cmp.orders) == 12
    # interleaved: every repeat calls each system once
    timed = calls[3:]
    assert all(sorted(timed[i : i + 3]) == ["fast", "slow", "wrong"] for i in range(0, 36, 3))
    assert len({tuple(o) for o in cmp.orders}) > 1  # shuffled
    assert cmp.matches("fast")
    assert not cmp.matches("wrong")
    rows = cmp.rows(split="s")
    keys = {(r.system, r.metric) for r in rows}
    assert ("wrong", "speedup_vs_slow") in keys
    assert ("slow", "time_ms") in keys
    assert cmp.correctness_claim("fast", rows, split="s").verdict == "held"
    assert cmp.correctness_claim("wrong", rows, split="s").verdict == "not_held"
    # the cheap wrong system is much faster than the baseline: its median ratio clears 3x
    claim = cmp.speedup_claim("w3", "wrong is 3x", "wrong", at_least=3.0, rows=rows, split="s")
    assert claim.verdict == "held"
    # the same-cost one cannot clear 50x (a wide bar: on a loaded machine single ratios are noisy)
    same = cmp.speedup_claim("f50", "fast is 50x", "fast", at_least=50.0, rows=rows, split="s")
    assert same.verdict == "not_held"


def test_compare_speed_tolerance_and_errors() -> None:
    cmp = compare_speed(
        {"a": lambda: np.zeros(4), "b": lambda: np.full(4, 1e-4)},
        baseline="a",
        repeats=6,
        check=1e-3,
    )
    assert cmp.matches("b")
    assert cmp.diff["b"] == pytest.approx(1e-4)
    with pytest.raises(PaperstackError, match="baseline"):
        compare_speed({"a": lambda: 0, "b": lambda: 0}, baseline="c")
    with pytest.raises(PaperstackError, match="tolerance"):
        compare_speed({"a": lambda: 0, "b": lambda: 0}, baseline="a", check=-1.0)


def test_compare_speed_budget_stops_early() -> None:
    cmp = compare_speed(
        {"a": lambda: _busy(5000), "b": lambda: _busy(5000)},
        baseline="a",
        repeats=10_000,
        budget_s=0.01,
        min_repeats=6,
    )
    assert 6 <= cmp.repeats < 10_000


def test_set_threads_sets_torch_and_env() -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1
        assert torch.get_num_threads() == 1
        assert os.environ["OMP_NUM_THREADS"] == "1"
    finally:
        torch.set_num_threads(before)


def test_non_numeric_outputs_are_compared_for_equality() -> None:
    from paperstack.bench import max_abs_diff

    ref = {"name": "survival-00", "alive": True, "ranks": ["a", "b"], "score": 1.5, "x": None}
    assert max_abs_diff(dict(ref), ref) == 0.0
    assert max_abs_diff({**ref, "name": "survival-01"}, ref) == math.inf
    assert max_abs_diff({**ref, "ranks": ["b", "a"]}, ref) == math.inf
    assert max_abs_diff({**ref, "alive": False}, ref) == math.inf
    import numpy as np

    assert max_abs_diff(np.array(["a", "b"]), np.array(["a", "b"])) == 0.0
    assert max_abs_diff(np.array(["a", "c"]), np.array(["a", "b"])) == math.inf


def test_correctness_claim_can_say_what_a_callable_check_compares() -> None:
    cmp = compare_speed(
        {"a": lambda: [1, 2], "b": lambda: [1, 2]}, baseline="a", repeats=3, warmup=1,
        check=lambda out, ref: float(len(out) != len(ref)),
    )  # fmt: skip
    rows = cmp.rows()
    claim = cmp.correctness_claim("b", rows, statement="b returns as many items as a")
    assert claim.statement == "b returns as many items as a"
    assert claim.verdict == "held"


def test_pair_rows_pair_each_system_with_its_own_control() -> None:
    from paperstack.bench import SpeedComparison

    cmp = SpeedComparison(
        baseline="ref32",
        times={
            "ref32": [1.0, 1.0, 1.0],
            "ref16": [0.5, 0.5, 0.5],
            "new32": [2.0, 3.0, 2.5],
            "new16": [0.5, 1.0, 0.75],
        },
        diff={},
        tolerance=None,
        threads=1,
        warmup=0,
        number=1,
        seed=0,
        orders=[],
    )
    rows = cmp.pair_rows({"new32": "ref32", "new16": "ref16", "absent": "ref32"}, split="s")
    got = {(r.system, r.metric): r for r in rows}
    assert set(got) == {("new32", "time_ratio_vs_ref32"), ("new16", "time_ratio_vs_ref16")}
    assert got["new32", "time_ratio_vs_ref32"].value == 2.5  # median of 2, 3, 2.5: slower
    assert got["new16", "time_ratio_vs_ref16"].value == 1.5  # median of 1, 2, 1.5: its own control
    assert all(r.n == 3 and r.split == "s" and r.unit == "x" for r in rows)
    lo, hi = got["new32", "time_ratio_vs_ref32"].ci95
    assert lo <= 2.5 <= hi
