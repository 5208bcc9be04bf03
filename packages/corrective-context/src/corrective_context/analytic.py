"""The exact analytic setting: in-context linear regression read by one linear-attention layer.

Tasks ``y = W x + ε`` (``x ∈ R^d``, ``y ∈ R^m``, ``ε ~ N(0, σ²I)``) around a "pretrained"
prior ``W₀ ≠ W``. A query token ``[x_q; 0]`` attends without softmax to the context tokens
``[x_i; y_i]`` (keys ``k_i = x_i``, query ``x_q``, values ``v_i = y_i - W₀ x_i``), and the answer
is read off as (von Oswald et al., 2023: in-context learning as one gradient step)

    ŷ_C(x_q) = W₀ x_q + η Σ_{i∈C} (k_iᵀ x_q) v_i.

So the base answer is ``ŷ₀ = W₀ x_q``, the error is ``e = E x_q`` with ``E = W₀ - W``, and the
correction an item set ``C`` induces is closed-form:

    c_C = η Σ_{i∈C} (x_iᵀ x_q)(y_i - W₀ x_i) = -η E S_C x_q + η Σ_{i∈C} (x_iᵀ x_q) ε_i,
    S_C = Σ_{i∈C} x_i x_iᵀ.

Attention (``x_iᵀ x_q``) and complementarity (how much of the gap ``E x_i`` the item carries)
set it jointly. An item aligned with the query, ``x_i = s·x_q/‖x_q‖``, gives exactly
``c_i = -η s² e``: ``ρ = η s²``, ``ω = 0``. Items add: ``k`` such items give ``ρ = η Σ s_i²``, so
the most similar items, added one after the other, move the answer from under- through proper
to over-correction (``ρ > 2``: the error grows). Random items add ``-η E x_i x_iᵀ x_q``, on
average ``-η e`` each, plus an off-axis part.

The *theory's prediction* of a regime is the noise-free closed form ``-η E S_C x_q`` (it needs
only ``W₀ - W`` and the items' inputs); the *measurement* is the attention layer's forward
pass on the noisy labels. They differ only through ``ε``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corrective_context.errors import CorrectiveContextError

__all__ = ["LinearAttentionICL", "Pool", "Task", "sample_pool", "sample_task"]


@dataclass(frozen=True)
class Task:
    """One regression task ``y = W x + ε`` with the model's prior ``W₀`` (``prior``)."""

    weights: np.ndarray  #: W, (m, d)
    prior: np.ndarray  #: W₀, (m, d)
    noise: float  #: σ

    @property
    def gap(self) -> np.ndarray:
        """``E = W₀ - W``: the prior's error, the thing the context has to correct."""
        return self.prior - self.weights


@dataclass(frozen=True)
class Pool:
    """A query and its candidate items: inputs, noisy labels, and which are near-duplicates."""

    query: np.ndarray  #: x_q, (d,)
    target: np.ndarray  #: y* = W x_q (noise-free), (m,)
    x: np.ndarray  #: candidate inputs, (M, d)
    y: np.ndarray  #: candidate labels, (M, m)
    near: np.ndarray  #: bool (M,): the candidate is a near-duplicate of the query

    def __len__(self) -> int:
        return int(self.x.shape[0])


def sample_task(
    rng: np.random.Generator, prior: np.ndarray, spread: float = 1.0, noise: float = 0.3
) -> Task:
    """``W = W₀ + U`` with ``U_jk ~ N(0, spread²/d)``: tasks scattered around the prior."""
    m, d = prior.shape
    weights = prior + rng.standard_normal((m, d)) * spread / np.sqrt(d)
    return Task(weights, prior, noise)


def sample_pool(
    rng: np.random.Generator, task: Task, size: int = 24, near: int = 6, jitter: float = 0.15
) -> Pool:
    """A query ``x_q ~ N(0, I)`` and ``size`` candidates: ``near`` near-duplicates of the query
    (``x_q`` scaled by ``1 + N(0, jitter²)`` plus ``N(0, jitter²)`` noise per coordinate: what a
    similarity retriever ranks first) and the rest drawn like the query. Labels carry the task's
    noise."""
    if size < 1:
        raise CorrectiveContextError(f"pool size: must be >= 1, got {size}")
    if not 0 <= near <= size:
        raise CorrectiveContextError(f"near: must be between 0 and the pool size {size}")
    m, d = task.weights.shape
    q = np.asarray(rng.standard_normal(d))
    x = rng.standard_normal((size, d))
    scale = 1 + jitter * rng.standard_normal((near, 1))
    x[:near] = q * scale + jitter * rng.standard_normal((near, d))
    order = rng.permutation(size)
    x = x[order]
    is_near = (order < near).copy()
    y = x @ task.weights.T + task.noise * rng.standard_normal((size, m))
    return Pool(q, np.asarray(task.weights @ q), x, y, is_near)


class LinearAttentionICL:
    """One linear-attention layer doing in-context regression with prior ``W₀`` and step ``η``.

    :meth:`forward` runs the layer on token matrices (keys, queries and values from explicit
    projection matrices); :meth:`closed_form_correction` is the formula of the module docstring.
    The test suite checks the two against each other.
    """

    def __init__(self, prior: np.ndarray, eta: float) -> None:
        if not eta > 0:
            raise CorrectiveContextError(f"eta: must be > 0, got {eta}")
        self.prior = np.asarray(prior, dtype=np.float64)
        self.eta = float(eta)
        m, d = self.prior.shape
        self.d, self.m = d, m
        # Projections on tokens z = [x; y] (d + m): keys and queries read x, values y - W₀ x.
        read_x = np.hstack([np.eye(d), np.zeros((d, m))])
        self.w_key = read_x
        self.w_query = read_x
        self.w_value = np.hstack([-self.prior, np.eye(m)])

    def base(self, query: np.ndarray) -> np.ndarray:
        """``ŷ₀ = W₀ x_q``: the answer with no context."""
        return self.prior @ query

    def forward(self, query: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The layer's answer for ``x_q`` given the context tokens ``[x_i; y_i]``."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.d)
        y = np.asarray(y, dtype=np.float64).reshape(-1, self.m)
        tokens = np.hstack([x, y])  # (n, d + m)
        q_token = np.concatenate([query, np.zeros(self.m)])
        keys = tokens @ self.w_key.T
        values = tokens @ self.w_value.T
        scores = keys @ (self.w_query @ q_token)  # unnormalised attention, (n,)
        return self.base(query) + self.eta * scores @ values

    def attention(self, query: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The attention score ``x_iᵀ x_q`` of each item."""
        return np.asarray(x, dtype=np.float64).reshape(-1, self.d) @ query

    def closed_form_correction(
        self, query: np.ndarray, x: np.ndarray, gap: np.ndarray, noise: np.ndarray | None = None
    ) -> np.ndarray:
        """``c_C = -η E S_C x_q + η Σ (x_iᵀ x_q) ε_i`` (``gap`` = E, ``noise`` = the ε_i, or
        ``None`` for the noise-free prediction of the theory)."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.d)
        s_c = x.T @ x
        c = -self.eta * gap @ (s_c @ query)
        if noise is not None:
            c = c + self.eta * (x @ query) @ np.asarray(noise).reshape(-1, self.m)
        return c
