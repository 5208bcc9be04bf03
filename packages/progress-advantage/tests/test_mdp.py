import numpy as np
import pytest
from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.mdp import (
    evaluate_policy,
    make_chain,
    reinforce_kl,
    sample_episodes,
    soft_value_iteration,
)
from progress_advantage.metrics import spearman


@pytest.mark.parametrize("beta", [0.05, 0.1, 1.0])
def test_log_ratio_of_exact_optimal_policy_equals_optimal_advantage(beta):
    mdp = make_chain(length=10, slip=0.1, seed=3)
    Q, V, pi = soft_value_iteration(mdp, beta)
    # A* re-derived independently: the KL-regularised value of pi* by one linear solve.
    _, _, A = evaluate_policy(mdp, pi, beta)
    live = ~mdp.terminal
    err = np.abs(beta * np.log(pi / mdp.ref) - A)[live]
    assert err.max() < 1e-9
    assert np.abs((Q - V[:, None])[live] - A[live]).max() < 1e-9


def test_transitions_are_stochastic_and_normalised():
    mdp = make_chain(length=6, slip=0.2, seed=0)
    assert np.allclose(mdp.P.sum(-1), 1.0)
    assert ((mdp.P[mdp.chain_states] > 0).sum(-1) > 1).all()  # slip: several successors


def test_optimal_policy_is_not_the_reference():
    mdp = make_chain(length=8, seed=1)
    _, _, pi = soft_value_iteration(mdp, 0.1)
    _, _, A = evaluate_policy(mdp, pi, 0.1)
    # The pit action has the lowest advantage in every chain state.
    pit_action = (mdp.P[mdp.chain_states, :, mdp.pit]).argmax(1)
    assert (A[mdp.chain_states].argmin(1) == pit_action).mean() > 0.9


def test_reinforce_kl_log_ratio_correlates_with_exact_advantage():
    mdp = make_chain(length=8, seed=0)
    beta = 0.1
    Q, V, _ = soft_value_iteration(mdp, beta)
    pi = reinforce_kl(mdp, beta, iterations=300, seed=0)
    rho = spearman(
        beta * np.log(pi / mdp.ref)[mdp.chain_states], (Q - V[:, None])[mdp.chain_states]
    )
    assert rho > 0.7


def test_episodes_record_the_first_step_into_the_pit():
    mdp = make_chain(length=6, seed=0)
    ep = sample_episodes(mdp, mdp.ref, 200, 10, np.random.default_rng(0))
    fell = ep.first_pit >= 0
    assert fell.any()
    rows = np.flatnonzero(fell)
    t = ep.first_pit[rows]
    assert (ep.states[rows, t] != mdp.pit).all()
    nxt = np.minimum(t + 1, 9)
    assert (ep.states[rows, nxt][t < 9] == mdp.pit).all()
    assert not (ep.success & fell).any()


def test_rejects_bad_parameters():
    with pytest.raises(ProgressAdvantageError, match="gamma"):
        make_chain(gamma=1.0)
    with pytest.raises(ProgressAdvantageError, match="beta"):
        soft_value_iteration(make_chain(length=4), 0.0)
