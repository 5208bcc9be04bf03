"""demo --quick: every claim the issue names, per-seed rows; bad numbers and models in one line."""

import pytest
from minpath import __version__
from minpath.cli import main

from paperstack.records import load_results

CLAIMS = {
    "premise_raw_model_solves_task",
    "minpath_cuts_30pct",
    "minpath_keeps_accuracy",
    "minpath_beats_baselines_at_ratio",
    "minpath_beats_truncation",
    "minpath_beats_random_drop",
    "minpath_beats_tokenskip",
    "minpath_beats_length_budget",
}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    assert main(["demo", "--quick", "--no-progress", "--out", str(out)]) == 0
    return out


def test_demo_quick_writes_every_claim_the_issue_names(quick):
    results = load_results(quick / "results.json")  # validates and recomputes every claim
    assert results.manifest.package == "minpath"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    premise = "premise_raw_model_solves_task"
    for claim in results.claims:
        if claim.id != premise:
            assert claim.requires == (premise,)
    row = results.row("minpath", "accuracy", "seeds")
    assert sorted(row.seeds) == ["0", "1", "2"]  # per-seed values: claims are paired
    assert (quick / "report.md").read_text().startswith("# minpath")


def _one_line_error(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_demo_bad_numbers_and_missing_model_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:  # argparse: its usage, then one error line
        main(["demo", "--quick", "--steps", "0", "--out", str(tmp_path / "a")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith("argument --steps: must be >= 1, got 0")
    err = _one_line_error(capsys, ["demo", "--quick", "--model", str(tmp_path / "none"),
                                   "--out", str(tmp_path / "b")])  # fmt: skip
    assert "none" in err
    assert not (tmp_path / "b").exists()


def test_demo_with_a_truncated_model_folder_is_one_line(tmp_path, capsys):
    from paperstack import tiny

    folder = tmp_path / "model"
    tok = tiny.build_tokenizer()
    tiny.build_model("micro", tok).save_pretrained(folder)
    tok.save_pretrained(folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    err = _one_line_error(capsys, ["demo", "--quick", "--model", str(folder),
                                   "--out", str(tmp_path / "c")])  # fmt: skip
    assert "model.safetensors" in err
