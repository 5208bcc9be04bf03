"""The command line: help, the demo pipeline end to end on a micro setting, bench."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from ra2_unlearn import __version__
from ra2_unlearn.cli import main

from paperstack.records import Claim, ResultsFormatError, load_results

CLAIMS = {
    "premise_original_recalls",
    "premise_retain_model_never_knew",
    "premise_targets_remove_fact",
    "unfiltered_targets_keep_fact",
    "premise_probe_reads_value",
    "ra2_forgets",
    "forget_matched_rmu",
    "ra2_adjacent_beats_rmu",
    "ra2_retain_vs_rmu",
    "forget_matched_ga",
    "ra2_adjacent_beats_ga",
    "ra2_retain_vs_ga",
    "ra2_relearns_less_than_rmu",
}


@pytest.fixture
def micro_demo(monkeypatch):
    """The --quick pipeline shrunk to seconds: micro model, 6 entities, 2 steps."""
    from ra2_unlearn import demo

    small = replace(
        demo.QUICK,
        preset="micro",
        pretrain_steps=3,
        n_entities=6,
        n_forget=2,
        n_holdout=2,
        steps=2,
        batch_size=4,
        relearn_steps=1,
        layer=1,
        lr_grid=(0.5, 1.0),
        methods=("ga", "rmu", "ra2"),
    )
    monkeypatch.setattr(demo, "QUICK", small)
    return small


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out
    assert "bench" in out
    assert "unlearn" in out


def test_console_script_help_is_installed():
    script = shutil.which("ra2", path=str(Path(sys.executable).parent))
    assert script is not None, "the ra2 console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


def test_demo_writes_rows_and_claims_from_rows(tmp_path, micro_demo, capsys):
    assert main(["demo", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "results.json")  # validates and recomputes every claim
    assert results.manifest.package == "ra2-unlearn"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin
        )
        assert again.verdict == claim.verdict
    # One seed: no claim on the unlearned systems can be held (their spread is unknown).
    fixed_claims = {c.id for c in results.claims if c.id.startswith(("premise", "unfiltered"))}
    assert all(c.verdict == "inconclusive" for c in results.claims if c.id not in fixed_claims)
    # The validation sweep ran on its own seed, which no row reports.
    sweep = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert {r["seed"] for r in sweep if r["phase"] == "validation"} == {1000}
    assert {r["seed"] for r in sweep if r["phase"] == "reported"} == {0}
    systems = {r.system for r in results.rows}
    assert systems == {
        "original", "retain-model", "patch-ra2", "patch-ra2-unfiltered", "ga", "rmu", "ra2",
    }  # fmt: skip
    metrics = {r.metric for r in results.rows if r.system == "ra2"}
    assert {
        "forget_acc", "adjacent_acc", "retain_acc", "forget_validity", "probe_acc",
        "probe_control_acc", "ablation_forget_acc", "relearn_forget_acc", "truth_ratio",
        "forget_quality", "knowmem", "verbmem", "privleak", "mia_auc_loss", "mia_auc_zlib",
        "mia_auc_min_k", "mia_auc_min_k_pp",
    } <= metrics  # fmt: skip
    fixed = {"original", "retain-model", "patch-ra2", "patch-ra2-unfiltered"}
    assert all(r.seeds == {"0": r.value} for r in results.rows if r.system not in fixed)
    assert results.row("original", "forget_acc").k is not None
    assert (tmp_path / "report.md").read_text().startswith("# ra2-unlearn")
    out = capsys.readouterr().out
    assert "premise_original_recalls" in out
    assert "held /" in out

    data = json.loads((tmp_path / "results.json").read_text())
    for claim in data["claims"]:  # tamper: the stored verdict must follow from the rows
        if claim["id"] == "premise_original_recalls":
            claim["verdict"] = "not_held" if claim["verdict"] == "held" else "held"
            claim["held"] = claim["verdict"] == "held"
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="premise_original_recalls"):
        load_results(tmp_path / "results.json")


def test_bad_out_path_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--out", str(blocker / "sub")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("ra2: error: --out")


@pytest.mark.slow
def test_bench_writes_ratios(tmp_path):
    assert main(["bench", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.row("ra2/rmu", "time_ratio").value > 0
