import numpy as np
import pytest
from debate_ledger.ledger import from_rows, transitions
from debate_ledger.replay import early_stop, freeze, replay_all, score
from debate_ledger.schemas import LedgerError, read_ledger
from debate_ledger.screen import (
    partial_rho,
    probe_values,
    spearman_exact_p,
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


def test_exact_p_refuses_too_few_or_many_families():
    with pytest.raises(LedgerError, match=r"3\.\.10 families"):
        spearman_exact_p(np.arange(2), np.arange(2))


def test_partial_rho_matches_the_formula(rng):
    x, y, z = rng.normal(size=(3, 8))
    rxy, rxz, ryz = spearman_rho(x, y), spearman_rho(x, z), spearman_rho(y, z)
    expected = (rxy - rxz * ryz) / np.sqrt((1 - rxz**2) * (1 - ryz**2))
    assert partial_rho(x, y, z) == pytest.approx(expected)


def test_replay_utility_splits_into_both_sides(small_ledger):
    arr = from_rows(read_ledger(small_ledger))
    tr = transitions(arr.answers, arr.gold)
    f0 = score("freeze@0", freeze(tr, 0), tr)
    assert f0.collapses_prevented == int(tr.collapse.sum())
    assert f0.corrections_lost == int(tr.correction.sum())
    assert f0.utility == int(tr.collapse.sum()) - int(tr.correction.sum())
    results, gates = replay_all(arr, tr, probe_values(arr))
    for r in results:
        assert r.utility == r.gains - r.losses
    assert set(gates["youden"]) == set(arr.families)
    base = tr.correct[:, -1]
    es = early_stop(arr, tr)
    assert es.shape == base.shape


def test_probes_are_bounded(small_ledger):
    arr = from_rows(read_ledger(small_ledger))
    p = probe_values(arr)
    for name in (
        "agreement",
        "entropy",
        "unanimity",
        "tie",
        "parse_failure",
        "resample_consistency",
    ):
        assert np.all((p[name] >= 0) & (p[name] <= 1)), name
