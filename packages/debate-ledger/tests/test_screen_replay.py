from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from debate_ledger.ledger import from_rows, transitions
from debate_ledger.replay import early_stop, freeze, probe_gated_freeze, replay_all, score
from debate_ledger.schemas import LedgerError, read_ledger
from debate_ledger.screen import (
    RISK_SIGN,
    _ranks,
    associate,
    combined_score,
    holm,
    partial_exact_p,
    partial_rho,
    probe_values,
    rho_interval,
    spearman_exact_p,
    spearman_p,
    spearman_p_bruteforce,
    spearman_rho,
)


def test_published_g7_case_gives_exact_p_0123():
    x, y = np.arange(1, 8), np.array([2, 1, 4, 3, 5, 7, 6])
    assert spearman_rho(x, y) == pytest.approx(1 - 36 / 336)
    assert spearman_exact_p(x, y) == pytest.approx(62 / 5040, abs=1e-15)


def test_exact_p_equals_bruteforce_with_ties(rng):
    for g in (4, 5, 6):
        x = rng.integers(0, 3, g).astype(float)
        y = rng.normal(size=g)
        assert spearman_exact_p(x, y) == pytest.approx(spearman_p_bruteforce(x, y), abs=1e-12)


def test_exact_p_refuses_too_few_families_and_goes_monte_carlo_above_ten(rng):
    with pytest.raises(LedgerError, match="at least 3 families"):
        spearman_exact_p(np.arange(2), np.arange(2))
    with pytest.raises(LedgerError, match="Monte Carlo above 10"):
        spearman_exact_p(np.arange(12), np.arange(12))
    x = np.arange(12.0)
    y = x + rng.normal(scale=6.0, size=12)
    pv = spearman_p(x, y, resamples=50_000)
    assert pv.method == "monte-carlo"
    assert 0 < pv.se < 0.005
    assert not math.isnan(pv.p)
    # against the exact null distribution: n = 12 permutations are too many to enumerate
    # here, so check the Monte-Carlo machinery at G = 9 against the exact p
    x9, y9 = x[:9], y[:9]
    exact = spearman_p(x9, y9)
    from debate_ledger import screen

    mc = screen._perm_indices(9, 100_000, 1)[0]
    rx, ry = _ranks(x9), _ranks(y9)
    cx, cy = rx - rx.mean(), ry - ry.mean()
    rho = (cy[mc] @ cx) / math.sqrt(float((cx * cx).sum() * (cy * cy).sum()))
    mc_p = float(np.mean(np.abs(rho) >= abs(spearman_rho(x9, y9)) - 1e-9))
    assert abs(mc_p - exact.p) < 4 * math.sqrt(exact.p * (1 - exact.p) / 100_000) + 1e-4


def test_partial_rho_matches_the_formula(rng):
    x, y, z = rng.normal(size=(3, 8))
    rxy, rxz, ryz = spearman_rho(x, y), spearman_rho(x, z), spearman_rho(y, z)
    expected = (rxy - rxz * ryz) / np.sqrt((1 - rxz**2) * (1 - ryz**2))
    assert partial_rho(x, y, z) == pytest.approx(expected)


def test_partial_exact_p_equals_a_plain_enumeration(rng):
    x, y, z = rng.normal(size=(3, 6))
    obs = abs(partial_rho(x, y, z))
    hits = sum(abs(partial_rho(x, np.array(p), z)) >= obs - 1e-9 for p in itertools.permutations(y))
    assert partial_exact_p(x, y, z).p == pytest.approx(hits / 720, abs=1e-12)


def test_partial_p_is_not_the_t_test():
    """The paper's partial rho 0.767 (G = 7) has p = 0.0877; the t test with G - 3 = 4 dof
    gives 0.075 (why the package uses a permutation p)."""
    from scipy import stats

    r = 0.767
    t = r * math.sqrt(4 / (1 - r * r))
    assert 2 * stats.t.sf(t, 4) == pytest.approx(0.075, abs=0.001)


