"""The bench: the profile head's output check (a wrong profile fails it), and bench --quick's
median ratios with intervals and correctness rows (slow)."""

import pytest
from mosa_rl.cli import main

from paperstack.bench import compare_speed
from paperstack.records import load_results


def test_profile_cost_runs_for_the_baseline_and_a_k():
    from mosa_rl.bench import profile_cost

    assert all(t > 0 for t in profile_cost(0, 32, 8, 64, repeats=2, device="cpu", seed=0))
    assert len(profile_cost(4, 32, 8, 64, repeats=2, device="cpu", seed=0)) == 2


def _heads():
    from mosa_rl.bench import PROFILE_TOLERANCE, head_systems

    systems, check = head_systems((1, 4), tokens=64, hidden=16, vocab=128, device="cpu", seed=0)
    return compare_speed(systems, baseline="token-logprob", repeats=6, check=check,
                         tolerance=PROFILE_TOLERANCE)  # fmt: skip


def test_profile_head_median_ratio_and_its_check_against_the_definition():
    cmp = _heads()
    rows = cmp.rows(split="head")
    speed = next(r for r in rows if r.system == "profile-k4" and r.metric.startswith("speedup"))
    assert speed.n == 6
    assert speed.ci95[0] <= speed.value <= speed.ci95[1]
    assert cmp.diff["profile-k4"] < 1e-5
    assert cmp.correctness_claim("profile-k4", rows, split="head").verdict == "held"


def test_a_wrong_profile_fails_the_check(monkeypatch):
    import mosa_rl.loss as loss

    fused = loss.profile_sums_from_hidden

    def wrong(*a, **k):  # a wrong head: one sequence's profile off by 1e-3
        out = fused(*a, **k)
        return out + (loss.torch.arange(out.shape[0])[:, None] == 0) * 1e-3

    monkeypatch.setattr(loss, "profile_sums_from_hidden", wrong)
    cmp = _heads()
    assert cmp.diff["profile-k1"] >= 1e-3 * 0.99
    assert cmp.correctness_claim("profile-k1", cmp.rows()).verdict == "not_held"


@pytest.mark.slow
def test_bench_quick_writes_median_ratios_and_checks(tmp_path):
    assert main(["bench", "--quick", "--steps", "1", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "bench.json")
    ratio = results.row("mosa", "step_time_ratio", "step")
    assert ratio.n == 6
    assert ratio.ci95 is not None
    assert ratio.ci95[0] <= ratio.value
    assert results.row("mosa", "matches_tokenkl", "step").value == 1.0
    assert results.row("profile-k16", "head_time_ratio", "head").ci95 is not None
    assert all(c.verdict == "held" for c in results.claims)


@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_bench_budget_must_be_a_positive_number(tmp_path, capsys, value):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--quick", "--out", str(out), "--budget-s", value])
    assert exc.value.code == 2
    assert "--budget-s" in capsys.readouterr().err.strip().splitlines()[-1]
    assert not out.exists()
