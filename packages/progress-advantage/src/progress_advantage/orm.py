"""An outcome reward model: the stand-in for a trained PRM, trained on the same rollouts.

A logistic-regression head on frozen hidden states (the mean of the policy's last hidden layer
over the completion's tokens), fit to the verifier's outcome labels of training-split rollouts:
the cheapest "trained reward model" that sees the same data progress advantage gets for free,
plus labels. For failure attribution it scores every prefix (the features after each step) and
blames the step whose prefix score drops most, which is how a PRM-from-outcomes is read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from progress_advantage.errors import ProgressAdvantageError

__all__ = ["OutcomeRewardModel"]


@dataclass
class OutcomeRewardModel:
    """``p(success | h) = σ(w·(h − μ)/σ + b)``, L2-regularised, full-batch Adam.

    ``l2`` and ``iterations`` are fixed defaults (not tuned on test data).
    """

    l2: float = 1e-2
    iterations: int = 500
    lr: float = 0.05
    w: np.ndarray | None = None
    b: float = 0.0
    mu: np.ndarray | None = None
    sd: np.ndarray | None = None

    def fit(self, features: ArrayLike, labels: ArrayLike) -> OutcomeRewardModel:
        x = np.asarray(features, dtype=np.float64)
        y = np.asarray(labels, dtype=np.float64).ravel()
        if x.ndim != 2 or x.shape[0] != y.size or y.size == 0:
            raise ProgressAdvantageError(
                f"OutcomeRewardModel.fit: features {x.shape} and labels {y.shape} do not match"
            )
        self.mu = x.mean(0)
        self.sd = x.std(0) + 1e-6
        z = (x - self.mu) / self.sd
        w = np.zeros(z.shape[1])
        b = float(np.log((y.mean() + 1e-3) / (1 - y.mean() + 1e-3)))
        m = np.zeros(z.shape[1] + 1)
        v = np.zeros_like(m)
        for it in range(1, self.iterations + 1):
            p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
            g = np.r_[z.T @ (p - y) / y.size + self.l2 * w, (p - y).mean()]
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g**2
            step = self.lr * (m / (1 - 0.9**it)) / (np.sqrt(v / (1 - 0.999**it)) + 1e-8)
            w -= step[:-1]
            b -= float(step[-1])
        self.w, self.b = w, b
        return self

    def logit(self, features: ArrayLike) -> np.ndarray:
        """The predicted success logit of each feature row."""
        if self.w is None or self.mu is None or self.sd is None:
            raise ProgressAdvantageError("OutcomeRewardModel: call fit before scoring")
        x = np.atleast_2d(np.asarray(features, dtype=np.float64))
        return np.asarray(((x - self.mu) / self.sd) @ self.w + self.b)

    def step_scores(self, prefix_features: ArrayLike) -> np.ndarray:
        """Per-step change of the prefix logit (the first step against the bias alone)."""
        s = self.logit(prefix_features)
        return np.diff(np.r_[self.b, s])
