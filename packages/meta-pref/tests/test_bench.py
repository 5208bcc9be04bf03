"""bench --quick: the FOMAML/joint step-time ratio over two seeds."""

import pytest
from meta_pref.cli import main

from paperstack.records import load_results


@pytest.mark.slow
def test_bench_quick_writes_step_time_ratios(tmp_path):
    assert main(["bench", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "bench.json")
    ratio = results.row("fomaml/joint", "step_time_ratio")
    assert ratio.value > 1
    assert len(ratio.seeds) == 2
