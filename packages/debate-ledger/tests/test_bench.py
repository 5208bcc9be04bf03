"""debate-ledger bench on paperstack.bench: a median speed row with an interval, a correctness
row from the same run, and a wrong vectorised output caught by it (tiny sizes)."""

from __future__ import annotations

import numpy as np
import pytest
from debate_ledger import bench as bench_module
from debate_ledger.cli import main

from paperstack.records import load_results

ARGS = ["bench", "--no-progress", "--debates", "300", "--repeats", "6"]


def _run(tmp_path):
    assert main([*ARGS, "--out", str(tmp_path)]) == 0
    return load_results(tmp_path / "bench.json")


def test_bench_reports_median_ratio_and_correctness(tmp_path):
    results = _run(tmp_path)
    speed = results.row("vectorised", "speedup_vs_per-debate-loop")
    assert speed.n == 6
    assert speed.ci95 is not None
    assert speed.ci95[0] <= speed.value <= speed.ci95[1]
    assert results.row("vectorised", "matches_per-debate-loop").value == 1.0
    assert results.row("vectorised", "max_abs_diff_vs_per-debate-loop").value == 0.0
    claims = {c.id: c for c in results.claims}
    assert claims["vectorised_matches_loop"].verdict == "held"
    assert claims["vectorised_faster"].requires == ("vectorised_matches_loop",)


def test_a_wrong_vectorised_output_fails_the_check(tmp_path, monkeypatch):
    real = bench_module.transitions

    def wrong(answers: np.ndarray, gold: np.ndarray):
        out = real(answers, gold)
        out.onset[0] = out.onset[0] + 1  # one debate's onset off by one round
        return out

    monkeypatch.setattr(bench_module, "transitions", wrong)
    results = _run(tmp_path)
    assert results.row("vectorised", "matches_per-debate-loop").value == 0.0
    claims = {c.id: c for c in results.claims}
    assert claims["vectorised_matches_loop"].verdict == "not_held"
    assert claims["vectorised_faster"].verdict == "inconclusive"


def test_bench_needs_six_repeats(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--out", str(tmp_path), "--debates", "300", "--repeats", "5"])
    assert exc.value.code != 0
    assert "at least 6" in capsys.readouterr().err
