import numpy as np
import pytest
from corrective_context.analytic import LinearAttentionICL, sample_pool, sample_task
from corrective_context.correction import decompose


def _setting(seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    prior = rng.standard_normal((2, 8)) / np.sqrt(8)
    task = sample_task(rng, prior, noise=noise)
    return rng, LinearAttentionICL(prior, eta=1 / 16), task


def test_attention_forward_equals_the_closed_form_correction():
    rng, layer, task = _setting()
    pool = sample_pool(rng, task, size=24, near=6)
    noise = pool.y - pool.x @ task.weights.T  # the labels' noise, recovered exactly
    for subset in ([3], [0, 5, 7], list(range(24))):
        measured = layer.forward(pool.query, pool.x[subset], pool.y[subset]) - layer.base(
            pool.query
        )
        closed = layer.closed_form_correction(pool.query, pool.x[subset], task.gap, noise[subset])
        np.testing.assert_allclose(measured, closed, rtol=1e-10, atol=1e-12)


def test_noise_free_labels_give_minus_eta_e_s_x():
    rng, layer, task = _setting(noise=0.0)
    pool = sample_pool(rng, task, size=10, near=0)
    e_mat = task.gap
    expected = -layer.eta * e_mat @ (pool.x.T @ pool.x) @ pool.query
    got = layer.forward(pool.query, pool.x, pool.y) - layer.base(pool.query)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.parametrize("s", [0.5, 2.0, 4.0, 6.0])
def test_an_aligned_item_corrects_rho_eta_s_squared(s):
    rng, layer, task = _setting(noise=0.0)
    q = rng.standard_normal(8)
    x = (s * q / np.linalg.norm(q))[None, :]
    y = x @ task.weights.T
    base = layer.base(q)
    c = decompose(base, layer.forward(q, x, y), task.weights @ q)
    assert c.ratio == pytest.approx(layer.eta * s**2)
    assert c.off_axis == pytest.approx(0.0, abs=1e-9)


def test_more_aligned_items_move_from_under_through_proper_to_over():
    rng, layer, task = _setting(noise=0.0)
    q = rng.standard_normal(8)
    item = (3.0 * q / np.linalg.norm(q))[None, :]  # rho = 9/16 per item
    regimes = []
    for k in (1, 2, 4):
        x = np.repeat(item, k, axis=0)
        out = layer.forward(q, x, x @ task.weights.T)
        regimes.append(decompose(layer.base(q), out, task.weights @ q).regime)
    assert regimes == ["proper", "proper", "over"]
    x = np.repeat(item, 4, axis=0)
    after = decompose(layer.base(q), layer.forward(q, x, x @ task.weights.T), task.weights @ q)
    assert after.error_after > after.error_norm  # rho = 2.25: the error grows
