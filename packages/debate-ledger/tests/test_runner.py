"""The runner is exact about what it sends: one seed per call from what the call is, no labels
in prompts, shuffled options read back, no retries of its own, one concurrency limit, the
backend's usage, a run-config hash that resume checks."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from debate_ledger.families import Profile, ScriptedDebater, rule_mismatches, simulate
from debate_ledger.ledger import from_rows, transitions
from debate_ledger.questions import fact_questions, shipped_mcq
from debate_ledger.runner import DebateConfig, call_seed, config_hash, option_order, run_debates
from debate_ledger.schemas import LETTERS, LedgerError, read_ledger

from paperstack.llm import Completion
from paperstack.llm.base import BackendUnreachableError

FAM = Profile("f", accuracy=0.6, conformity=0.5, parse_fail=0.1, position_bias=0.1)


class Flaky:
    """Fails with a backend error on chosen calls (to test crash-resume and no retries)."""

    def __init__(self, inner, fail_calls):
        self.inner, self.fail_calls, self.calls = inner, set(fail_calls), 0
        self.name = inner.name

    def generate(self, prompts, **kw):
        self.calls += 1
        if self.calls in self.fail_calls:
            raise BackendUnreachableError("server went away")
        return self.inner.generate(prompts, **kw)


class Recording:
    """Records every prompt and seed it gets; answers like a scripted model."""

    def __init__(self, inner):
        self.inner, self.name, self.sent = inner, inner.name, []
        self.lock = threading.Lock()

    def generate(self, prompts, **kw):
        with self.lock:
            self.sent.append((prompts, kw))
        return self.inner.generate(prompts, **kw)


def _content(path):
    return sorted(
        (r.model_dump(exclude={"latency_s"}) for r in read_ledger(path)),
        key=lambda d: (d["debate_id"], d["agent"], d["round"], d["sample"]),
    )


def test_resume_after_crash_gives_the_same_ledger_without_duplicates(tmp_path):
    qs = shipped_mcq()[:10]
    cfg = DebateConfig(agents=3, rounds=2, resamples=1, seeds=(0, 1))
    clean = tmp_path / "clean.jsonl"
    run_debates(ScriptedDebater.for_questions(FAM, qs), qs, clean, family="f", config=cfg)
    crashed = tmp_path / "crashed.jsonl"
    flaky = Flaky(ScriptedDebater.for_questions(FAM, qs), fail_calls={97})
    with pytest.raises(LedgerError, match="rerun the same command to resume"):
        run_debates(flaky, qs, crashed, family="f", config=cfg)
    assert flaky.calls == 97  # no retries of the runner's own
    partial = len(read_ledger(crashed))
    assert partial == 96
    result = run_debates(ScriptedDebater.for_questions(FAM, qs), qs, crashed, family="f",
                         config=cfg)  # fmt: skip
    assert result.written == len(read_ledger(clean)) - partial
    assert _content(crashed) == _content(clean)


def test_answers_do_not_depend_on_what_else_is_pending(tmp_path):
    """A call's seed is a function of the call: debating a subset of the questions, or the
    seeds one at a time, gives exactly the rows of the full run for those debates."""
    qs = shipped_mcq()[:8]
    full = tmp_path / "full.jsonl"
    cfg = DebateConfig(agents=3, rounds=1, seeds=(3, 4))
    run_debates(ScriptedDebater.for_questions(FAM, qs), qs, full, family="f", config=cfg)
    part = tmp_path / "part.jsonl"
    for seed in (4, 3):
        one = DebateConfig(agents=3, rounds=1, seeds=(seed,))
        run_debates(ScriptedDebater.for_questions(FAM, qs), qs[5:], part, family="f", config=one)
    want = [r for r in _content(full) if r["question_id"] in {q.id for q in qs[5:]}]
    assert _content(part) == want


def test_seeds_orders_and_prompts_carry_no_labels(tmp_path):
    qs = shipped_mcq()[:4]
    rec = Recording(ScriptedDebater.for_questions(FAM, qs))
    cfg = DebateConfig(agents=3, rounds=1, resamples=2)
    rows = run_debates(rec, qs, tmp_path / "l.jsonl", family="secret-family", config=cfg).rows
    for prompts, kw in rec.sent:
        text = str(prompts)
        assert "secret-family" not in text
        assert "scripted/f" not in text
        assert "/s0" not in text
        assert "sample" not in text
        assert isinstance(kw["seed"], int)
    seeds = [kw["seed"] for _, kw in rec.sent]
    assert len(set(seeds)) == len(seeds)  # every call its own seed
    for r in rows:
        q = next(q for q in qs if q.id == r.question_id)
        assert r.seed == call_seed(0, q.id, r.agent, r.round, r.sample)
        assert r.order == option_order(0, q)
        if r.shown is not None:
            assert r.answer == r.order[LETTERS.index(r.shown)]
    # the round-0 prompts of one debate are identical: only the seed tells them apart
    first = [str(p) for p, kw in rec.sent if "Your previous answer" not in str(p)]
    assert len(first) == len(qs) * 3 * 3
    assert len(set(first)) == len(qs)
    assert len({r.order for r in rows}) > 1  # options really are shuffled


def test_resume_refuses_another_configuration(tmp_path):
    qs = shipped_mcq()[:3]
    path = tmp_path / "l.jsonl"
    agent = ScriptedDebater.for_questions(FAM, qs)
    run_debates(agent, qs, path, family="f", config=DebateConfig(agents=3, rounds=1))
    n = len(read_ledger(path))
    for changed, field in (
        (DebateConfig(agents=4, rounds=1), "agents 3 -> 4"),
        (DebateConfig(agents=3, rounds=1, temperature=1.0), "temperature 0.7 -> 1.0"),
        (DebateConfig(agents=3, rounds=1, shuffle=False), "shuffle True -> False"),
    ):
        with pytest.raises(LedgerError, match=field):
            run_debates(agent, qs, path, family="f", config=changed)
    assert len(read_ledger(path)) == n  # nothing appended
    assert config_hash(DebateConfig(agents=3, rounds=1)) == read_ledger(path)[0].run


def test_a_model_belongs_to_one_family(tmp_path):
    qs = shipped_mcq()[:2]
    a = ScriptedDebater.for_questions(Profile("x", 0.5, 0.5), qs)
    cfg = DebateConfig(agents=2, rounds=1)
    run_debates(a, qs, tmp_path / "l.jsonl", family="one", config=cfg)
    with pytest.raises(LedgerError, match="is in family 'one' in this ledger, not 'two'"):
        run_debates(a, qs, tmp_path / "l.jsonl", family="two", config=cfg)


def test_changed_question_is_refused(tmp_path):
    qs = shipped_mcq()[:2]
    path = tmp_path / "l.jsonl"
    agent = ScriptedDebater.for_questions(FAM, qs)
    cfg = DebateConfig(agents=2, rounds=1)
    run_debates(agent, qs, path, family="f", config=cfg)
    other = "A" if qs[0].gold != "A" else "B"
    moved = [qs[0].model_copy(update={"gold": other}), qs[1]]
    with pytest.raises(LedgerError, match=f"question {qs[0].id} changed"):
        run_debates(agent, moved, path, family="f", config=cfg)


class Slow:
    """A backend with a concurrency limit that counts the calls it has in flight."""

    name = "slow"
    concurrency = 3

    def __init__(self):
        self.now = self.most = 0
        self.lock = threading.Lock()

    def generate(self, prompts, **kw):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.01)
        with self.lock:
            self.now -= 1
        return [[Completion("ANSWER: B", "stop", prompt_tokens=17, completion_tokens=3)]]


def test_one_concurrency_limit_and_the_backends_usage(tmp_path):
    qs = shipped_mcq()[:6]
    slow = Slow()
    cfg = DebateConfig(agents=3, rounds=1, resamples=1)
    result = run_debates(slow, qs, tmp_path / "l.jsonl", family="f", config=cfg)
    assert 1 < slow.most <= 3
    rows = result.rows
    assert len(rows) == 6 * 3 * 3
    assert {(r.tokens_in, r.tokens_out, r.tokens_source, r.finish_reason) for r in rows} == {
        (17, 3, "tokenizer", "stop")
    }
    assert result.cost.calls == len(rows)
    assert result.cost.prompt_tokens == 17 * len(rows)


def test_bad_configs_are_clear_errors():
    with pytest.raises(LedgerError, match="at least 2 agents"):
        DebateConfig(agents=1)
    with pytest.raises(LedgerError, match="at least 1 round"):
        DebateConfig(rounds=0)
    with pytest.raises(LedgerError, match="distinct"):
        DebateConfig(seeds=(1, 1))
    with pytest.raises(LedgerError, match="temperature"):
        DebateConfig(temperature=-1)
    with pytest.raises(LedgerError, match="unknown coder"):
        DebateConfig(coder="nope")


def test_text_path_equals_the_rule_applied_directly(small_ledger):
    from conftest import THREE

    rows = read_ledger(small_ledger)
    for _, profile in THREE:
        debater = ScriptedDebater.for_questions(profile, shipped_mcq())
        pop = [r for r in rows if r.model == debater.name]
        assert rule_mismatches(debater, pop) == (0, len(pop))
    # and the check can fail: another profile's rule does not reproduce these answers
    wrong = ScriptedDebater.for_questions(Profile("a", 0.2, 0.9), shipped_mcq())
    bad, n = rule_mismatches(wrong, [r for r in rows if r.model == "scripted/a"])
    assert bad > n // 4


def test_text_path_matches_the_simulator(tmp_path):
    """Through prompts, shuffled options, free text and the coder, scripted agents reproduce
    the simulator's transition rates (a fixed seed; a 99.9% binomial band)."""
    qs = fact_questions(150, seed=3)
    fam = Profile("m", accuracy=0.55, conformity=0.5, parse_fail=0.05, position_bias=0.15)
    cfg = DebateConfig(agents=3, rounds=2, seeds=(0, 1))
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
        (tr.correct[:, 0].sum(), st.correct[:, 0].mean()),
    ):
        assert abs(observed - n * p) <= 3.3 * np.sqrt(n * p * (1 - p)) + 1
