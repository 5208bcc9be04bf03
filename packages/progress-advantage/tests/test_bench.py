"""The bench: a median speed row with its interval, the output check, and bad input."""

import pytest
from progress_advantage.cli import main

from paperstack.records import load_results

PA = "progress-advantage (policy + reference)"
CONF = "confidence (policy only)"
ARGV = ["--shape", "micro", "--trajectories", "8", "--repeats", "6", "--no-progress"]


def test_bench_writes_a_median_ratio_and_a_correctness_row(tmp_path):
    assert main(["bench", "--out", str(tmp_path), *ARGV]) == 0
    results = load_results(tmp_path / "bench.json")
    ratio = results.row(PA, "time_ratio")
    assert ratio.value > 1.0
    assert ratio.n == 6
    assert ratio.ci95 is not None
    assert ratio.ci95[0] <= ratio.value <= ratio.ci95[1]
    speed = results.row(PA, "speedup_vs_" + CONF)
    assert speed.ci95 is not None
    assert speed.value < 1.0
    assert results.row(PA, "matches_" + CONF).value == 1.0
    claims = {c.id: c for c in results.claims}
    assert claims["pa_policy_pass_matches_confidence"].verdict == "held"
    assert "pa_cost_about_two_passes" in claims
    assert (tmp_path / "bench.md").is_file()


def test_a_wrong_policy_pass_fails_the_correctness_claim(tmp_path, monkeypatch):
    from progress_advantage.scoring import LogRatioScorer

    score = LogRatioScorer.score

    def perturbed(self, trajectories, *, with_reference=True):
        out = score(self, trajectories, with_reference=with_reference)
        if with_reference:  # a wrong method: its policy pass drifts from the baseline's
            for ts in out:
                ts.policy_logp[:] += 1e-4
        return out

    monkeypatch.setattr(LogRatioScorer, "score", perturbed)
    main(["bench", "--out", str(tmp_path), *ARGV])
    results = load_results(tmp_path / "bench.json")
    assert results.row(PA, "matches_" + CONF).value == 0.0
    claim = next(c for c in results.claims if c.id == "pa_policy_pass_matches_confidence")
    assert claim.verdict == "not_held"


def test_output_difference_refuses_a_missing_reference():
    import numpy as np
    from progress_advantage.bench import output_difference
    from progress_advantage.scoring import TokenScores

    ok = TokenScores(np.zeros(2, int), np.zeros(2), np.zeros(2), 1)
    nan = TokenScores(np.zeros(2, int), np.zeros(2), np.full(2, np.nan), 1)
    assert output_difference([ok], [nan]) == 0.0
    assert output_difference([nan], [ok]) == float("inf")


def test_bench_unknown_shape_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--out", str(tmp_path / "b"), "--shape", "huge"])
    assert exc.value.code == 2
    assert "--shape huge" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()  # the contract removed the empty folder it made
