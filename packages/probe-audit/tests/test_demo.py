"""The demo's claims (every id, the checkers' precision, a tampered row refused), its own
bad numbers, and the size claims' premise."""

import json

import pytest
from probe_audit.cli import main

from paperstack.records import ResultsFormatError, load_results

CLAIMS = {
    "premise_zero_shot_finds_bugs",
    "premise_zero_shot_headroom",
    "trained_beats_zero_shot",
    "dpo_beats_zero_shot",
    "gflownet_beats_zero_shot",
    "trained_beats_scripted",
    "trained_broader_than_zero_shot",
    "gflownet_most_diverse",
    "gflownet_more_diverse_than_dpo",
    "no_false_violations",
    "premise_lm_target_has_bugs",
    "premise_auditor_smaller",
    "smaller_auditor_finds_bugs",
    "smaller_zero_shot_finds_bugs",
}
# A small demo: an auditor pre-trained a few steps, one training step per objective.
SMALL = ["--quick", "--pretrain-steps", "3", "--train-steps", "1", "--eval-per-domain", "1",
         "--plausibility", "trigram", "--turn-tokens", "8", "--seeds", "0,1", "--target-steps", "2",
         "--no-progress"]  # fmt: skip


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", *SMALL, "--out", str(out)]) == 0
    return out


def test_demo_writes_valid_results_with_the_claims(demo_dir):
    results = load_results(demo_dir / "results.json")  # validates and recomputes every claim
    assert {c.id for c in results.claims} == CLAIMS
    assert [c.id for c in results.claims][:2] == [
        "premise_zero_shot_finds_bugs",
        "premise_zero_shot_headroom",
    ]
    row = results.row("grpo", "violations_per_episode", "eval")
    assert sorted(row.seeds) == ["0", "1"]  # per-seed values: claims are paired
    systems = {r.system for r in results.rows}
    assert {"zero-shot", "grpo", "dpo", "gflownet", "random-templates"} <= systems
    assert sum(s.startswith("scripted:") for s in systems) == 5
    # the tiny-LM target arm: its bug rate, and the two smaller auditors against it per seed
    assert results.row("lm-target", "bug_rate", "eval").n > 0
    lm_params = results.row("lm-target", "parameters").value
    assert lm_params > results.row("zero-shot", "parameters").value
    for system in ("zero-shot@lm-target", "grpo@lm-target"):
        assert sorted(results.row(system, "bugs_found", "eval").seeds) == ["0", "1"]
    broader = next(c for c in results.claims if c.id == "trained_broader_than_zero_shot")
    assert broader.requires == ("premise_zero_shot_finds_bugs", "premise_zero_shot_headroom")
    assert sorted(results.row("grpo", "distinct_bugs", "eval").seeds) == ["0", "1"]
    assert results.manifest.config["auditor_corpus"] == "strategy-families"
    claim = next(c for c in results.claims if c.id == "smaller_auditor_finds_bugs")
    assert claim.requires == ("premise_lm_target_has_bugs", "premise_auditor_smaller")
    size = next(c for c in results.claims if c.id == "premise_auditor_smaller")
    assert size.exact  # the shipped auditor is the smaller model
    assert size.verdict == "held"
    card = json.loads((demo_dir / "cost_card.json").read_text())
    assert card["calls"] > 0
    assert card["completion_tokens"] > 0
    assert (demo_dir / "report.md").read_text().startswith("# probe-audit")


def test_checkers_report_no_false_violation(demo_dir):
    results = load_results(demo_dir / "results.json")
    claim = next(c for c in results.claims if c.id == "no_false_violations")
    assert claim.verdict == "held"
    assert results.row("checkers", "false_violations", "eval").value == 0.0


def test_tampered_rows_are_rejected(demo_dir, tmp_path):
    data = json.loads((demo_dir / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "checkers":
            row["value"] = 3.0
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="no_false_violations"):
        load_results(tmp_path / "results.json")


@pytest.mark.parametrize(
    "flag",
    ["--train-steps", "--eval-per-domain", "--pretrain-steps", "--turn-tokens", "--target-steps"],
)
def test_impossible_numbers_are_refused(tmp_path, capsys, flag):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--out", str(tmp_path / "out"), flag, "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert flag in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_size_claims_rest_on_the_auditor_being_smaller():
    """The 'smaller auditor' claims are judged only when the auditor really has fewer
    parameters than the target (an exact premise from the two ``parameters`` rows): a larger
    ``--model`` auditor leaves them inconclusive, naming the premise, however many bugs it
    finds."""
    from probe_audit.cli import lm_target_claims

    from paperstack.records import Row

    def rows(auditor: int, target: int) -> list[Row]:
        return [
            Row.proportion("lm-target", "bug_rate", 40, 41, split="eval"),
            Row.proportion("grpo@lm-target", "seeds_finding_a_bug", 5, 5, split="eval"),
            Row.proportion("zero-shot@lm-target", "seeds_finding_a_bug", 5, 5, split="eval"),
            Row(system="lm-target", metric="parameters", value=float(target)),
            Row(system="zero-shot", metric="parameters", value=float(auditor)),
        ]

    small = {c.id: c for c in lm_target_claims(rows(100, 400), 100, 400)}
    assert small["premise_auditor_smaller"].verdict == "held"
    big = {c.id: c for c in lm_target_claims(rows(500, 400), 500, 400)}
    assert big["premise_auditor_smaller"].verdict == "not_held"
    for cid in ("smaller_auditor_finds_bugs", "smaller_zero_shot_finds_bugs"):
        assert small[cid].requires == big[cid].requires
        assert big[cid].verdict == "inconclusive"
        assert big[cid].unmet == ("premise_auditor_smaller",)
        assert small[cid].unmet == ()
