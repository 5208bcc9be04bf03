"""The demo's results: claim ids, rows and seeds, claims recomputed, a tampered verdict."""

from __future__ import annotations

import json

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
    "premise_adjacent_utility_drops",
    "ra2_forgets",
    "forget_matched_rmu",
    "ra2_adjacent_beats_rmu",
    "ra2_retain_vs_rmu",
    "forget_matched_ga",
    "ra2_adjacent_beats_ga",
    "ra2_retain_vs_ga",
    "ra2_relearns_less_than_rmu",
}


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
        "baselines-mean",
    }  # fmt: skip
    # The calibration searched steps on the validation seed, checking forget accuracy as it went,
    # and each reported run used the (lr, steps) its system was calibrated to.
    val = [r for r in sweep if r["phase"] == "validation"]
    assert all(r["checks"] and r["checks"][-1][1] == r["forget_acc"] for r in val)
    config = json.loads((tmp_path / "results.json").read_text())["manifest"]["config"]
    # The default adjacent set is the forgotten domain of never-unlearned entities (relation).
    assert config["settings"]["adjacency"] == "relation"
    strength = config["run"]["strength"]
    for r in sweep:
        if r["phase"] == "reported":
            assert (r["lr"], r["steps"]) == (strength[r["system"]]["lr"],
                                             strength[r["system"]]["steps"])  # fmt: skip
    gated = {c.id: c for c in results.claims}
    assert gated["ra2_adjacent_beats_rmu"].requires == (
        "premise_adjacent_utility_drops", "forget_matched_rmu",
    )  # fmt: skip
    assert gated["ra2_retain_vs_ga"].requires == ("forget_matched_ga",)
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
