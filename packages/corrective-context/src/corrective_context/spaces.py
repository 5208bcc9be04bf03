"""Answer spaces of a language model, and which of them can show over-correction at all.

The regime of a correction (:mod:`corrective_context.correction`) depends on the space the
answer vector lives in. Three spaces for a model's next-token logits ``l`` over ``K`` answer
labels (token ids ``labels``):

**Probability space against a one-hot target** (:func:`probability_vector`, what
:func:`corrective_context.measure.measure` reports as ``probability``): ``ŷ = softmax(l)``,
``y* = e_a``. Over-correction in magnitude is *impossible* there: ``ρ <= 1`` for every pair of
distributions ``p₀, p₁``. Proof: with ``e = p₀ - e_a`` and ``c = p₁ - p₀``,

    ρ‖e‖² = ⟨p₁ - p₀, e_a - p₀⟩ = ‖e‖² + ⟨p₁ - e_a, e_a - p₀⟩,

and every term of the last inner product is ``<= 0``: at ``a`` it is ``(p₁ₐ - 1)(1 - p₀ₐ)``,
elsewhere ``p₁ₖ·(-p₀ₖ)``. So ``ρ <= 1``, with equality only when ``p₁ = e_a`` or the two
supports meet nowhere but ``a``. The one-hot target sits on a vertex of the simplex and no
distribution lies beyond it.

**Centred logit space** (:func:`centred_logits`, :func:`logit_target`): ``ŷ = Πl`` with
``Π = I - 11ᵀ/K`` (softmax ignores a common shift, so the centred logits are the identifiable
part), ``y* = margin·Π e_a``: the answer's logit exceeds every other label's by ``margin``
(a finite target: a distribution with ``p_a = 1 / (1 + (K - 1)e^{-margin})``). Over-correction
is possible: ``Π`` maps onto the whole sum-zero subspace, which holds ``e`` and ``y*``, so for
any ``ρ`` the logits ``l₁ = l₀ - ρe`` give ``Πl₁ = ŷ₀ - ρe``: ``ρ`` takes every real value.
Over-correction there means pushing the answer's margin past ``margin`` (or the others apart).

**Value space, a regression target** (:func:`expected_value`): labels carry numbers ``v_k``
(the digits 0-9 of a numeric answer), ``ŷ = Σ_k softmax(l)_k v_k`` is the model's expected
answer and ``y*`` the true number; the error is the numeric error of the expected answer.
Over-correction is possible whenever ``y*`` lies strictly inside ``[min v, max v]``: ``ŷ₁``
ranges over that whole interval (a distribution concentrated on one label gives that label's
value), so ``ρ`` reaches ``(ŷ₀ - v_far)/(ŷ₀ - y*) > 1`` with ``v_far`` the extreme value on
the far side of ``y*``. At an extreme answer (``y* = max v`` or ``min v``) it is impossible,
as in probability space.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from corrective_context.errors import CorrectiveContextError

__all__ = [
    "centred_logits",
    "expected_value",
    "logit_target",
    "probability_vector",
    "softmax",
]


def _logits(logits: ArrayLike, labels: Sequence[int] | None) -> np.ndarray:
    arr = np.asarray(logits, dtype=np.float64)
    if labels is not None:
        arr = arr[..., list(labels)]
    if arr.shape[-1] < 2:
        raise CorrectiveContextError(f"answer labels: need at least 2, got {arr.shape[-1]}")
    if not np.all(np.isfinite(arr)):
        raise CorrectiveContextError("logits: contain NaN or infinity")
    return arr


def softmax(logits: ArrayLike, labels: Sequence[int] | None = None) -> np.ndarray:
    """Softmax over the last axis, restricted to ``labels`` (renormalised over them)."""
    arr = _logits(logits, labels)
    z = np.exp(arr - arr.max(axis=-1, keepdims=True))
    return np.asarray(z / z.sum(axis=-1, keepdims=True))


def probability_vector(logits: ArrayLike, labels: Sequence[int] | None = None) -> np.ndarray:
    """``ŷ = softmax(l)`` (over ``labels``): against a one-hot target, ``ρ <= 1`` always."""
    return softmax(logits, labels)


def centred_logits(logits: ArrayLike, labels: Sequence[int] | None = None) -> np.ndarray:
    """``ŷ = Πl``: the logits over ``labels`` minus their mean (module docstring)."""
    arr = _logits(logits, labels)
    return np.asarray(arr - arr.mean(axis=-1, keepdims=True))


def logit_target(n_labels: int, answer: int, margin: float) -> np.ndarray:
    """``y* = margin·Πe_a``: the answer's logit ``margin`` above every other label's."""
    if n_labels < 2 or not 0 <= answer < n_labels:
        raise CorrectiveContextError(f"answer {answer}: not one of {n_labels} labels")
    if not (np.isfinite(margin) and margin > 0):
        raise CorrectiveContextError(f"margin: must be a finite number > 0, got {margin}")
    target = np.zeros(n_labels)
    target[answer] = margin
    return target - target.mean()


def expected_value(
    logits: ArrayLike, labels: Sequence[int] | None = None, values: ArrayLike | None = None
) -> np.ndarray:
    """``ŷ = Σ_k softmax(l)_k v_k`` (over ``labels``; ``values`` default ``0..K-1``), as a
    vector of length 1 (or shape ``(..., 1)`` for a batch), so it decomposes like any answer
    vector."""
    p = softmax(logits, labels)
    v = np.arange(p.shape[-1], dtype=np.float64) if values is None else np.asarray(values, float)
    if v.shape != (p.shape[-1],):
        raise CorrectiveContextError(f"values: need {p.shape[-1]} numbers, got shape {v.shape}")
    return np.asarray((p @ v)[..., None])
