"""The demo's design: premise gating, the jailbreak premise's interval, the sweep's choice,
disjoint test and validation items; what `demo --quick` writes (claims, rows, report) and
that tampered rows break its claims."""

import json

import pytest
from opct import __version__
from opct import demo as d
from opct import evaluation as ev
from opct.world import AlignmentWorld

from paperstack.records import Claim, ResultsFormatError, Row, load_results

SEEDS = (0, 1, 2)


def _items(value, n=20):
    return {f"i{k}": value for k in range(n)}


def _rows(base_syc, base_defence, opct_syc=(0.05, 0.06, 0.04), sft_syc=(0.2, 0.25, 0.22)):
    base = {
        "sycophancy": {f"i{k}": base_syc + 0.01 * (k % 3) for k in range(20)},
        "defence_heldout": _items(base_defence),
        "defence_train": _items(0.0),
        "over_refusal": _items(0.0),
        "safety": _items(0.0),
        "capability": {f"i{k}": float(k % 5 != 0) for k in range(20)},
    }
    trained = {}
    for system, syc in (("opct", opct_syc), ("sft", sft_syc)):
        trained[system] = {
            s: {**base, "sycophancy": _items(syc[i]), "defence_heldout": _items(0.5 + 0.1 * i)}
            for i, s in enumerate(SEEDS)
        }
    return d.rows_for(base, trained, SEEDS)


def _claims(rows):
    return {c.id: c for c in d.claims_for(rows)}


def test_an_undefended_base_is_jailbreakable_by_its_wilson_interval():
    rows = _rows(base_syc=0.3, base_defence=0.0)
    proportion = next(r for r in rows if r.split == "targets")
    assert (proportion.k, proportion.n) == (0, 20)
    claim = _claims(rows)["premise_base_jailbreakable"]
    assert claim.verdict == "held"
    assert claim.method == "wilson"
    assert claim.ci95[1] < 0  # the interval of defence - 0.5 lies below 0, with width
    assert claim.ci95[1] - claim.ci95[0] > 0.1


def test_a_defended_base_is_not_jailbreakable():
    claim = _claims(_rows(base_syc=0.3, base_defence=1.0))["premise_base_jailbreakable"]
    assert claim.verdict == "not_held"


def test_claims_rest_on_their_premise():
    held = _claims(_rows(base_syc=0.3, base_defence=0.0))
    assert held["premise_base_sycophantic"].verdict == "held"
    assert held["opct_less_sycophantic_than_sft"].verdict == "held"
    gated = _claims(_rows(base_syc=0.02, base_defence=0.0))
    assert gated["premise_base_sycophantic"].verdict == "not_held"
    claim = gated["opct_less_sycophantic_than_sft"]
    assert claim.verdict == "inconclusive"
    assert claim.unmet == ("premise_base_sycophantic",)
    assert claim.ci95[1] < 0  # what was measured is still recorded
    assert gated["opct_defends_heldout_wrappers"].requires == ("premise_base_jailbreakable",)
    assert gated["sft_regresses_more"].requires == ("premise_base_capable",)


def test_the_sweep_picks_the_best_rate_that_keeps_arithmetic():
    def run(lr, syc, defence, safety, capability):
        values = {"sycophancy_train": syc, "defence_train": defence, "safety_train": safety,
                  "capability": capability}  # fmt: skip
        return {"lr": lr, "score": d.selection_score(values, base_capability=0.8), **values}

    runs = [
        run(1e-4, 0.2, 0.5, 0.5, 0.80),
        run(3e-4, 0.1, 0.9, 1.0, 0.79),
        run(1e-3, 0.0, 1.0, 1.0, 0.60),  # best consistency, but arithmetic fell: not eligible
    ]
    assert runs[2]["score"] is None
    assert d.choose_lr(runs) == 3e-4
    tie = [run(1e-4, 0.1, 0.9, 1.0, 0.8), run(3e-4, 0.1, 0.9, 1.0, 0.8)]
    assert d.choose_lr(tie) == 1e-4  # a tie goes to the smaller rate
    assert d.choose_lr([runs[2]]) is None


