"""The demo's results: claim ids and their recomputation, per-seed and per-problem rows, the
matched-KL choice, resuming from the run log, tampered rows; the real --quick (slow)."""

import json
import shutil

import pytest
from mosa_rl import __version__
from mosa_rl.cli import main
from mosa_rl.demo import run_demo

from paperstack.records import Claim, ResultsFormatError, load_results

CLAIMS = [
    "premise_grpo_raises_pass1",
    "premise_grpo_collapses_passk",
    "mosa_passk_beats_tokenkl",
    "mosa_passk_beats_nokl",
    "mosa_pass1_not_worse",
    "mosa_more_distinct_solutions",
    "mosa_flatter_top1",
    "mosa_forward_passk_beats_tokenkl",
]
SYSTEMS = ("base", "grpo-nokl", "grpo-tokenkl", "mosa", "mosa-forward")


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory, tiny_demo):
    out = tmp_path_factory.mktemp("demo")
    result = run_demo(tiny_demo, out, (0, 1), workers=1, log=lambda _: None)
    from paperstack.records import Manifest, Results, write_results

    manifest = Manifest.collect("mosa-rl", __version__).finish()
    write_results(out / "results.json", Results(manifest=manifest, rows=result.rows,
                                                claims=result.claims))  # fmt: skip
    return out, result


def test_demo_has_the_premise_first_and_every_claim_from_rows(demo_dir):
    out, _result = demo_dir
    results = load_results(out / "results.json")  # validates and recomputes every claim
    assert [c.id for c in results.claims] == CLAIMS
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin
        )
        assert again.verdict == claim.verdict
        assert claim.method == "paired-t"  # per-seed rows on shared seeds pair
        assert claim.n == 2


def test_rows_carry_per_seed_and_per_problem_values(demo_dir, tiny_demo):
    out, _ = demo_dir
    results = load_results(out / "results.json")
    for system in SYSTEMS:
        for metric in ("pass@1", "pass@4", "distinct_correct", "top1_mass", "kl_to_base"):
            row = results.row(system, metric, "test")
            assert set(row.seeds) == {"0", "1"}
        by_problem = results.row(system, "pass@4", "test-by-problem")
        assert len(by_problem.items) == tiny_demo.eval_problems
    assert results.row("base", "kl_to_base", "test").value == 0.0
    # the validation grid is reported whole, and never as a result with an interval
    grid = [r for r in results.rows if r.split == "validation"]
    assert {r.system for r in grid} == {
        "grpo-nokl", "grpo-tokenkl-0.04", "mosa-30", "mosa-forward-30"
    }  # fmt: skip
    assert all(r.ci95 is None for r in grid)


def test_matched_kl_choice_is_recorded(demo_dir):
    _, result = demo_dir
    assert result.choice["betas"] == {"grpo-tokenkl": 0.04, "mosa": 30.0, "mosa-forward": 30.0}
    assert result.choice["target_kl"] == pytest.approx(0.5 * result.choice["nokl_kl"])


def test_rerun_resumes_from_the_log_without_training(demo_dir, tiny_demo, tmp_path, monkeypatch):
    out, first = demo_dir
    folder = tmp_path / "again"
    shutil.copytree(out, folder)
    lines = (folder / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 4 + 2 * 5  # validation grid + seeds x (base + 4 systems)
    import mosa_rl.demo as demo_module

    def no_training(*_args, **_kw):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(demo_module, "run_system", no_training)
    messages: list[str] = []
    again = run_demo(tiny_demo, folder, (0, 1), workers=1, log=messages.append)
    assert any("resuming" in m and "14 of 14" in m for m in messages)
    assert [c.verdict for c in again.claims] == [c.verdict for c in first.claims]
    assert len((folder / "runs.jsonl").read_text().splitlines()) == 14


def test_interrupted_log_is_resumed_cleanly_not_appended(demo_dir, tiny_demo, tmp_path):
    """0.1 appended every rerun after Ctrl-C to the stale lines (4 -> 9). Now: a torn last line
    and lines of another configuration are dropped, finished runs are kept, the rest rerun."""
    out, _ = demo_dir
    folder = tmp_path / "torn"
    folder.mkdir()
    lines = (out / "runs.jsonl").read_text().splitlines()
    stale = json.loads(lines[0])
    stale["fingerprint"] = "another-config"
    torn = [*lines[:5], json.dumps(stale), lines[5][: len(lines[5]) // 2]]
    (folder / "runs.jsonl").write_text("\n".join(torn))  # no final newline: a killed writer
    messages: list[str] = []
    run_demo(tiny_demo, folder, (0, 1), workers=1, log=messages.append)
    assert any("5 of 14 runs done" in m for m in messages)
    final = [json.loads(x) for x in (folder / "runs.jsonl").read_text().splitlines()]
    assert len(final) == 14
    assert len({r["job"] for r in final}) == 14
    assert {r["fingerprint"] for r in final} == {json.loads(lines[0])["fingerprint"]}


def test_tampered_rows_break_the_stored_claims(demo_dir, tmp_path):
    out, _ = demo_dir
    data = json.loads((out / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "mosa" and row["metric"] == "top1_mass" and row["split"] == "test":
            row["seeds"] = {k: v - 0.5 for k, v in row["seeds"].items()}
            row["value"] -= 0.5
            row["ci95"] = [row["ci95"][0] - 0.5, row["ci95"][1] - 0.5]
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="mosa_flatter_top1"):
        load_results(tmp_path / "results.json")


@pytest.mark.slow
def test_demo_quick_through_the_cli(tmp_path):
    assert main(["demo", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    assert [c.id for c in load_results(tmp_path / "results.json").claims] == CLAIMS
