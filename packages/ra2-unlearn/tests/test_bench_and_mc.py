"""bench (in-process and its ratios), and the optional multiple-choice (WMDP/MUSE-style) path."""

from __future__ import annotations

import pytest
from ra2_unlearn.bench import measure
from ra2_unlearn.cli import main
from ra2_unlearn.data import load_mc_jsonl
from ra2_unlearn.evaluate import greedy_answers, mc_accuracy

from paperstack.records import load_results


def test_measure_times_each_step_after_warmup():
    res = measure("ra2", "micro", steps=3, seed=0)
    assert len(res["step_seconds"]) == 3
    assert all(t > 0 for t in res["step_seconds"])
    assert res["peak_mib"] >= 0


def test_mc_accuracy_reads_letters_from_jsonl(micro, tmp_path):
    model, tok = micro
    path = tmp_path / "wmdp.jsonl"
    path.write_text(
        '{"question": "Which?", "choices": ["x", "y", "z", "w"], "answer": "B"}\n'
        '{"question": "Other?", "choices": ["x", "y"], "answer": 0}\n'
    )
    items = load_mc_jsonl(path)
    acc = mc_accuracy(model, tok, items)
    assert acc.shape == (2,)
    assert acc.dtype == bool


def test_greedy_answers_keep_input_order_across_length_groups(micro):
    model, tok = micro
    prompts = ["a", "bbbb", "cc", "a"]
    outs = greedy_answers(model, tok, prompts, max_new_tokens=3)
    assert len(outs) == 4
    assert outs[0] == outs[3]


@pytest.mark.slow
def test_bench_writes_ratios(tmp_path):
    assert main(["bench", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.row("ra2/rmu", "time_ratio").value > 0
