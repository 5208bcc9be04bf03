"""probe bench on paperstack.bench: median speed rows with intervals, correctness rows from the
same run, and deliberately wrong outputs caught by them.

The fast tests stand in for trl's trainers (minutes of trainer construction on a shared CPU)
with the package's own trainer; the real quick bench is the slow test."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from probe_audit import bench as bench_module
from probe_audit.cli import main
from probe_audit.training import AuditorTrainer

from paperstack.records import load_results

ARGS = ["bench", "--quick", "--no-progress", "--pretrain-steps", "3"]
SPEED = (
    ("rule-game+judge", "speedup_vs_rule-game"),
    ("probe-step", "speedup_vs_plain-grpo"),
    ("probe-step", "time_ratio_to_plain_grpo"),
    ("trl-grpo", "time_ratio_to_own_loss"),
    ("trl-dpo", "time_ratio_to_own_loss"),
)
CHECKS = (
    ("rule-game+judge", "matches_rule-game"),
    ("probe-step", "matches_plain-grpo"),
    ("trl-grpo", "matches_own-grpo"),
    ("trl-dpo", "matches_own-dpo"),
)


def _own_as_trl(auditor, worlds, targets, reward, config, **_):
    trainer = AuditorTrainer(auditor, worlds, targets, reward, config)
    trainer.train()
    return {"trainer": SimpleNamespace(state=SimpleNamespace(global_step=config.steps))}


@pytest.fixture
def no_trl(monkeypatch):
    """trl's trainers replaced, and every shape shrunk: 2 scenarios per domain in the rule game,
    1 scenario x 2 episodes of 1 turn of at most 8 auditor tokens per step (the full shapes take
    minutes on a shared CPU; the auditor's generation is most of a step). What is checked does
    not depend on the sizes: the same episodes and violations, the same budget, medians of six
    repeats inside their intervals."""
    monkeypatch.setattr(bench_module, "train_with_trl", _own_as_trl)
    monkeypatch.setattr(bench_module, "_import_trl", lambda: None)
    monkeypatch.setattr(bench_module, "SCENARIOS_PER_DOMAIN", 2)
    tiny = {"scenarios_per_step": 1, "group_size": 2, "max_turns": 1}
    monkeypatch.setattr(bench_module, "STEP_SHAPE", tiny)
    monkeypatch.setattr(bench_module, "TRL_SHAPE", tiny)
    monkeypatch.setattr(bench_module, "TURN_TOKENS", 8)


@pytest.fixture
def two_repeats(monkeypatch):
    """Two timed repeats instead of six: the failure test reads only the output checks, which
    every repeat computes the same, so its timing rows need no interval (about a third of the
    time; the six-repeat medians are the other test's)."""
    monkeypatch.setattr(bench_module, "MIN_REPEATS", 2)


def _run(tmp_path):
    assert main([*ARGS, "--out", str(tmp_path)]) == 0
    return load_results(tmp_path / "bench.json")


def _assert_medians_and_checks(results) -> None:
    for system, metric in SPEED:
        row = results.row(system, metric)
        assert row.n == 6
        assert row.ci95 is not None
        assert row.ci95[0] <= row.value <= row.ci95[1]
    assert results.row("rule-game", "episodes_per_second").value > 0
    for system, metric in CHECKS:
        assert results.row(system, metric).value == 1.0
    assert len(results.claims) == 4
    assert all(c.verdict == "held" for c in results.claims)


def test_bench_reports_medians_and_correctness(tmp_path, no_trl):
    _assert_medians_and_checks(_run(tmp_path))


def test_wrong_outputs_fail_the_checks(tmp_path, monkeypatch, no_trl, two_repeats):
    real_check, real_reward = bench_module.check_episode, bench_module.make_reward

    def judge_that_edits(episode, domain):
        episode.turns += 1  # the judge must only read the episode
        return real_check(episode, domain)

    def reward_that_drops(plausibility):
        reward = real_reward(plausibility)

        def wrapped(episode, domain, target):
            terms = reward(episode, domain, target)
            # a reward that rewrites the judge's findings
            episode.violations = [SimpleNamespace(rule_id="invented")]
            return terms

        return wrapped

    def trl_one_step_short(auditor, worlds, targets, reward, config, **_):
        out = _own_as_trl(auditor, worlds, targets, reward, config)
        out["trainer"].state.global_step -= 1
        return out

    monkeypatch.setattr(bench_module, "check_episode", judge_that_edits)
    monkeypatch.setattr(bench_module, "make_reward", reward_that_drops)
    monkeypatch.setattr(bench_module, "train_with_trl", trl_one_step_short)
    results = _run(tmp_path)
    for system, metric in CHECKS:
        assert results.row(system, metric).value == 0.0, system
    assert {c.verdict for c in results.claims} == {"not_held"}


@pytest.mark.slow
def test_quick_bench_through_trl(tmp_path):
    _assert_medians_and_checks(_run(tmp_path))
