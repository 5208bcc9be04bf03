"""A process reward model trained on the toy's own step labels: the "dedicated trained reward
model" the paper compares against.

A logistic-regression head on frozen hidden states of the policy (the last layer's state at
each step's last token, which has read the problem and every step so far), fit to the step
checker's verdicts (``Arithmetic.check_steps``: a step is wrong if it is false arithmetic, an
illegal reduction, or follows a wrong step) on policy rollouts of training-split problems. It
sees labels progress advantage never gets. Its reading is the usual one for PRMs, fixed in
advance: a trajectory scores the minimum over its steps of ``log p(step correct)``; the blamed
step of a failed trajectory is the first with ``p < 1/2`` (the least likely one if none is).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from progress_advantage.errors import ProgressAdvantageError

__all__ = ["ProcessRewardModel"]


@dataclass
class ProcessRewardModel:
    """``p(step correct | h) = σ(w·(h − μ)/σ + b)``, L2-regularised, full-batch Adam.

    ``l2`` and ``iterations`` are fixed defaults (not tuned on test data).
    """

    l2: float = 1e-2
    iterations: int = 500
    lr: float = 0.05
    w: np.ndarray | None = None
    b: float = 0.0
    mu: np.ndarray | None = None
    sd: np.ndarray | None = None

    def fit(self, features: ArrayLike, labels: ArrayLike) -> ProcessRewardModel:
        x = np.asarray(features, dtype=np.float64)
        y = np.asarray(labels, dtype=np.float64).ravel()
        if x.ndim != 2 or x.shape[0] != y.size or y.size == 0:
            raise ProgressAdvantageError(
                f"ProcessRewardModel.fit: features {x.shape} and labels {y.shape} do not match"
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
            raise ProgressAdvantageError("ProcessRewardModel: call fit before scoring")
        x = np.atleast_2d(np.asarray(features, dtype=np.float64))
        return np.asarray(((x - self.mu) / self.sd) @ self.w + self.b)

    def step_scores(self, step_features: ArrayLike) -> np.ndarray:
        """``log p(step correct)`` of every step (rows of ``step_features``)."""
        z = self.logit(step_features)
        return np.asarray(-np.logaddexp(0.0, -z))

    def trajectory_score(self, step_features: ArrayLike) -> float:
        """The minimum over steps of ``log p(step correct)``."""
        return float(self.step_scores(step_features).min())

    def blame(self, step_features: ArrayLike) -> int:
        """The first step with ``p < 1/2``, else the least likely step."""
        s = self.step_scores(step_features)
        below = np.flatnonzero(s < np.log(0.5))
        return int(below[0]) if below.size else int(np.argmin(s))
