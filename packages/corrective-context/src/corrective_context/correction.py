"""The correction-vector decomposition: how much a context item moves an answer toward the truth.

Notation (the paper's, mapped to argument names):

- ``y_star`` (y*): the ground-truth answer vector; ``base`` (ŷ₀): the model's answer vector
  without the item(s); ``corrected`` (ŷ_C): its answer vector with them.
- Reasoning error ``e = ŷ₀ - y*``; correction vector ``c = ŷ_C - ŷ₀``; the error after the
  correction is ``e + c``.
- Decompose ``c`` along the corrective direction ``-ê = -e/‖e‖``:

      c = p·(-ê) + c_⊥,    p = ⟨c, -ê⟩,    ρ = p/‖e‖,    ω = ‖c_⊥‖/‖e‖,

  so that ``‖e + c‖² = ((1 - ρ)² + ω²)·‖e‖²``. ``ρ = 1, ω = 0`` is the exact correction.

The regime, with tolerance ``τ`` (``tolerance``):

- magnitude: under if ``ρ < 1 - τ`` (moves too little toward y*, or away from it), over if
  ``ρ > 1 + τ`` (overshoots y*: with ``ρ > 2`` the error grows although the direction is right),
  proper otherwise;
- direction: under if ``p <= 0`` (the correction does not point toward y* at all), over if
  ``ω > τ`` (it moves the answer off the error axis: it "corrects" what was not wrong), proper
  otherwise;
- overall: proper iff both are proper; over if either is over; under otherwise.

Proper in both implies ``‖e + c‖ <= √2·τ·‖e‖``: the item at least halves the error for the
default ``τ = 0.5``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from corrective_context.errors import CorrectiveContextError

__all__ = ["REGIMES", "Correction", "Regime", "classify", "decompose"]

Regime = Literal["under", "proper", "over"]
REGIMES: tuple[Regime, ...] = ("under", "proper", "over")
#: the default tolerance τ of "proper" (fixed before any claim was looked at)
TOLERANCE = 0.5


@dataclass(frozen=True)
class Correction:
    """The decomposition of one correction vector against one error vector."""

    error_norm: float  #: ‖e‖
    projection: float  #: p = ⟨c, -ê⟩
    orthogonal: float  #: ‖c_⊥‖
    error_after: float  #: ‖e + c‖
    tolerance: float  #: τ

    @property
    def ratio(self) -> float:
        """ρ = p/‖e‖: the share of the error the correction removes along the error axis."""
        return self.projection / self.error_norm

    @property
    def off_axis(self) -> float:
        """ω = ‖c_⊥‖/‖e‖."""
        return self.orthogonal / self.error_norm

    @property
    def magnitude(self) -> Regime:
        return classify_magnitude(self.ratio, self.tolerance)

    @property
    def direction(self) -> Regime:
        if self.projection <= 0:
            return "under"
        return "over" if self.off_axis > self.tolerance else "proper"

    @property
    def regime(self) -> Regime:
        return combine(self.direction, self.magnitude)

    @property
    def helps(self) -> bool:
        """The item lowers the error: ‖e + c‖ < ‖e‖."""
        return self.error_after < self.error_norm


def classify_magnitude(ratio: float, tolerance: float = TOLERANCE) -> Regime:
    """Under / proper / over from ρ alone (the magnitude condition)."""
    if ratio < 1 - tolerance:
        return "under"
    return "over" if ratio > 1 + tolerance else "proper"


def combine(direction: Regime, magnitude: Regime) -> Regime:
    """The overall regime: proper iff both are; over if either is over; else under."""
    if direction == magnitude == "proper":
        return "proper"
    return "over" if "over" in (direction, magnitude) else "under"


def _vector(name: str, x: ArrayLike) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64).ravel()
    if arr.size == 0:
        raise CorrectiveContextError(f"{name}: got an empty vector")
    if not np.all(np.isfinite(arr)):
        raise CorrectiveContextError(f"{name}: contains NaN or infinity")
    return arr


def decompose(
    base: ArrayLike, corrected: ArrayLike, y_star: ArrayLike, tolerance: float = TOLERANCE
) -> Correction:
    """Decompose ``c = corrected - base`` against ``e = base - y_star`` (module docstring).

    A zero error (``base == y_star``) has no corrective direction: that is refused, since every
    correction would then only add error and "proper" is undefined.
    """
    y0, y1, ys = _vector("base", base), _vector("corrected", corrected), _vector("y_star", y_star)
    if not y0.shape == y1.shape == ys.shape:
        raise CorrectiveContextError(
            f"answer vectors differ in shape: base {y0.shape}, corrected {y1.shape}, "
            f"y_star {ys.shape}"
        )
    if not tolerance > 0:
        raise CorrectiveContextError(f"tolerance: must be > 0, got {tolerance}")
    e = y0 - ys
    norm = float(np.linalg.norm(e))
    if norm == 0.0:
        raise CorrectiveContextError("the base answer equals y_star: no error to correct")
    c = y1 - y0
    toward = -e / norm
    p = float(c @ toward)
    orth = float(np.linalg.norm(c - p * toward))
    return Correction(norm, p, orth, float(np.linalg.norm(e + c)), float(tolerance))


def classify(
    base: ArrayLike, corrected: ArrayLike, y_star: ArrayLike, tolerance: float = TOLERANCE
) -> Regime:
    """The overall regime of ``corrected`` relative to ``base`` (see :func:`decompose`)."""
    return decompose(base, corrected, y_star, tolerance).regime
