import json

import numpy as np
from pall_lns.evolve import Candidate, choose_ensemble, phase_utility
from pall_lns.operators import OperatorSpec
from pall_lns.train import fit_selector, soft_targets


def test_ensemble_keeps_operators_that_win_different_phases():
    # op 0 wins instance A early, op 1 wins instance B early, op 2 is mediocre on both
    T = 9.0
    a = Candidate(OperatorSpec("random"), [[(0.5, 10.0)], [(8.0, 10.0)]], [10.0, 10.0])
    b = Candidate(OperatorSpec("bfs"), [[(8.0, 10.0)], [(0.5, 10.0)]], [10.0, 10.0])
    c = Candidate(OperatorSpec("block"), [[(5.0, 20.0)], [(5.0, 20.0)]], [20.0, 20.0])
    chosen, util, _ = choose_ensemble([a, b, c], T, k=2)
    assert sorted(chosen) == [0, 1]
    assert util.shape == (3, 2 * 3)


def test_phase_utility_is_one_minus_phase_integral():
    u = phase_utility([(0.0, 10.0)], 10.0, 9.0, 3)
    assert np.allclose(u, 1.0)
    u = phase_utility([(4.5, 10.0)], 10.0, 9.0, 3)
    assert np.allclose(u, [0.0, 0.5, 1.0])


def test_soft_targets_follow_rewards():
    q = soft_targets(np.array([[0.0, 1.0, 0.5], [0.0, 0.0, 0.0]]))
    assert q[0].argmax() == 1
    assert np.allclose(q[1], 1 / 3)


def test_selector_learns_a_context_dependent_oracle_rule():
    rng = np.random.default_rng(0)
    ops = [OperatorSpec("random"), OperatorSpec("bfs")]
    records = []
    for _ in range(200):
        phi = np.r_[1.0, rng.random(3)]
        early = phi[1] < 0.5  # oracle: op 0 early in the search, op 1 late
        rewards = [1.0, 0.1] if early else [0.1, 1.0]
        records.append({"features": phi.tolist(), "rewards": rewards, "label": int(not early)})
    sel, stats = fit_selector(records, ops, steps=1500)
    assert stats["accuracy"] > 0.9
    blob = json.dumps(sel.to_json())
    assert "pall-lns/selector-v1" in blob
