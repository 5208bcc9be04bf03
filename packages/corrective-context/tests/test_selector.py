import numpy as np
import pytest
from corrective_context import CorrectiveContextError, SelectorConfig, greedy_proper, select
from corrective_context.analytic import LinearAttentionICL, sample_pool, sample_task
from corrective_context.baselines import top_k


def test_greedy_stops_before_the_correction_turns_over():
    e = np.array([1.0, 0.0])
    corrections = np.tile([-0.6, 0.0], (6, 1))  # each item removes 60% of the error
    assert len(greedy_proper(corrections, e, budget=6)) == 2  # rho 1.2; a third gives 1.8
    assert greedy_proper(np.tile([0.5, 0.0], (3, 1)), e, budget=3) == []  # all point away


def test_selector_beats_top8_on_the_analytic_layer():
    rng = np.random.default_rng(1)
    prior = rng.standard_normal((2, 8)) / np.sqrt(8)
    layer = LinearAttentionICL(prior, eta=1 / 16)
    sel_err, top_err = [], []
    for _ in range(40):
        task = sample_task(rng, prior)
        pool = sample_pool(rng, task, size=24, near=6)
        errors = pool.x @ prior.T - pool.y  # zero-shot errors on the candidates

        def answer(subsets, pool=pool):
            return np.stack([layer.forward(pool.query, pool.x[s], pool.y[s]) for s in subsets])

        chosen = select(pool.query, pool.x, errors, answer, SelectorConfig(budget=8)).chosen
        top = top_k(pool.query, pool.x, 8, rng)
        sel_err.append(np.sum((answer([chosen])[0] - pool.target) ** 2))
        top_err.append(np.sum((answer([top])[0] - pool.target) ** 2))
    assert np.mean(sel_err) < 0.5 * np.mean(top_err)


def test_selector_refuses_an_empty_pool():
    with pytest.raises(CorrectiveContextError, match="candidate pool is empty"):
        select(np.zeros(3), np.zeros((0, 3)), np.zeros((0, 2)), lambda s: np.zeros((len(s), 2)))
