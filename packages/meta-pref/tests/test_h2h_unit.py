"""The head-to-head claims are judged over training seeds (issue: 0.3's per-item bootstrap held
a claim whose per-seed win rates were 0.635, 0.223 and 0.963), and the declaration says so."""

import re

import pytest
from meta_pref import demo
from meta_pref.cli import main

from paperstack import preregistration
from paperstack.records import Claim

H2H = ("meta_dpo_beats_joint_head_to_head_at_100", "meta_dpo_beats_joint_head_to_head_far")
PROMPTS = 1000  # per seed: each seed's rate is exact in thousandths


def _per_seed(rates: dict[int, float]) -> dict[int, dict[str, dict]]:
    """What ``run_seed`` returns for each seed, on made-up numbers: both premises clearly held
    (1000 pairs far above 100, with some spread across seeds), and a head-to-head item list
    whose mean is the seed's given rate, at both targets."""
    out = {}
    for seed, rate in rates.items():
        jitter = 0.01 * (seed % 3)
        values: dict[str, dict] = {}
        for target in ("near", "far"):
            for n, base in ((25, 0.52), (100, 0.55), (400, 0.70), (1000, 0.80)):
                values[f"rm_accuracy|{target}/{n}"] = {
                    "meta": base + 0.01 + jitter,
                    "joint": base + jitter / 2,
                    "target-only": base + jitter * n / 500,  # headroom varies by seed
                }
            values[f"dpo_winrate|{target}/100"] = {
                "meta": 0.6 + jitter, "joint": 0.5 - jitter, "target-only": 0.5,
            }  # fmt: skip
            wins = round(rate * PROMPTS)
            values[f"items:dpo_h2h_winrate|{target}/100"] = {
                i: 1.0 if i < wins else 0.0 for i in range(PROMPTS)
            }
        out[seed] = values
    return out


def _claims(rates: dict[int, float]) -> tuple[dict[str, Claim], list]:
    rows = demo.rows_for(_per_seed(rates))
    return {c.id: c for c in demo.claims_for(rows, demo.FULL)}, rows


def test_the_three_seed_head_to_head_of_the_0_3_run_is_inconclusive_over_seeds():
    claims, rows = _claims({0: 0.635, 1: 0.223, 2: 0.963})
    assert claims["premise_headroom"].held
    assert claims["premise_headroom_far"].held
    for cid in H2H:
        c = claims[cid]
        assert c.lhs.metric == "dpo_h2h_winrate_per_seed"
        assert (c.method, c.n) == ("t", 3)  # three training seeds, not 3000 judgements
        assert c.lhs_value == pytest.approx(0.607, abs=1e-9)
        # t over seeds: 0.607 ± 4.303 x 0.3705 / sqrt(3), minus 0.5 (the README's [-0.31, 1.53])
        assert c.ci95 == pytest.approx((-0.8134, 1.0274), abs=1e-3)
        assert c.verdict == "inconclusive"
    # the pooled per-item row is still reported, and its bootstrap over the 3000 judgements
    # alone would have called the same numbers held: the unit is what changed the verdict
    pooled = next(r for r in rows if r.metric == "dpo_h2h_winrate" and r.split == "near/100")
    assert len(pooled.items) == 3 * PROMPTS
    old = Claim.compare("pooled", "", rows, pooled.key, "gt", 0.5)
    assert (old.method, old.verdict) == ("bootstrap", "held")


def test_five_consistent_seeds_hold_the_head_to_head():
    claims, _ = _claims({0: 0.62, 1: 0.64, 2: 0.63, 3: 0.61, 4: 0.65})
    for cid in H2H:
        c = claims[cid]
        assert (c.method, c.n) == ("t", 5)
        assert c.lhs_value == pytest.approx(0.63)
        assert c.ci95[0] > 0.0  # 0.63 - 0.5 ± 2.776 x 0.0158 / sqrt(5)
        assert c.verdict == "held"


def test_five_seeds_split_around_one_half_are_not_held_as_a_win():
    claims, _ = _claims({0: 0.40, 1: 0.45, 2: 0.50, 3: 0.55, 4: 0.35})
    for cid in H2H:
        assert claims[cid].verdict == "inconclusive"  # mean 0.45, interval straddles 0.5


def test_the_code_makes_exactly_the_declared_claims_on_the_declared_seeds(capsys):
    path = preregistration.declaration_file(demo.claims_for)
    assert path is not None
    declared = preregistration.parse(path.read_text(encoding="utf-8"))
    rates = {0: 0.62, 1: 0.64, 2: 0.63, 3: 0.61, 4: 0.65}
    toy, _ = _claims(rates)
    assert preregistration.deviations(list(toy.values()), declared["demo"]) == []
    rows = demo.rows_for(_per_seed(rates))
    real = demo.real_claims_for(rows, demo.dataclasses.replace(demo.REAL, sizes=(100, 400)))
    assert preregistration.deviations(real, declared["demo --real"]) == []
    assert real[-1].lhs.metric == "dpo_h2h_winrate_per_seed"
    # both tables declare seeds 0-4, which is what a plain `meta-pref demo [--real]` runs
    assert declared["demo"].seeds == declared["demo --real"].seeds == (0, 1, 2, 3, 4)
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert re.search(r"default: 5 seed\(s\) from --seed", help_text), help_text
