import numpy as np
import pytest
from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.mdp import (
    evaluate_policy,
    make_chain,
    objective_gap,
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
    # The action into the trap has the lowest advantage in every chain state.
    pit_action = (mdp.P[mdp.chain_states, :, mdp.trap]).argmax(1)
    assert (A[mdp.chain_states].argmin(1) == pit_action).mean() > 0.9


def test_reinforce_kl_converges_to_the_kl_optimum_by_its_stopping_rule():
    mdp = make_chain(length=8, seed=0)
    beta = 0.1
    Q, V, _ = soft_value_iteration(mdp, beta)
    pi, conv = reinforce_kl(mdp, beta, max_iterations=3000, seed=0, tol=2e-3)
    assert conv.converged
    assert conv.gap <= 2e-3
    assert conv.iterations % 100 == 0  # the gap is checked every 100 iterations
    assert objective_gap(mdp, pi, beta, V) == conv.gap
    assert objective_gap(mdp, mdp.ref, beta, V) > 0.1  # the reference is far from optimal
    rho = spearman(
        beta * np.log(pi / mdp.ref)[mdp.chain_states], (Q - V[:, None])[mdp.chain_states]
    )
    assert rho > 0.9


def test_reinforce_kl_reports_the_cap_when_it_does_not_converge():
    mdp = make_chain(length=8, seed=0)
    _, conv = reinforce_kl(mdp, 0.1, max_iterations=50, seed=0, tol=1e-9)
    assert not conv.converged
    assert conv.iterations == 50


def test_pit_is_terminal_and_the_trap_leads_only_there():
    mdp = make_chain(length=6, seed=0)
    assert mdp.terminal[mdp.pit]
    assert mdp.terminal[mdp.goal]
    assert not mdp.terminal[mdp.trap]
    assert np.allclose(mdp.P[mdp.trap, :, mdp.trap] + mdp.P[mdp.trap, :, mdp.pit], 1.0)
    _, V, _ = soft_value_iteration(mdp, 0.1)
    assert V[mdp.trap] == pytest.approx(0.0, abs=1e-12)  # a dead end: no reward reachable


def test_confident_wrong_reference_favours_the_trap_in_a_third_of_states():
    mdp = make_chain(length=9, seed=2, reference="confident-wrong")
    wrong = mdp.meta["wrong_states"]
    assert len(wrong) == 3
    into_trap = mdp.P[mdp.chain_states, :, mdp.trap].argmax(1)
    assert np.allclose(mdp.ref[wrong, into_trap[wrong]], 0.8)
    others = [s for s in range(9) if s not in wrong]
    random_ref = make_chain(length=9, seed=2, reference="random").ref
    assert np.allclose(mdp.ref[others], random_ref[others])
    assert np.allclose(mdp.ref.sum(1), 1.0)


def test_episodes_record_the_step_into_the_trap_and_end_in_the_pit():
    mdp = make_chain(length=6, seed=0)
    ep = sample_episodes(mdp, mdp.ref, 400, 12, np.random.default_rng(0))
    fell = np.flatnonzero(ep.first_error >= 0)
    assert fell.size
    t = ep.first_error[fell]
    assert (ep.states[fell, t] != mdp.trap).all()
    assert not (ep.success[fell]).any()
    # after the error the episode runs on in the trap for a random number of steps
    steps_after = ep.alive[fell].sum(1) - t - 1
    assert len(set(steps_after.tolist())) > 2
    # nothing is alive in the pit (terminal): no scorer sees post-failure steps
    assert not (ep.alive & (ep.states == mdp.pit)).any()


def test_rejects_bad_parameters():
    with pytest.raises(ProgressAdvantageError, match="gamma"):
        make_chain(gamma=1.0)
    with pytest.raises(ProgressAdvantageError, match="beta"):
        soft_value_iteration(make_chain(length=4), 0.0)
    with pytest.raises(ProgressAdvantageError, match="reference"):
        make_chain(reference="sometimes")
