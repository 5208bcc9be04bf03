"""The demo's claims: the planted market effects recovered, every claim id, a tampered row
refused."""

import json

import pytest
from memeeconomy.cli import main
from memeeconomy.demo import build_claims, market_rows, run_markets
from memeeconomy.events import shipped_events

from paperstack.records import ResultsFormatError, Row, load_results

CLAIMS = {
    "premise_null_population_has_no_pressure_effect",
    "premise_null_population_has_no_ack_suppression",
    "premise_deterrence_is_detectable",
    "premise_held_out_split_is_disjoint",
    "pressure_raises_harm",
    "pressure_effect_matches_planted",
    "acknowledgement_suppressed_under_pressure",
    "moderation_does_not_deter",
    "verifier_beats_zero_shot",
    "verifier_beats_zero_shot_in_distribution",
    "verifier_beats_keyword_rules_held_out",
    "premise_keyword_rules_fail_on_obfuscated_task",
    "verifier_beats_keyword_rules_obfuscated_held_out",
}


def test_market_claims_recover_the_planted_effects(tmp_path):
    stats, _ = run_markets(shipped_events(), 0, tmp_path)
    rows, _ = market_rows(stats)
    rows.append(Row(system="splits", metric="shared_events_or_agents", value=0.0, n=1))
    for system in ("memeagent", "best-zero-shot", "keyword-rules"):
        for split in ("test_id", "test_ho", "obfuscated_test_ho"):
            rows.append(Row.from_items(system, "accuracy", {i: float(i % 2) for i in range(20)},
                                       split=split))  # fmt: skip
    claims = {c.id: c for c in build_claims(rows)}
    assert set(claims) == CLAIMS
    assert claims["pressure_raises_harm"].requires == (
        "premise_null_population_has_no_pressure_effect",
    )
    assert claims["premise_deterrence_is_detectable"].held
    assert claims["acknowledgement_suppressed_under_pressure"].held
    pim = next(r for r in rows if r.system == "survival" and r.metric == "pressure_effect")
    assert pim.ci95[0] <= 0.15 <= pim.ci95[1]  # the planted size inside the interval
    steady = next(r for r in rows if r.system == "steady" and r.metric == "pressure_effect")
    assert abs(steady.value) < 0.06


@pytest.mark.slow
def test_demo_quick_writes_valid_results_with_every_claim(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "results.json")  # validates and recomputes every claim
    assert {c.id for c in results.claims} == CLAIMS
    assert (tmp_path / "ledgers").is_dir()
    data = json.loads((tmp_path / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "survival" and row["metric"] == "pressure_effect":
            row["items"] = {k: -1.0 for k in row["items"]}
            row["value"] = -1.0
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="pressure"):
        load_results(tmp_path / "results.json")


@pytest.mark.slow
def test_deterrence_reads_zero_for_the_null_populations_and_positive_for_the_deterred(tmp_path):
    # Issue #48: the survival population (planted deterrence 0) read 0.085 in a quick run. The
    # placebo-corrected measure, pooled over five fixed seeds (60 agents per population, not the
    # demo's reported seeds), must read within 0.05 of zero for both null populations and well
    # above zero for the deterred one (planted 0.25, about 0.22 after clipping at 0).
    from memeeconomy.metrics import population_rows

    pooled = {}
    for seed in (300, 301, 302, 303, 304):
        stats, _ = run_markets(shipped_events(), seed, tmp_path)
        for name, per in stats.items():
            pooled.setdefault(name, {}).update(per)
    value = {}
    for name, per in pooled.items():
        rows, _ = population_rows(name, per)
        value[name] = next(r for r in rows if r.metric == "deterrence")
    assert abs(value["survival"].value) < 0.05
    assert abs(value["steady"].value) < 0.05
    assert value["deterred"].value > 0.15
    assert value["deterred"].ci95[0] > 0.1
