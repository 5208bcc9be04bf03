import numpy as np
import pytest
from progress_advantage.aggregate import aggregate_steps, aggregate_trajectory
from progress_advantage.attribution import attribute_failure, attribution_accuracy, chance_accuracy
from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.metrics import auroc, rankdata, spearman
from progress_advantage.selection import best_of_n, group_indices, majority_vote

VALUES = np.array([1.0, -2.0, 3.0, 4.0, -1.0])
STEPS = np.array([0, 0, 1, 1, 1])


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("sum", [-1.0, 6.0]),
        ("mean", [-0.5, 2.0]),
        ("last", [-2.0, -1.0]),
        ("min", [-2.0, -1.0]),
        ("max", [1.0, 4.0]),
    ],
)
def test_step_aggregations(how, expected):
    assert aggregate_steps(VALUES, STEPS, 2, how).tolist() == expected


def test_tokenless_step_scores_zero():
    assert aggregate_steps([1.0], [1], 3, "min").tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    ("how", "expected"),
    [("sum", 6.0), ("mean", 0.6), ("min", -3.0), ("last", 0.0), ("bottom10", -3.0)],
)
def test_trajectory_aggregations(how, expected):
    s = [1.0, 2.0, -3.0, 4.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert aggregate_trajectory(s, how) == pytest.approx(expected)


def test_bottom10_of_many_steps_averages_the_lowest_tenth():
    s = np.arange(20.0)
    assert aggregate_trajectory(s, "bottom10") == pytest.approx(0.5)


def test_unknown_aggregation_is_named():
    with pytest.raises(ProgressAdvantageError, match="median"):
        aggregate_steps(VALUES, STEPS, 2, "median")
    with pytest.raises(ProgressAdvantageError, match="median"):
        aggregate_trajectory(VALUES, "median")


def test_rank_statistics_match_their_definitions():
    assert rankdata([3, 1, 3, 2]).tolist() == [3.5, 1.0, 3.5, 2.0]
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert auroc([0.9, 0.8, 0.1, 0.2], [1, 1, 0, 0]) == 1.0
    assert auroc([0.5, 0.5], [1, 0]) == 0.5
    assert np.isnan(auroc([0.3, 0.1, 0.2], [1, 1, 1]))  # undefined with one class
    rng = np.random.default_rng(0)
    s, y = rng.normal(size=200), rng.random(200) < 0.5
    pairs = (s[y][:, None] > s[~y][None, :]).mean()
    assert auroc(s, y) == pytest.approx(pairs)


def test_selection_and_attribution():
    assert best_of_n([0.1, np.nan, 0.7, 0.7]) == 2
    assert majority_vote(["3", None, "5", "5", "3", "5"]) == 2
    assert majority_vote([None, None]) == 0
    assert group_indices(["a", "b", "a"]) == [[0, 2], [1]]
    assert attribute_failure([0.5, -1.0, -1.0, 2.0], "argmin") == 1
    assert attribution_accuracy([[0.0, -1.0], [1.0, 0.0]], [1, 0], "argmin") == (1, 2)
    assert chance_accuracy([2, 4]) == pytest.approx(0.375)


def test_attribution_rules_of_the_authors_code():
    s = [0.4, -0.1, -0.5, 0.3, -0.2]  # cumsum 0.4, 0.3, -0.2, 0.1, -0.1
    assert attribute_failure(s) == 2  # default: argmin of the cumulative sum
    assert attribute_failure(s, "min-cumulative") == 2
    assert attribute_failure(s, "argmin") == 2
    assert attribute_failure(s, "sharpest-drop") == 2
    assert attribute_failure(s, "sharpest-abs-drop") == 1  # falls -0.5, -0.4, +0.8, -0.5
    assert attribute_failure([0.2, 0.1, 0.3], "min-cumulative") == 0
    assert attribute_failure([0.2, 0.1, 0.3], "sharpest-drop") == 0  # nothing negative: first
    assert attribute_failure([0.2, 0.1, 0.3], "argmin") == 1
    assert attribute_failure([1.0, 0.0, 0.9], "sharpest-abs-drop") == 1
    assert attribute_failure([0.1, 0.2, 0.3], "sharpest-abs-drop") == 0  # no fall: first
    assert attribute_failure([-1.0, 2.0, -0.5], "min-cumulative") == 0  # ties: earliest


def test_attribution_refuses_nan_and_unknown_rules():
    with pytest.raises(ProgressAdvantageError, match="finite"):
        attribute_failure([0.1, float("nan")])
    with pytest.raises(ProgressAdvantageError, match="rule"):
        attribute_failure([0.1], "median")


def test_positional_priors():
    from progress_advantage.attribution import positional_hit

    assert positional_hit("first step", 4, 0) == 1.0
    assert positional_hit("last step", 4, 3) == 1.0
    assert positional_hit("last step", 4, 0) == 0.0
    assert positional_hit("uniform step", 4, 2) == 0.25


def test_trajectory_sum_and_mean_are_exact_where_a_float_sum_overflows():
    huge = [1e308, 1e308, -1e308, -1e308, 2.0]
    assert float(np.sum(huge)) == np.inf  # what best-of-n ranked by before (issue #46)
    assert aggregate_trajectory(huge, "sum") == 2.0
    assert aggregate_trajectory([1e308, 1e308], "mean") == 1e308
    assert aggregate_trajectory([1e300, 1.0, -1e300], "sum") == 1.0  # cancellation kept
    with pytest.raises(ProgressAdvantageError, match="beyond the float range"):
        aggregate_trajectory([1e308, 1e308], "sum")
    assert np.isnan(aggregate_trajectory([0.1, np.nan], "sum"))  # unscorable stays NaN


def test_attribution_blames_the_right_step_when_scores_are_huge():
    """Issue #46: a running sum of 1e308 scores was Infinity from step 1 on, and min-cumulative
    blamed step 0; scaled by 2**-64 the order is exact."""
    s = [1e308, 1e308, -1e308, -1e308, -1e308, 1e308]
    with np.errstate(over="ignore"):
        assert np.isinf(np.cumsum(s)).any()  # what the rule ranked before
    assert attribute_failure(s, "min-cumulative") == 4  # the running sum is lowest after step 4
    assert attribute_failure([1e308, -1e308, 0.0], "sharpest-abs-drop") == 1
    assert attribute_failure([0.1, -0.3, 0.2], "min-cumulative") == 1  # ordinary input unchanged
