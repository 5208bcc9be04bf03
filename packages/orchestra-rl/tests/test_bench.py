"""orchestra bench on paperstack.bench: a median overhead row with an interval, the correctness
row from the same run, and a changed model reply caught by it.

The fast tests stand in for the tiny model and MiniLM (a training run or a model load on a
shared CPU); the real quick bench is the slow test in test_demo.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from orchestra_rl import bench as bench_module
from orchestra_rl.cli import main

from paperstack.records import load_results


class _Chat:
    def __init__(self, drift: bool = False) -> None:
        self.calls = itertools.count()
        self.drift = drift

    def generate(self, prompts, max_new_tokens, seed):
        k = next(self.calls) if self.drift else 0
        return [[f"42{'!' * k}"] for _ in prompts]


class _Embedder:
    def encode(self, texts):
        rng = np.random.default_rng(len(texts))
        v = rng.normal(size=(len(texts), 16))
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def _run(tmp_path, monkeypatch, chat):
    monkeypatch.setattr(bench_module, "_load_model", lambda show: chat)
    monkeypatch.setattr(bench_module, "_load_embedder", _Embedder)
    assert main(["bench", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    return load_results(tmp_path / "bench.json")


def test_bench_reports_median_overhead_and_correctness(tmp_path, monkeypatch):
    results = _run(tmp_path, monkeypatch, _Chat())
    for system, metric in (("orchestration_per_round_over_one_call", "time_ratio"),
                           ("model-call+orchestrator", "speedup_vs_model-call")):  # fmt: skip
        row = results.row(system, metric)
        assert row.n == 6
        assert row.ci95 is not None
        assert row.ci95[0] <= row.value <= row.ci95[1]
    assert results.row("model-call+orchestrator", "matches_model-call").value == 1.0
    (claim,) = results.claims
    assert claim.id == "orchestrator_keeps_the_call"
    assert claim.verdict == "held"


def test_a_changed_reply_fails_the_check(tmp_path, monkeypatch):
    results = _run(tmp_path, monkeypatch, _Chat(drift=True))
    assert results.row("model-call+orchestrator", "matches_model-call").value == 0.0
    assert results.claims[0].verdict == "not_held"


def test_bench_needs_six_rounds(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--rounds", "5", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "at least 6" in capsys.readouterr().err
