"""The theory-guided selector: add items while the predicted correction stays proper.

At test time the error ``e = ŷ₀ - y*`` is unknown, so the selector estimates it, predicts the
correction each candidate induces, and builds the context greedily against the estimate:

1. **Error estimate.** The model answers each candidate's own input without context; its error
   there is ``e_i = ŷ₀(x_i) - y_i`` (the candidate's label is known: it is a demonstration,
   a passage with its answer, a memory with its outcome). A ridge probe from keys to errors,
   ``Ê = argmin Σ‖Ê k_i - e_i‖² + λ‖Ê‖²``, gives ``ê = Ê k_q`` at the query.
2. **Predicted corrections.** ``c_i = ŷ({i}) - ŷ(∅)`` for every candidate, from the model's own
   forward pass with that single item: attention on the item times its complementarity to the
   query, as the model computes them.
3. **Greedy, while proper.** With the corrections adding (exact for one linear-attention
   layer, first-order otherwise), pick the item that lowers the predicted residual ``‖ê + Σ
   c_i‖`` most; refuse any item after which the predicted regime of ``Σ c_i`` against ``ê``
   (:mod:`corrective_context.correction`) would be over; stop when no item lowers the residual
   or the budget is spent.
4. **Check.** The model answers every prefix of that order; the selector keeps the prefix
   whose measured correction leaves the smallest residual against ``ê`` (the empty context
   included: with nothing proper to add, it adds nothing).

Its cost is about ``2M + k`` forward passes for ``M`` candidates (batched in three calls),
against one similarity ranking for top-k: ``bench`` measures the ratio.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from corrective_context.baselines import check_pool
from corrective_context.correction import TOLERANCE, classify_magnitude
from corrective_context.errors import CorrectiveContextError

__all__ = ["Selection", "SelectorConfig", "estimate_error", "greedy_proper", "select"]

#: ``answer(subsets) -> (len(subsets), m)``: the model's answers to the query with each subset
Answerer = Callable[[list[list[int]]], np.ndarray]


@dataclass(frozen=True)
class SelectorConfig:
    budget: int = 8  #: at most this many items (the baselines' largest k)
    tolerance: float = TOLERANCE  #: τ of "proper"
    ridge: float = 1.0  #: λ of the error probe


@dataclass(frozen=True)
class Selection:
    chosen: list[int]
    error_estimate: np.ndarray  #: ê (empty for the baselines, which estimate no error)
    order: list[int] = field(default_factory=list)  #: the greedy order (a baseline's ranking)
    method: str = "corrective"  #: which method chose (``corrective_context.baselines.METHODS``)


def estimate_error(
    query_key: np.ndarray, keys: np.ndarray, item_errors: np.ndarray, ridge: float = 1.0
) -> np.ndarray:
    """``ê = Ê k_q`` with ``Ê`` the ridge probe from candidate keys to their errors."""
    keys = check_pool(keys, 0)
    errs = np.asarray(item_errors, dtype=np.float64).reshape(keys.shape[0], -1)
    gram = keys.T @ keys + ridge * np.eye(keys.shape[1])
    probe = np.linalg.solve(gram, keys.T @ errs)  # (dk, m)
    return np.asarray(query_key @ probe)


def greedy_proper(
    corrections: np.ndarray, error_estimate: np.ndarray, budget: int, tolerance: float = TOLERANCE
) -> list[int]:
    """Step 3 of the module docstring: the greedy order under additive corrections."""
    c = np.asarray(corrections, dtype=np.float64)
    e = np.asarray(error_estimate, dtype=np.float64)
    norm = float(np.linalg.norm(e))
    if norm == 0.0:
        return []
    toward = -e / norm
    chosen: list[int] = []
    total = np.zeros_like(e)
    for _ in range(min(budget, c.shape[0])):
        best, best_res = -1, float(np.linalg.norm(e + total))
        for i in range(c.shape[0]):
            if i in chosen:
                continue
            after = total + c[i]
            p = float(after @ toward)
            off = float(np.linalg.norm(after - p * toward)) / norm
            if classify_magnitude(p / norm, tolerance) == "over" or off > tolerance:
                continue  # the predicted correction would no longer be proper
            res = float(np.linalg.norm(e + after))
            if res < best_res - 1e-12:
                best, best_res = i, res
        if best < 0:
            break
        chosen.append(best)
        total = total + c[best]
    return chosen


def select(
    query_key: np.ndarray,
    keys: np.ndarray,
    item_errors: np.ndarray,
    answer: Answerer,
    config: SelectorConfig = SelectorConfig(),
) -> Selection:
    """Steps 1-4 of the module docstring. ``item_errors`` (M, m) are the model's zero-shot
    errors on the candidates; ``answer`` runs the model on the query with item subsets."""
    keys = check_pool(keys, config.budget)
    m = keys.shape[0]
    e_hat = estimate_error(query_key, keys, item_errors, config.ridge)
    answers = answer([[], *[[i] for i in range(m)]])
    if answers.shape[0] != m + 1:
        raise CorrectiveContextError(f"answer(): {answers.shape[0]} answers for {m + 1} subsets")
    base = answers[0]
    order = greedy_proper(answers[1:] - base, e_hat, config.budget, config.tolerance)
    if not order:
        return Selection([], e_hat, order)
    prefixes = [order[: j + 1] for j in range(len(order))]
    measured = answer(prefixes) - base
    residual = np.linalg.norm(e_hat + measured, axis=1)
    residual = np.where(np.isfinite(residual), residual, np.inf)  # a prefix that did not fit
    best = int(np.argmin(residual))
    if residual[best] >= np.linalg.norm(e_hat):
        return Selection([], e_hat, order)
    return Selection(prefixes[best], e_hat, order)