def test_holm():
    assert holm([0.01, 0.04, 0.03, float("nan")])[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(holm([0.01, float("nan")])[1])


def test_rho_interval_is_fisher_z_with_the_bonett_wright_error():
    lo, hi = rho_interval(0.893, 7)
    se = math.sqrt((1 + 0.893**2 / 2) / 4)
    assert math.atanh(hi) - math.atanh(0.893) == pytest.approx(1.959964 * se, rel=1e-6)
    assert lo < 0.893 < hi
    assert rho_interval(0.5, 4, controls=1) is None  # G - 3 - 1 = 0 dof


def test_combined_score_is_the_mean_signed_rank():
    probes = {p: np.array([1.0, 2.0, 3.0]) for p in RISK_SIGN}
    probes["resample_consistency"] = np.array([np.nan, 1.0, 2.0])  # dropped: not everywhere
    score, used = combined_score(probes)
    assert "resample_consistency" not in used
    signs = [RISK_SIGN[p] for p in used]
    assert score == pytest.approx(np.array([1.0, 2.0, 3.0]) * np.mean(signs))


def test_screen_of_a_ledger(small_ledger):
    arr = from_rows(read_ledger(small_ledger))
    tr = transitions(arr.answers, arr.gold)
    sc = associate(arr, tr)
    assert sc.families == ("fa", "fb", "fc")
    assert sc.combined.p_method == "exact"
    assert len(sc.probes) == 8
    assert all(a.p_holm >= a.p or math.isnan(a.p) for a in sc.probes)


def test_replay_utility_splits_into_both_sides(small_ledger):
    arr = from_rows(read_ledger(small_ledger))
    tr = transitions(arr.answers, arr.gold)
    f0 = score("freeze@0", freeze(tr, 0), tr)
    assert f0.collapses_prevented == int(tr.collapse.sum())
    assert f0.corrections_lost == int(tr.correction.sum())
    assert f0.utility == int(tr.collapse.sum()) - int(tr.correction.sum())
    results, gates = replay_all(arr, tr, probe_values(arr))
    for r, c_pi in results:
        assert r.utility == r.gains - r.losses
        assert r.utility == int(c_pi.sum()) - int(tr.correct[:, -1].sum())
    assert set(gates["youden"]) == set(arr.models)  # fit leave-one-model-out
    assert early_stop(arr, tr).shape == tr.correct[:, -1].shape


def test_the_gate_of_a_model_ignores_that_models_outcomes(small_ledger):
    """Leave-one-model-out: changing one model's outcomes leaves its own gate unchanged."""
    arr = from_rows(read_ledger(small_ledger))
    tr = transitions(arr.answers, arr.gold)
    values = probe_values(arr)["agreement"]
    _, gates = probe_gated_freeze(arr, tr, values)
    held = arr.model == 0
    flipped = tr.__class__(**{**tr.__dict__, "collapse": np.where(held, ~tr.collapse,
                                                                   tr.collapse)})  # fmt: skip
    _, gates2 = probe_gated_freeze(arr, flipped, values)
    assert gates2[arr.models[0]] == gates[arr.models[0]]


def test_probes_are_bounded(small_ledger):
    arr = from_rows(read_ledger(small_ledger))
    p = probe_values(arr)
    for name in ("agreement", "entropy", "unanimity", "tie", "parse_failure",
                 "resample_consistency", "position_bias"):  # fmt: skip
        assert np.all((p[name] >= 0) & (p[name] <= 1)), name


def test_position_bias_is_measured_against_where_the_gold_was_shown(tmp_path):
    """A model that always answers right has no position bias, whatever the gold letters; one
    that answers the first shown option half the time has a large one."""
    from debate_ledger.families import Profile, ScriptedDebater
    from debate_ledger.questions import shipped_mcq
    from debate_ledger.runner import DebateConfig, run_debates

    qs = shipped_mcq()
    path = tmp_path / "l.jsonl"
    cfg = DebateConfig(agents=3, rounds=1, seeds=(0, 1, 2))
    for name, bias, acc in (("perfect", 0.0, 1.0), ("biased", 0.5, 0.6), ("plain", 0.0, 0.6)):
        agent = ScriptedDebater.for_questions(Profile(name, acc, 0.0, position_bias=bias), qs)
        run_debates(agent, qs, path, family=name, config=cfg)
    arr = from_rows(read_ledger(path))
    bias = {m: probe_values(arr)["position_bias"][arr.model == i][0]
            for i, m in enumerate(arr.models)}  # fmt: skip
    assert bias["scripted/perfect"] == 0.0
    assert bias["scripted/biased"] > 0.25 > 0.1 > bias["scripted/plain"]
