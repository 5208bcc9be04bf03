"""bench (in-process and its ratios), and the optional multiple-choice (WMDP/MUSE-style) path."""

from __future__ import annotations

import pytest
from ra2_unlearn.bench import measure
from ra2_unlearn.cli import main
from ra2_unlearn.data import load_mc_jsonl
from ra2_unlearn.evaluate import greedy_answers, mc_accuracy

from paperstack.records import load_results
from paperstack.testing import assert_bench_check_held


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


def _interleaved(repeats=1):
    from ra2_unlearn.bench import timed_methods, touched_difference

    from paperstack.bench import compare_speed

    return compare_speed(timed_methods("micro", 1, 0, "cpu"), baseline="rmu", repeats=repeats,
                         check=touched_difference)  # fmt: skip


def test_ra2_and_rmu_move_the_same_parameters_and_a_median_is_reported():
    assert_bench_check_held(_interleaved(repeats=6), "ra2", repeats=6)


def test_a_diverging_ra2_fails_the_output_check(monkeypatch):
    from ra2_unlearn.trainer import UnlearnTrainer

    loss = UnlearnTrainer._ra2_loss

    def diverging(self, *a):  # a wrong method: its loss, and so its weights, go NaN
        value, parts = loss(self, *a)
        return value * float("nan"), parts

    monkeypatch.setattr(UnlearnTrainer, "_ra2_loss", diverging)
    cmp = _interleaved()
    assert cmp.diff["ra2"] == float("inf")
    assert cmp.correctness_claim("ra2", cmp.rows()).verdict == "not_held"


@pytest.mark.slow
def test_bench_writes_median_ratios_and_the_check(tmp_path):
    assert main(["bench", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    results = load_results(tmp_path / "bench.json")
    ratio = results.row("ra2/rmu", "time_ratio")
    assert ratio.value > 0
    assert ratio.ci95 is not None
    assert ratio.n == 6
    assert results.row("ra2", "matches_rmu").value == 1.0
    assert results.claims[0].verdict == "held"
