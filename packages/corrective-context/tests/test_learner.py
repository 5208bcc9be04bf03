import numpy as np
import pytest
from corrective_context import CorrectiveContextError
from corrective_context.learner import LearnerConfig, prior_for, train, trained_learner

TINY = LearnerConfig(steps=150, batch=64)


def test_training_lowers_the_loss():
    _, losses = train(TINY)
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:5])


def test_empty_context_is_the_prior_and_items_move_the_answer():
    model, _ = train(TINY)
    q = np.ones(TINY.d)
    empty = model.predict(q, np.zeros((0, TINY.d)), np.zeros((0, TINY.m)))
    np.testing.assert_allclose(
        empty,
        model.predict_subsets(q, np.eye(TINY.d), np.ones((TINY.d, TINY.m)), [[]])[0],
        rtol=1e-6,
    )
    moved = model.predict(q, np.eye(TINY.d)[:2], np.ones((2, TINY.m)))
    assert not np.allclose(moved, empty)
    assert prior_for(TINY).shape == (TINY.m, TINY.d)


def test_the_cache_returns_the_same_model(tmp_path):
    a, rec_a = trained_learner(TINY, cache_dir=tmp_path)
    b, rec_b = trained_learner(TINY, cache_dir=tmp_path)
    assert rec_a == rec_b
    q, x, y = np.ones(TINY.d), np.eye(TINY.d)[:3], np.ones((3, TINY.m))
    np.testing.assert_allclose(a.predict(q, x, y), b.predict(q, x, y), rtol=1e-6)
    assert len(list(tmp_path.glob("corrective-context/learner-*/model.safetensors"))) == 1


SOFT = LearnerConfig(steps=150, batch=64, attention="softmax")


def test_softmax_learner_trains_and_copies_of_an_item_saturate():
    model, losses = train(SOFT)
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:5])
    q = np.ones(SOFT.d) / np.sqrt(SOFT.d)
    x, y = q[None, :], np.full((1, SOFT.m), 3.0)
    empty = model.predict(q, np.zeros((0, SOFT.d)), np.zeros((0, SOFT.m)))
    moves = [
        np.linalg.norm(model.predict(q, np.repeat(x, k, 0), np.repeat(y, k, 0)) - empty)
        for k in (1, 64, 128)
    ]
    # normalised attention: the pull of k copies saturates (the weights sum to one) ...
    assert moves[2] == pytest.approx(moves[1], rel=0.02)
    linear, _ = train(TINY)
    base = linear.predict(q, np.zeros((0, TINY.d)), np.zeros((0, TINY.m)))
    lin = [
        np.linalg.norm(linear.predict(q, np.repeat(x, k, 0), np.repeat(y, k, 0)) - base)
        for k in (64, 128)
    ]
    # ... while unnormalised linear attention adds the copies up (twice the copies, twice the pull)
    assert lin[1] == pytest.approx(2 * lin[0], rel=0.02)


def test_an_unknown_attention_is_refused():
    with pytest.raises(CorrectiveContextError, match="attention"):
        train(LearnerConfig(steps=1, attention="cosine"))
