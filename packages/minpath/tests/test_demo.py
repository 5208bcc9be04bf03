"""demo --quick: every claim the issue names, per-seed rows; bad numbers and models in one line."""

import pytest
from minpath import __version__
from minpath.cli import main

from paperstack.records import load_results

# the tests here fine-tune in this process: see conftest.frozen_heap
pytestmark = pytest.mark.usefixtures("frozen_heap")

CLAIMS = {
    "premise_raw_model_solves_task",
    "minpath_cuts_30pct",
    "minpath_keeps_accuracy",
    "minpath_beats_baselines_at_ratio",
    "minpath_beats_truncation",
    "minpath_beats_random_drop",
    "minpath_beats_tokenskip",
    "minpath_beats_length_budget",
} | {
    f"minpath_beats_{b}_at_{r}pct"
    for b in ("truncation", "random_drop", "tokenskip", "length_budget")
    for r in (30,)  # --quick draws only the 0.3 point; the full demo adds 0.5, 0.7, 0.9
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


def test_demo_quick_draws_each_baselines_accuracy_vs_ratio_curve(quick):
    """Issue #51: the baselines were shown only at MinPath's own ratio (about 0.22, where they
    collapse); each is now trained (length-budget: decoded) along a curve of token ratios and
    MinPath is judged against the curve points, per seed."""
    results = load_results(quick / "results.json")
    for b in ("truncation", "random-drop", "tokenskip", "length-budget"):
        ratios: list[float] = []
        row = results.row(f"{b}@0.3", "accuracy", "seeds")
        assert sorted(row.seeds) == ["0", "1", "2"]
        if b != "length-budget":
            ratios.append(results.row(f"{b}@0.3", "train_token_ratio", "seeds").value)
            ratios.append(results.row(b, "train_token_ratio", "seeds").value)
            assert ratios[0] > ratios[1]  # the curve point keeps more than MinPath's ratio
    claim = next(c for c in results.claims if c.id == "minpath_beats_tokenskip_at_30pct")
    assert claim.requires == ("premise_raw_model_solves_task",)
    assert "Accuracy-vs-ratio curves" in (quick / "report.md").read_text()


def test_curve_sets_keep_more_of_each_trace_as_the_ratio_grows():
    from minpath.demo import QUICK, compress_traces, curve_sets
    from minpath.traces import verbose_traces

    comp = compress_traces(verbose_traces(20, seed=3), QUICK.task)
    sets = curve_sets(comp, 0, (0.3, 0.5, 0.7, 0.9))
    raw = sum(len(t.cot) for t in comp.traces)
    for b in ("truncation", "random-drop", "tokenskip"):
        kept = [sum(map(len, sets[f"{b}@{r:g}"])) / raw for r in (0.3, 0.5, 0.7, 0.9)]
        assert kept == sorted(kept), (b, kept)
        assert kept[0] < 0.45, (b, kept)
        assert kept[-1] > 0.75, (b, kept)


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
