"""memeeconomy bench on paperstack.bench: median speed rows with intervals, correctness rows
from the same run, and a deliberately wrong output caught by them.

The fast tests replace MiniLM (a model load and an encoder pass: tens of seconds on a shared
CPU) by a stand-in verifier; the bench's plumbing is what they test. The real quick bench is
the slow test."""

from __future__ import annotations

import math

import pytest
from memeeconomy import bench as bench_module
from memeeconomy.cli import main

from paperstack.records import load_results

SPEED = (("market-resume", "speedup_vs_market"),
         ("memeagent-minilm", "speedup_vs_keyword-rules"))  # fmt: skip


class _Features:
    def forget(self) -> None:
        pass


class _Verifier:
    """Stands in for MiniLMVerifier: the length of each example's text picks its label."""

    def __init__(self, features: _Features, **_: object) -> None:
        self.features = features

    def fit(self, train: object, val: object) -> None:
        pass

    def predict(self, examples):
        labels = bench_module.LABELS
        return [labels[len(ex.text) % len(labels)] for ex in examples]


@pytest.fixture
def no_minilm(monkeypatch):
    monkeypatch.setattr(bench_module, "MiniLMFeatures", _Features)
    monkeypatch.setattr(bench_module, "MiniLMVerifier", _Verifier)


def _run(tmp_path):
    out = tmp_path / "bench"
    assert main(["bench", "--quick", "--no-progress", "--out", str(out)]) == 0
    return load_results(out / "bench.json")


def _assert_medians_and_checks(results) -> None:
    for system, metric in SPEED:  # six repeats, the median inside its interval
        row = results.row(system, metric)
        lo, hi = row.ci95 or (math.nan, math.nan)
        assert (row.n, lo <= row.value <= hi) == (6, True), (system, metric)
    assert results.row("market-resume", "matches_market").value == 1.0
    assert results.row("memeagent-minilm", "matches_keyword-rules").value == 1.0
    assert {c.id: c.verdict for c in results.claims} == {
        "market_resume_identical": "held",
        "minilm_verdicts_consistent": "held",
    }


def test_bench_reports_medians_and_correctness(tmp_path, no_minilm):
    _assert_medians_and_checks(_run(tmp_path))


def test_wrong_outputs_fail_the_checks(tmp_path, monkeypatch, no_minilm):
    real = bench_module._summary

    def off_by_one(result):
        out = real(result)
        if "complete" in str(result.ledger):  # only the resumed run is wrong
            out["balances"][0] += 1.0
        return out

    calls = {"n": 0}

    def drifting(self, examples):
        calls["n"] += 1  # the timed calls give other verdicts than the untimed reference
        return ["PASS" if calls["n"] <= 2 else "FLAG" for _ in examples]

    monkeypatch.setattr(bench_module, "_summary", off_by_one)
    monkeypatch.setattr(_Verifier, "predict", drifting)
    results = _run(tmp_path)
    assert results.row("market-resume", "matches_market").value == 0.0
    assert results.row("memeagent-minilm", "matches_keyword-rules").value == 0.0
    assert {c.verdict for c in results.claims} == {"not_held"}


def test_rules_that_skip_an_example_fail_the_check(tmp_path, monkeypatch, no_minilm):
    monkeypatch.setattr(bench_module.KeywordVerifier, "predict",
                        lambda self, examples: ["PASS"] * (len(examples) - 1))  # fmt: skip
    results = _run(tmp_path)
    assert results.row("memeagent-minilm", "matches_keyword-rules").value == 0.0


@pytest.mark.slow
def test_quick_bench_with_minilm(tmp_path):
    _assert_medians_and_checks(_run(tmp_path))
