import numpy as np
import pytest
from pace_scheduler import PaceSchedulerError
from pace_scheduler.latency import (
    H200_QWEN3_32B,
    LatencyModel,
    OnlinePredictor,
    StepFeatures,
    fit,
    r_squared,
)


def test_h200_numbers_follow_the_published_hardware(h200):
    # 64 GB of weights at 85% of 4.8 TB/s; decode is bandwidth-bound below ~145 batch tokens
    assert h200.weights == pytest.approx(64e9 / (4.8e12 * 0.85))
    assert 100 < h200.knee < 300
    assert H200_QWEN3_32B.kv_bytes_per_token == 256 * 1024
    assert 150_000 < H200_QWEN3_32B.kv_tokens() < 300_000


def test_predict_is_the_paper_equation(h200):
    f = StepFeatures.of(decode_ctx=[100, 300], prefill_chunks=[64], prefill_ctx=[10])
    n_tok = 2 + 64
    expected = (
        h200.alpha
        + max(h200.weights, h200.beta * n_tok)
        + h200.gamma * 400
        + h200.delta * 64 * (10 + 32)
        + h200.eps * 2
    )
    assert h200.step_time(f) == pytest.approx(expected)


def test_decode_is_flat_until_the_knee_then_linear(h200):
    lanes = np.array([1, 16, 64, 400, 800], dtype=float)
    t = h200.predict(np.column_stack([lanes, np.zeros(5), np.zeros(5), np.zeros(5)]))
    assert t[2] - t[0] < 0.1 * t[0]  # bandwidth-bound: extra sequences nearly free
    assert t[4] - t[3] == pytest.approx(400 * (h200.beta + h200.eps), rel=1e-6)


def _grid(model: LatencyModel, noise: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = [[b, b * c, 0, 0] for b in (1, 2, 4, 8, 32, 64, 128, 256) for c in (128, 1024, 4096)]
    rows += [[0, 0, p, p * p / 2] for p in (64, 256, 1024, 2048)]
    x = np.array(rows, dtype=float)
    return x, model.predict(x) * (1 + noise * rng.standard_normal(len(x)))


def test_fit_recovers_the_coefficients_from_exact_steps(h200):
    x, y = _grid(h200)
    fitted, r2 = fit(x, y)
    assert r2 > 0.9999
    assert fitted.beta == pytest.approx(h200.beta, rel=0.05)
    assert fitted.gamma == pytest.approx(h200.gamma, rel=0.05)
    assert fitted.knee == pytest.approx(h200.knee, rel=0.2)


def test_fit_on_noisy_steps_keeps_r2_high(h200):
    x, y = _grid(h200, noise=0.04)
    _, r2 = fit(x, y)
    assert r2 > 0.95


def test_rejects_a_profile_too_small_to_fit(h200):
    x, y = _grid(h200)
    with pytest.raises(PaceSchedulerError, match="too few"):
        fit(x[:5], y[:5], source="p.jsonl")


def test_rejects_a_profile_with_one_batch_size():
    x = np.array([[4, 4 * c, 0, 0] for c in range(1, 12)], dtype=float)
    with pytest.raises(PaceSchedulerError, match="batch sizes"):
        fit(x, np.full(len(x), 0.01))


def test_rejects_nonpositive_times(h200):
    x, y = _grid(h200)
    y[3] = 0.0
    with pytest.raises(PaceSchedulerError, match="> 0"):
        fit(x, y)


def test_online_refit_tracks_a_slower_machine(h200):
    slower = LatencyModel(**{**h200.to_dict(), "alpha": 0.01, "gamma": 2 * h200.gamma})
    pred = OnlinePredictor(h200, window=64, refit_every=32)
    x, _ = _grid(slower)
    for row in np.tile(x, (3, 1)):
        pred.observe(row, float(slower.predict(row)))
    assert pred.refits >= 2
    assert pred.model.alpha == pytest.approx(0.01, rel=0.05)


def test_r_squared_of_a_perfect_fit_is_one():
    assert r_squared([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0


def test_load_names_the_bad_file(tmp_path):
    bad = tmp_path / "fit.json"
    bad.write_text('{"model": {"alpha": 1}}')
    with pytest.raises(PaceSchedulerError, match=r"fit.json.*weights"):
        LatencyModel.load(bad)


def test_the_batch_wide_mask_term_is_quadratic_in_the_batch():
    m = LatencyModel(alpha=1e-3, weights=0.0, beta=1e-5, gamma=0.0, delta=0.0, eps=0.0, zeta=1e-8)
    one = m.step_time(StepFeatures.of(decode_ctx=[100] * 10))
    two = m.step_time(StepFeatures.of(decode_ctx=[100] * 20))
    # 10 x 1010 pairs against 20 x 2020: the mask costs four times as much
    assert (two - 1e-3 - 20 * 1e-5) == pytest.approx(4 * (one - 1e-3 - 10 * 1e-5))


def test_fit_recovers_a_mask_term_from_engine_like_steps():
    true = LatencyModel(
        alpha=2.5e-3, weights=0.0, beta=4e-5, gamma=1.5e-6, delta=0.0, eps=2e-5, zeta=5e-8
    )
    rows = [[b, b * c, 0, 0, 0] for b in (1, 2, 4, 8, 16, 32, 48) for c in (16, 64, 160)]
    rows += [[0, 0, p, p * p / 2, 0] for p in (16, 64, 128, 256)]
    x = np.array(rows, dtype=float)
    fitted, r2 = fit(x, true.predict(x))
    assert r2 > 0.9999
    assert fitted.zeta == pytest.approx(true.zeta, rel=0.05)


def test_four_column_features_still_predict(h200):
    four = np.array([[8.0, 800.0, 0.0, 0.0]])
    five = np.array([[8.0, 800.0, 0.0, 0.0, 0.0]])
    assert h200.predict(four) == pytest.approx(h200.predict(five))


def test_a_scaled_model_predicts_proportionally_slower_steps(h200):
    x = np.array([[8.0, 8000.0, 64.0, 64.0 * 40, 8.0], [1.0, 100.0, 0.0, 0.0, 0.0]])
    assert h200.scaled(2.0).predict(x) == pytest.approx(2.0 * h200.predict(x))
    with pytest.raises(PaceSchedulerError, match="scale factor"):
        h200.scaled(0.0)
