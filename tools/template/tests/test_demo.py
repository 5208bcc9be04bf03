"""The demo's own promises: its claims, rows and seeds; the flags every command line keeps
(--help, --out, --model, SIGTERM) are checked by the conformance suite (test_conformance.py)."""

import json

import pytest
from paperstack.records import Claim, ResultsFormatError, load_results

from tmpl_import import __version__
from tmpl_import.cli import main


def test_demo_quick_writes_valid_results_with_claims_from_rows(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "results.json")  # validates and recomputes every claim
    assert results.manifest.package == "tmpl-dist"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == {
        "premise_outliers_hurt_the_mean",
        "robust",
        "clean-cost",
    }
    by_id = {c.id: c for c in results.claims}
    assert by_id["robust"].requires == ("premise_outliers_hurt_the_mean",)  # rests on the premise
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin,
            requires=[by_id[p] for p in claim.requires],
        )  # fmt: skip
        assert again.verdict == claim.verdict
    row = results.row("median-of-means", "abs_error", "contaminated")
    assert row.seeds is not None
    assert sorted(row.seeds) == ["0", "1", "2"]  # per-seed values: claims are paired
    assert results.manifest.config["trials"] == 40
    assert (tmp_path / "report.md").read_text().startswith("# tmpl-dist")


def test_demo_claims_follow_the_rows_not_the_code(tmp_path):
    main(["demo", "--quick", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "results.json").read_text())
    # Tamper with a row: loading must notice that the stored claim no longer follows from it.
    for row in data["rows"]:
        if row["system"] == "median-of-means" and row["split"] == "contaminated":
            row["seeds"] = {seed: 1e6 for seed in row["seeds"]}  # a consistent, different row
            row["value"] = 1e6
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="robust"):
        load_results(tmp_path / "results.json")


def test_demo_is_deterministic_by_seed(tmp_path):
    main(["demo", "--quick", "--seed", "3", "--out", str(tmp_path / "a")])
    main(["demo", "--quick", "--seed", "3", "--out", str(tmp_path / "b")])
    rows_a = load_results(tmp_path / "a").rows
    rows_b = load_results(tmp_path / "b").rows
    assert [r.value for r in rows_a] == [r.value for r in rows_b]


def test_failed_input_leaves_no_output_folder(tmp_path, capsys):
    data = tmp_path / "short.txt"
    data.write_text("1.0\n2.0\n")
    out = tmp_path / "out"
    with pytest.raises(SystemExit):
        main(["demo", "--out", str(out), "--dataset", str(data)])
    assert "needs at least" in capsys.readouterr().err
    assert not out.exists()


def test_bad_dataset_is_a_one_line_error(tmp_path, capsys):
    data = tmp_path / "data.txt"
    data.write_text("1.0\nnot-a-number\n")
    with pytest.raises(SystemExit):
        main(["demo", "--out", str(tmp_path / "out"), "--dataset", str(data)])
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(data) in err


def test_bench_writes_ratios(tmp_path):
    assert main(["bench", "--out", str(tmp_path), "--repeats", "5"]) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.row("sample-mean", "time_ratio").value == 1.0