def test_test_and_validation_items_are_disjoint():
    world = AlignmentWorld()
    test = {(f.entity, f.attribute) for f in ev._eval_facts(world)}
    validation = {(f.entity, f.attribute) for f in ev._eval_facts(world, part="validation")}
    assert test
    assert validation
    assert not test & validation
    with pytest.raises(ValueError, match="part"):
        ev._eval_facts(world, part="train")  # type: ignore[arg-type]


def test_the_demo_config_records_both_learning_rates_and_the_sweep():
    config = d.config_dict(d.DemoConfig())
    assert {"opct_lr", "sft_lr", "validation_seed", "lr_grid", "base_recipe"} <= set(config)
    assert d.VALIDATION_SEED not in SEEDS
    assert isinstance(Row, type)


CLAIMS = {
    "premise_base_sycophantic",
    "premise_base_capable",
    "premise_base_jailbreakable",
    "sft_generalises_poorly",
    "opct_less_sycophantic_than_sft",
    "opct_defends_heldout_wrappers",
    "opct_keeps_capability",
    "sft_regresses_more",
}


def test_demo_quick_writes_the_issues_claims_from_per_seed_rows(quick_run):
    results = load_results(quick_run / "results.json")  # validates and recomputes every claim
    assert (results.manifest.package, results.manifest.version) == ("opct", __version__)
    assert {c.id for c in results.claims} == CLAIMS
    assert [c.id for c in results.claims][:3] == [
        "premise_base_sycophantic", "premise_base_capable", "premise_base_jailbreakable",
    ]  # fmt: skip
    by_id = {c.id: c for c in results.claims}
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs,
            claim.margin, requires=[by_id[r] for r in claim.requires],
        )  # fmt: skip
        assert again.verdict == claim.verdict
    assert by_id["opct_less_sycophantic_than_sft"].requires == ("premise_base_sycophantic",)
    assert results.row("base", "defence_heldout", "targets").k is not None
    for system in ("base", "opct", "sft"):
        row = results.row(system, "sycophancy", "seeds")
        assert sorted(row.seeds) == ["0", "1", "2"]  # per-seed values: claims are paired
    assert results.row("base", "sycophancy", "items").items
    assert results.manifest.config["preset"] == "micro"
    report = (quick_run / "report.md").read_text()
    assert report.startswith("# opct")
    assert "smoke run" in report
    assert (quick_run / "training_loss.png").is_file()


def test_demo_claims_follow_the_rows_not_the_code(quick_run, tmp_path):
    data = json.loads((quick_run / "results.json").read_text())
    # Tamper with a row: loading must notice that the stored claim no longer follows from it.
    for row in data["rows"]:
        if row["system"] == "opct" and row["metric"] == "sycophancy":
            row["seeds"] = {seed: 5.0 + float(seed) for seed in row["seeds"]}
            row["value"] = 6.0
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="opct_less_sycophantic_than_sft"):
        load_results(tmp_path / "results.json")


def test_a_full_disk_leaves_no_half_written_loss_figure(tmp_path, monkeypatch):
    """Issue #46: ``fig.savefig(path)`` straight to the final name left a 0-byte png on a full
    disk. The figure is now rendered in memory and written atomically: when the write fails
    (ENOSPC at the flush here) no png and no temporary is left, and the error reaches the
    caller (the CLI guard turns it into one line)."""
    import errno
    import os

    curves = {"opct": {0: [2.0, 1.5, 1.2], 1: [2.1, 1.4, 1.1]}, "sft": {0: [2.0, 1.8, 1.7]}}
    good = d.loss_figure(curves, tmp_path / "ok.png")
    assert good.read_bytes().startswith(b"\x89PNG")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "full"
    out.mkdir()
    with pytest.raises(OSError, match="No space left"):
        d.loss_figure(curves, out / "training_loss.png")
    assert list(out.iterdir()) == []
