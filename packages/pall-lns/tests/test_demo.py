"""The quick demo on two smoke models: its run log, every claim from paired rows, a tampered row
refused."""

import json
from pathlib import Path

import pytest
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
