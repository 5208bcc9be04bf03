import pytest
from pall_lns.metrics import primal_gap, primal_integral


def test_primal_gap_definition():
    assert primal_gap(None, 10.0) == 1.0
    assert primal_gap(10.0, 10.0) == 0.0
    assert primal_gap(-5.0, 5.0) == 1.0
    assert primal_gap(12.0, 10.0) == pytest.approx(2 / 12)
    assert primal_gap(-90.0, -100.0) == pytest.approx(0.1)


def test_primal_integral_is_area_under_step_gap():
    # gap 1 until t=2, 0.5 until t=6, 0 after: (2 * 1 + 4 * 0.5) / 10
    timeline = [(2.0, 20.0), (6.0, 10.0)]
    assert primal_integral(timeline, 10.0, 10.0) == pytest.approx(0.4)
    assert primal_integral([], 10.0, 10.0) == 1.0
    assert primal_integral([(0.0, 10.0)], 10.0, 10.0) == 0.0
    assert primal_integral([(12.0, 10.0)], 10.0, 10.0) == 1.0  # after the horizon


def test_a_run_that_overran_its_budget_counts_only_what_it_found_within_it():
    from pall_lns.experiment import RunRecord, final_within

    late = RunRecord("i", "f", "highs", 10.0, [(1.0, 50.0), (40.0, 10.0)], 83.0)
    assert final_within(late, 30.0) == 50.0
    kept = RunRecord("i", "f", "scip", 10.0, [(1.0, 50.0), (29.0, 10.0)], 30.2)
    assert final_within(kept, 30.0) == 10.0
    assert final_within(RunRecord("i", "f", "highs", 3.0, [(90.0, 3.0)], 95.0), 30.0) is None
