"""The quick demo's claims (every id, the verbosity row) and a problem set that is a folder."""

import pytest
from proofrank import __version__
from proofrank.cli import main

from paperstack.records import load_results

CLAIMS = {
    "premise_judge_tells_complete_from_incomplete",
    "gate_rejects_incomplete_proofs",
    "conciseness_orders_provers",
    "ease_orders_provers",
    "simplicity_orders_provers",
    "diversity_orders_provers",
    "adaptivity_orders_provers",
    "quality_not_captured_by_correctness",
}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    assert main(["demo", "--quick", "--no-progress", "--out", str(out)]) == 0
    return out


def test_demo_quick_writes_the_issue_claims(quick):
    results = load_results(quick / "results.json")  # recomputes every verdict
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    assert results.claims[0].id.startswith("premise_")
    row = results.row("verbose", "verbosity", "test")
    assert row.items is not None
    assert len(row.items) == 12
    assert results.manifest.config["samples"] == 3
    assert (quick / "report.md").read_text().startswith("# proofrank")


def test_demo_refuses_a_problem_set_that_is_a_directory(tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--problems", str(tmp_path), "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "is a directory" in err
    assert not out.exists()
