"""bench --quick: medians with intervals and both output checks; a wrong MinPath fails one."""

import pytest
from minpath.cli import main

from paperstack.records import load_results

# the tests here fine-tune in this process: see conftest.frozen_heap
pytestmark = pytest.mark.usefixtures("frozen_heap")


def _claim(results, cid):
    return next(c for c in results.claims if c.id == cid)


def _check_rows(results):
    for system, metric, split in (("minpath/raw", "gen_time_ratio", "generation"),
                                  ("minpath/parse", "extraction_time_ratio", "extraction"),
                                  ("minpath", "speedup_vs_raw", "generation")):  # fmt: skip
        row = results.row(system, metric, split)
        assert row.n == 6
        assert row.ci95 is not None
        assert row.ci95[0] <= row.value <= row.ci95[1]
    assert results.row("minpath", "matches_parse", "extraction").value == 1.0
    assert results.row("minpath", "matches_raw", "generation").n == 1
    assert _claim(results, "minpath_extraction_keeps_parse_and_answer").verdict == "held"
    assert "minpath_model_answers_within_tolerance" in {c.id for c in results.claims}


@pytest.mark.slow
def test_bench_quick_writes_medians_and_correctness_rows(tmp_path):
    assert main(["bench", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    _check_rows(load_results(tmp_path / "bench.json"))


def test_bench_rows_on_an_untrained_micro_model(tmp_path, monkeypatch, micro):
    """The same rows fast: the base model is a random micro one and SFT is skipped (what is
    tested is the bench's statistics and checks, not what training reaches)."""
    from minpath import demo, finetune

    model, tok = micro
    model.save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    monkeypatch.setattr(demo, "base_path", lambda config, model: str(tmp_path / "base"))
    monkeypatch.setattr(finetune, "sft", lambda *a, **k: None)
    assert main(["bench", "--quick", "--no-progress", "--out", str(tmp_path / "b")]) == 0
    results = load_results(tmp_path / "b" / "bench.json")
    _check_rows(results)
    assert results.row("minpath", "matches_raw", "generation").value == 1.0


def test_a_compression_that_changes_the_answer_fails_the_check(monkeypatch):
    from minpath import bench, graph
    from minpath.traces import verbose_traces

    from paperstack.bench import compare_speed

    compress = graph.compress

    def wrong(question, cot, **kw):  # a broken MinPath: the compressed CoT's answer moves
        c = compress(question, cot, **kw)
        c.text = c.text + "\nAnswer: -1"
        return c

    monkeypatch.setattr(graph, "compress", wrong)
    traces = verbose_traces(8, seed=0)

    def minpath():
        out = []
        for t in traces:
            c = graph.compress(t.question, t.cot, gold_answer=t.value)
            out.append((c.steps, c.edges, graph.final_answer(c.text)))
        return out

    cmp = compare_speed(
        {"parse": lambda: [bench._parse(t.question, t.cot) for t in traces], "minpath": minpath},
        baseline="parse", repeats=1, check=bench.extraction_mismatches,
    )  # fmt: skip
    rows = cmp.rows()
    assert cmp.diff["minpath"] == 8.0
    assert cmp.correctness_claim("minpath", rows).verdict == "not_held"


def test_answer_gap_counts_only_a_loss_of_accuracy():
    from minpath.bench import answer_gap

    gap = answer_gap([1, 2, 3, 4])
    assert gap([1, 2, 3, 4], [1, 2, None, None]) == 0.0
    assert gap([1, None, None, None], [1, 2, 3, 4]) == 0.75
    assert gap([1], [1, 2, 3, 4]) == float("inf")
