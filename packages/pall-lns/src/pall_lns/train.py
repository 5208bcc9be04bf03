"""Fit the learned selector on hindsight-oracle records (cost-sensitive softmax regression).

The policy is ``p(o | ctx) = softmax(W phi(ctx))_o``. Rather than the hard oracle label alone,
the loss uses the whole reward vector: with ``q_o = softmax(r_o / (beta * max_o' |r_o'|))`` the
per-state target (``beta`` = 0.25, so the best operator dominates but near-ties share mass),

    L(W) = -(1/N) sum_n sum_o q_no log p(o | ctx_n) + lambda ||W||^2,

minimised by full-batch gradient descent with Adam steps (``grad = X^T (P - Q) / N + 2 lambda
W``). Small on purpose: the weights ship as JSON inside the package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pall_lns.errors import PallError
from pall_lns.operators import OperatorSpec
from pall_lns.selectors import LearnedSelector

__all__ = ["fit_selector", "soft_targets"]


def soft_targets(rewards: np.ndarray, beta: float = 0.25) -> np.ndarray:
    """``q = softmax(r / (beta * max|r|))`` per row; all-zero rows become uniform."""
    scale = np.maximum(np.abs(rewards).max(axis=1, keepdims=True), 1e-12) * beta
    z = rewards / scale
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def fit_selector(
    records: Sequence[dict[str, Any]],
    ops: list[OperatorSpec],
    *,
    l2: float = 1e-3,
    steps: int = 3000,
    lr: float = 0.05,
    seed: int = 0,
) -> tuple[LearnedSelector, dict[str, float]]:
    """Train ``W`` on oracle records; returns the selector and fit statistics."""
    X = np.asarray([r["features"] for r in records], dtype=float)
    R = np.asarray([r["rewards"] for r in records], dtype=float)
    if R.shape[1] != len(ops):
        raise PallError(f"oracle records have {R.shape[1]} rewards, the ensemble {len(ops)} ops")
    Q = soft_targets(R)
    rng = np.random.default_rng(seed)
    W = 0.01 * rng.standard_normal((len(ops), X.shape[1]))
    m = np.zeros_like(W)
    v = np.zeros_like(W)
    for t in range(1, steps + 1):
        P = _softmax(X @ W.T)
        g = (P - Q).T @ X / X.shape[0] + 2 * l2 * W
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        W -= lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    P = _softmax(X @ W.T)
    # Agreement is measured on informative states only (some operator improved): where every
    # reward is 0 the oracle has no preference and its argmax label is arbitrary.
    info = np.abs(R).max(axis=1) > 0
    Ri, Pi = (R[info], P[info]) if info.any() else (R, P)
    pred = Pi.argmax(axis=1)
    best = Ri.argmax(axis=1)
    regret = (Ri.max(axis=1) - Ri[np.arange(len(Ri)), pred]) / np.maximum(
        np.abs(Ri).max(axis=1), 1e-12
    )
    stats = {
        "n": float(len(R)),
        "informative": float(info.sum()),
        "accuracy": float(np.mean(pred == best)),
        "mean_norm_regret": float(regret.mean()),
        "majority_baseline": float(np.bincount(best, minlength=len(ops)).max() / len(Ri)),
        "loss": float(-(Q * np.log(P + 1e-12)).sum(axis=1).mean()),
    }
    return LearnedSelector(W, ops, {"train": stats}), stats
