"""The quick demo on two smoke models: its run log, every claim from paired rows, a tampered row
refused."""

import dataclasses
import json
from pathlib import Path

import pytest
from pall_lns import lm
from pall_lns.cli import main
from pall_lns.experiment import METHODS

from paperstack.records import ResultsFormatError, load_results

CLAIMS = {
    "premise_scip_leaves_room",
    "premise_operator_choice_matters",
    "lm_beats_random_heldout",
    "lm_beats_random_unseen_family",
    "lm_beats_linear_heldout",
    "pall_beats_scip_integral",
    "pall_beats_scip_aggressive_integral",
    "pall_beats_highs_integral",
    "pall_beats_scip_alns_integral",
    "pall_beats_scip_final_gap",
    "pall_beats_scip_aggressive_final_gap",
    "pall_beats_scip_alns_final_gap",
    "pall_beats_highs_final_gap",
    "lm_beats_bandit",
    "lm_beats_random_online",
    "async_beats_sync",
}

#: Two smoke models (setcover and indset, seed 7), also the conformance suite's demo data.
INSTANCES = Path(__file__).parent / "data" / "instances"


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    data = INSTANCES
    # The quick protocol (micro LM) on two smoke models with a short budget, so the fast suite
    # stays fast; `demo --quick` itself runs in CI's isolation session.
    argv = ["demo", "--quick", "--time-limit", "0.5", "--dataset", str(data), "--out", str(out)]
    # a run log left by an earlier demo into the same folder is replaced, not appended to
    (out / "runs.jsonl").write_text('{"instance": "stale.lp", "method": "scip"}\n')
    # The selector LM fine-tunes for 2 steps instead of the quick recipe's 20 (what these tests
    # check does not depend on how well it learnt; the conformance suite does the same).
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lm, "QUICK_RECIPE", dataclasses.replace(lm.QUICK_RECIPE, steps=2))
        assert main([*argv, "--no-progress"]) == 0
    return out


def test_demo_run_log_holds_this_run_only(demo_dir):
    lines = (demo_dir / "runs.jsonl").read_text().splitlines()
    runs = [json.loads(line) for line in lines]
    assert len(runs) == 2 * len(METHODS)
    assert "stale.lp" not in {r["instance"] for r in runs}


def test_demo_quick_writes_valid_results_with_claims_from_rows(demo_dir):
    results = load_results(demo_dir / "results.json")  # validates and recomputes every claim
    assert {c.id for c in results.claims} == CLAIMS
    assert [c.id for c in results.claims[:2]] == [  # the premises are measured first
        "premise_scip_leaves_room",
        "premise_operator_choice_matters",
    ]
    for claim in results.claims:
        if isinstance(claim.rhs, float):
            continue
        # paired over the same instances or held-out states, not two point estimates
        assert claim.method in ("paired-t", "paired-bootstrap")
    for method in METHODS:
        row = results.row(method, "primal_integral", "all")
        assert row.items is not None
        assert sorted(row.items) == ["indset-smoke-s7.lp", "setcover-smoke-s7.lp"]
        for split in ("setcover", "indset", "all"):
            assert 0.0 <= results.row(method, "primal_integral", split).value <= 1.0
            assert 0.0 <= results.row(method, "primal_gap", split).value <= 1.0
    for split in ("heldout-same", "heldout-unseen"):
        lm = results.row("lm", "oracle_reward_share", split)
        rnd = results.row("random", "oracle_reward_share", split)
        assert lm.items is not None
        assert rnd.items is not None
        assert lm.items.keys() == rnd.items.keys()  # the same held-out states
        assert all(0.0 <= v <= 1.0 for v in lm.items.values())
    assert results.manifest.config["pall_decisions"] > 0
    gated = {c.id: c.requires for c in results.claims}
    assert gated["pall_beats_scip_final_gap"] == ("premise_scip_leaves_room",)
    assert gated["lm_beats_random_heldout"] == ("premise_operator_choice_matters",)
    assert gated["pall_beats_highs_final_gap"] == ()
    assert (demo_dir / "report.md").read_text().startswith("# pall-lns")


def test_demo_claims_follow_the_rows_not_the_code(demo_dir):
    data = json.loads((demo_dir / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "pall" and row["metric"] == "primal_integral" and row["split"] == "all":
            row["items"] = {k: v + 0.5 for k, v in row["items"].items()}
            row["value"] += 0.5
    bad = demo_dir / "tampered.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="does not follow from its rows"):
        load_results(bad)


def test_claims_per_family_on_final_gap_and_integral_gated_on_the_premise():
    """Issue #53: the final gap beside the integral, per family (splits of two or more
    instances), PALL against SCIP, SCIP's ALNS and HiGHS; a premise not held gates them."""
    from pall_lns.experiment import FAMILY_BASELINES, claims_from_rows

    from paperstack.records import Row

    rows = []
    for system, base in (("pall", 0.1), ("scip", 0.0), ("scip-alns", 0.3), ("highs", 0.2)):
        for metric in ("primal_gap", "primal_integral"):
            for split in ("setcover", "all"):
                step = {"scip": 0.0, "pall": 0.02}.get(system, 0.01)
                items = {f"i{k}": base + step * k for k in range(3)}
                rows.append(Row.from_items(system, metric, items, split=split))
    claims = {c.id: c for c in claims_from_rows(rows)}
    for base in FAMILY_BASELINES:
        b = base.replace("-", "_")
        assert f"setcover_pall_beats_{b}_final_gap" in claims
        assert f"setcover_pall_beats_{b}_integral" in claims
    # SCIP's gap is 0 everywhere: the premise is not held and gates the claims against SCIP
    assert claims["premise_scip_leaves_room"].verdict != "held"
    gated = claims["setcover_pall_beats_scip_alns_final_gap"]
    assert gated.verdict == "inconclusive"
    assert gated.unmet == ("premise_scip_leaves_room",)
    assert claims["setcover_pall_beats_highs_final_gap"].verdict == "held"  # not gated
