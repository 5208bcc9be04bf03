"""The bench: the cost profile of the MOSA head, and bench --quick's ratios (slow)."""

import pytest
from mosa_rl.cli import main

from paperstack.records import load_results


def test_profile_cost_runs_for_the_baseline_and_a_k():
    from mosa_rl.bench import profile_cost

    assert all(t > 0 for t in profile_cost(0, 32, 8, 64, repeats=2, device="cpu", seed=0))
    assert len(profile_cost(4, 32, 8, 64, repeats=2, device="cpu", seed=0)) == 2


@pytest.mark.slow
def test_bench_quick_writes_ratios(tmp_path):
    assert main(["bench", "--quick", "--steps", "2", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.row("mosa", "step_time_ratio").value > 0
    assert results.row("profile-k16", "head_time_ratio").items is not None
