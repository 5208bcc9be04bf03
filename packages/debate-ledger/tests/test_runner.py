import numpy as np
import pytest
from debate_ledger.families import Family, ScriptedDebater, simulate
from debate_ledger.ledger import from_rows, transitions
from debate_ledger.questions import fact_questions, shipped_mcq
from debate_ledger.runner import DebateConfig, run_debates
from debate_ledger.schemas import LedgerError, read_ledger

from paperstack.llm.base import BackendUnreachableError


class Flaky:
    """Fails with a backend error on chosen calls (to test retries and crash-resume)."""

    def __init__(self, inner, fail_calls):
        self.inner, self.fail_calls, self.calls = inner, set(fail_calls), 0
        self.name = inner.name

    def generate(self, prompts, **kw):
        self.calls += 1
        if self.calls in self.fail_calls:
            raise BackendUnreachableError("server went away")
        return self.inner.generate(prompts, **kw)


def test_resume_after_crash_gives_the_same_ledger_without_duplicates(tmp_path):
    qs = shipped_mcq()[:10]
    fam = Family("f", accuracy=0.6, conformity=0.5, parse_fail=0.1)
    cfg = DebateConfig(agents=3, rounds=2, batch_size=7, retries=0)
    clean = tmp_path / "clean.jsonl"
    run_debates(ScriptedDebater.for_questions(fam, qs), qs, clean, family="f", config=cfg)
    crashed = tmp_path / "crashed.jsonl"
    flaky = Flaky(ScriptedDebater.for_questions(fam, qs), fail_calls={6})
    with pytest.raises(LedgerError, match="rerun the same command to resume"):
        run_debates(flaky, qs, crashed, family="f", config=cfg)
    partial = len(read_ledger(crashed))
    assert 0 < partial < len(read_ledger(clean))
    run_debates(ScriptedDebater.for_questions(fam, qs), qs, crashed, family="f", config=cfg)

    def content(path):  # latency is wall time, the one field that legitimately differs
        return sorted(
            (r.model_dump(exclude={"latency_s"}) for r in read_ledger(path)),
            key=lambda d: (d["debate_id"], d["agent"], d["round"], d["sample"]),
        )

    assert content(crashed) == content(clean)


def test_transient_errors_are_retried(tmp_path):
    qs = shipped_mcq()[:4]
    fam = Family("f", accuracy=0.6, conformity=0.5)
    flaky = Flaky(ScriptedDebater.for_questions(fam, qs), fail_calls={1, 3})
    cfg = DebateConfig(agents=2, rounds=1, retries=2, retry_wait_s=0.0)
    rows = run_debates(flaky, qs, tmp_path / "l.jsonl", family="f", config=cfg)
    assert len(rows) == 4 * 2 * 2


def test_family_cannot_switch_models(tmp_path):
    qs = shipped_mcq()[:2]
    a = ScriptedDebater.for_questions(Family("x", 0.5, 0.5), qs)
    b = ScriptedDebater.for_questions(Family("y", 0.5, 0.5), qs)
    run_debates(a, qs, tmp_path / "l.jsonl", family="fam")
    with pytest.raises(LedgerError, match="was run with model 'scripted/x'"):
        run_debates(b, qs, tmp_path / "l.jsonl", family="fam")


def test_bad_configs_are_clear_errors():
    with pytest.raises(LedgerError, match="at least 2 agents"):
        DebateConfig(agents=1)
    with pytest.raises(LedgerError, match="at least 1 round"):
        DebateConfig(rounds=0)


def test_text_path_matches_the_simulator(tmp_path):
    """Through prompts, free text and the coder, scripted agents reproduce the simulator's
    transition rates (a fixed seed; a 99.9% binomial band, so this is not a coin flip)."""
    qs = fact_questions(150, seed=3)
    fam = Family("m", accuracy=0.55, conformity=0.5, parse_fail=0.05)
    cfg = DebateConfig(agents=3, rounds=2, repeats=2, batch_size=512)
    path = tmp_path / "l.jsonl"
    run_debates(ScriptedDebater.for_questions(fam, qs), qs, path, family="m", config=cfg)
    arr = from_rows(read_ledger(path))
    tr = transitions(arr.answers, arr.gold)
    sim = simulate(fam, 100_000, 3, 2, 4, np.random.default_rng(1))
    st = transitions(sim, np.zeros(100_000, dtype=np.int64))
    n = arr.n_debates
    for observed, p in (
        (tr.collapse.sum(), st.collapse.mean()),
        (tr.correction.sum(), st.correction.mean()),
    ):
        assert abs(observed - n * p) <= 3.3 * np.sqrt(n * p * (1 - p)) + 1
    assert abs(tr.correct[:, 0].mean() - st.correct[:, 0].mean()) < 0.1
