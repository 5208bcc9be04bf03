"""Rank schedules: the fraction ``r(t) ∈ (0, 1]`` of singular directions NuMuon keeps at step t.

NuMuon's update at step ``t`` has rank ``k_t = ⌈r(t) · min(d_out, d_in)⌉``. ``r = 1`` recovers
Muon's full polar factor ``U Vᵀ``; ``k = 1`` is the linear minimisation oracle of the
nuclear-norm ball (the top singular pair alone). The paper uses a fixed ratio, a piecewise
schedule or a cosine anneal; any callable ``step -> float`` works with :class:`~numuon.NuMuon`,
and its value is checked at every step (a value outside ``(0, 1]`` is an error, not clamped).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from numuon.errors import NumuonError

__all__ = ["Constant", "Cosine", "Piecewise", "RankSchedule", "check_ratio", "rank_for"]

#: Any callable from the step number (0-based) to the rank ratio ``r(t)``.
RankSchedule = Callable[[int], float]


def check_ratio(value: object, where: str = "rank schedule") -> float:
    """``value`` as a float in ``(0, 1]``, else a :class:`NumuonError` naming it."""
    try:
        r = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise NumuonError(f"{where}: {value!r} is not a number in (0, 1]") from None
    if not (math.isfinite(r) and 0.0 < r <= 1.0):
        raise NumuonError(f"{where}: {value!r} is outside (0, 1]")
    return r


def rank_for(ratio: float, shape: Sequence[int]) -> int:
    """``k = ⌈r · min(d_out, d_in)⌉``, at least 1."""
    d = min(int(shape[0]), int(shape[1]))
    # The small tolerance keeps r = 0.25 of 128 at 32, not 33, despite float rounding.
    return max(1, min(d, math.ceil(ratio * d - 1e-9)))


@dataclass(frozen=True)
class Constant:
    """``r(t) = ratio`` for every step."""

    ratio: float = 0.25

    def __post_init__(self) -> None:
        check_ratio(self.ratio, "Constant.ratio")

    def __call__(self, step: int) -> float:
        return self.ratio


@dataclass(frozen=True)
class Piecewise:
    """``r(t) = ratios[i]`` for ``boundaries[i-1] <= t < boundaries[i]``.

    ``ratios`` has one more entry than ``boundaries`` (strictly increasing step numbers), like
    ``torch.optim.lr_scheduler.MultiStepLR`` but with the values given explicitly.
    """

    boundaries: tuple[int, ...]
    ratios: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.ratios) != len(self.boundaries) + 1:
            raise NumuonError(
                f"Piecewise: {len(self.ratios)} ratios need {len(self.ratios) - 1} boundaries, "
                f"got {len(self.boundaries)}"
            )
        if any(b <= a for a, b in zip(self.boundaries, self.boundaries[1:], strict=False)):
            raise NumuonError(f"Piecewise.boundaries: {self.boundaries} must increase strictly")
        for i, r in enumerate(self.ratios):
            check_ratio(r, f"Piecewise.ratios[{i}]")

    def __call__(self, step: int) -> float:
        index = sum(1 for b in self.boundaries if step >= b)
        return self.ratios[index]


@dataclass(frozen=True)
class Cosine:
    """Cosine anneal from ``start`` to ``end`` over ``total_steps``, then ``end``:

    ``r(t) = end + (start - end) · (1 + cos(π · min(t, T) / T)) / 2``.
    """

    start: float = 1.0
    end: float = 0.25
    total_steps: int = 1000

    def __post_init__(self) -> None:
        check_ratio(self.start, "Cosine.start")
        check_ratio(self.end, "Cosine.end")
        if self.total_steps < 1:
            raise NumuonError(f"Cosine.total_steps: {self.total_steps} must be >= 1")

    def __call__(self, step: int) -> float:
        t = min(max(step, 0), self.total_steps) / self.total_steps
        return self.end + (self.start - self.end) * 0.5 * (1.0 + math.cos(math.pi * t))
