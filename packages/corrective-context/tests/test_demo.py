"""The demo's claims gated on the premise (a small run), the bench ratio, bad flags."""

import json

import pytest
from corrective_context import __version__
from corrective_context.cli import main

from paperstack.records import ResultsFormatError, load_results

CLAIMS = [
    "premise_similar_items_raise_error",
    "premise_softmax_similar_items_raise_error",
    "overcorrection_observed_softmax",
    "theory_predicts_regime",
    "overcorrection_observed",
    "selector_beats_topk",
    "selector_beats_error_probe",
    "selector_beats_all_items",
]
SMALL = ["--queries", "12", "--steps", "40"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    assert main(["demo", "--quick", "--no-progress", *SMALL, "--out", str(out)]) == 0
    return out


def test_demo_quick_writes_the_issue_claims_gated_on_the_premise(quick):
    results = load_results(quick / "results.json")  # recomputes every verdict and gate
    assert results.manifest.version == __version__
    assert [c.id for c in results.claims] == CLAIMS
    gates = {c.id: c.requires for c in results.claims}
    assert gates.pop("premise_softmax_similar_items_raise_error") == ()
    assert gates.pop("overcorrection_observed_softmax") == (
        "premise_softmax_similar_items_raise_error",
    )
    assert gates.pop("premise_similar_items_raise_error") == ()
    for requires in gates.values():
        assert requires == ("premise_similar_items_raise_error",)
    soft = results.row("top-8", "sq_error", "softmax-learner")  # the premise's own row
    assert sorted(soft.seeds) == ["0", "1", "2"]
    row = results.row("corrective-selector", "sq_error", "learner")
    assert sorted(row.seeds) == ["0", "1", "2"]  # per seed: the comparisons are paired
    assert results.row("top-k", "sq_error", "learner").seeds.keys() == row.seeds.keys()
    assert results.manifest.config["queries"] == 12
    assert (quick / "report.md").read_text().startswith("# corrective-context")


def test_tampered_rows_are_caught(quick, tmp_path):
    data = json.loads((quick / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "corrective-selector" and row["metric"] == "sq_error":
            row["seeds"] = {s: 1e6 for s in row["seeds"]}
            row["value"] = 1e6
            row["ci95"] = [1e6, 1e6]
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError):
        load_results(tmp_path / "results.json")


def test_bench_writes_the_cost_ratio(tmp_path):
    assert main(["bench", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.row("corrective-selector", "time_ratio_vs_topk").value > 1


def test_zero_tolerance_is_a_one_line_error(tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--tolerance", "0", "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--tolerance" in err
    assert not out.exists()


def test_items_that_are_a_directory_are_one_line_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["measure", "--model", str(tmp_path), "--query", "q", "--answer", "a",
              "--items", str(tmp_path), "--out", str(tmp_path / "o")])  # fmt: skip
    assert exc.value.code == 2
    assert "is a directory" in capsys.readouterr().err
