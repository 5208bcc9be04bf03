"""Branch-admission policies behind one interface: IRP-Off, IRP-Eager, fixed caps, and Pace.

Every policy answers the same question each step: of the pending branches (a
:class:`~pace_scheduler.admission.StepView`'s candidates), which start decoding now? Branches not
admitted wait; each request's own sequence keeps decoding its branches one after another, so
IRP-Off is "every branch serially inside the parent".

All policies respect the same resource limits (free KV blocks, free sequence slots), so they
differ only in the admission decision.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from pace_scheduler.admission import PaceConfig, PaceController, StepView
from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import LatencyModel

__all__ = [
    "GlobalCap",
    "IRPEager",
    "IRPOff",
    "Pace",
    "PerRequestCap",
    "Policy",
    "make_policy",
]


class Policy(ABC):
    """Decides per step which pending branches join the batch."""

    name: str = "policy"
    #: False for a policy that never admits a branch: the engine may skip building its view.
    admits: bool = True

    @abstractmethod
    def admit(self, view: StepView) -> np.ndarray:
        """Boolean mask over ``view``'s candidates."""

    def observe(self, features: np.ndarray, seconds: float) -> None:  # noqa: B027
        """A measured step (features, seconds); only adaptive policies use it."""

    @property
    def decision_seconds(self) -> list[float]:
        return []


class IRPOff(Policy):
    """No intra-request parallelism: every branch runs serially in its request's sequence."""

    name = "irp-off"
    admits = False

    def admit(self, view: StepView) -> np.ndarray:
        return np.zeros(view.n_candidates, dtype=bool)


class IRPEager(Policy):
    """Admit every pending branch as soon as KV blocks and sequence slots allow."""

    name = "irp-eager"

    def admit(self, view: StepView) -> np.ndarray:
        return view.resource_prefix()


class PerRequestCap(Policy):
    """At most ``cap`` concurrent sequences per request (``cap = 1`` is IRP-Off)."""

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise PaceSchedulerError(f"per-request cap must be >= 1, got {cap}")
        self.cap = cap
        self.name = f"cap-{cap}"

    def admit(self, view: StepView) -> np.ndarray:
        allowed = view.cand_width + view.cand_rank <= self.cap
        return allowed & view.resource_prefix_of(allowed)


class GlobalCap(Policy):
    """At most ``cap`` extra branch sequences in the whole batch, first come first served."""

    def __init__(self, cap: int) -> None:
        if cap < 0:
            raise PaceSchedulerError(f"global cap must be >= 0, got {cap}")
        self.cap = cap
        self.name = f"global-{cap}"

    def admit(self, view: StepView) -> np.ndarray:
        room = max(self.cap - view.extra_lanes, 0)
        allowed = np.arange(view.n_candidates) < room
        return allowed & view.resource_prefix_of(allowed)


class Pace(Policy):
    """Pace: admit while the predicted externality fits the batch's slack budget."""

    name = "pace"

    def __init__(
        self,
        model: LatencyModel,
        config: PaceConfig | None = None,
        prior_x: np.ndarray | None = None,
        prior_y: np.ndarray | None = None,
    ) -> None:
        self.controller = PaceController.from_model(model, config, prior_x, prior_y)
        if self.controller.config.amortize:
            self.name = "pace-amortized"

    def admit(self, view: StepView) -> np.ndarray:
        return self.controller.decide(view)

    def observe(self, features: np.ndarray, seconds: float) -> None:
        self.controller.observe(features, seconds)

    @property
    def decision_seconds(self) -> list[float]:
        return self.controller.decision_seconds


def make_policy(
    name: str,
    model: LatencyModel | None = None,
    prior_x: np.ndarray | None = None,
    prior_y: np.ndarray | None = None,
) -> Policy:
    """A policy from its name: ``irp-off``, ``irp-eager``, ``cap-N``, ``global-N``, ``pace``,
    ``pace-amortized`` (Pace with ``PaceConfig(amortize=True)``)."""
    if name == "irp-off":
        return IRPOff()
    if name == "irp-eager":
        return IRPEager()
    if name in ("pace", "pace-amortized"):
        if model is None:
            raise PaceSchedulerError(f"policy {name!r} needs a latency model")
        config = PaceConfig(amortize=name == "pace-amortized")
        return Pace(model, config, prior_x=prior_x, prior_y=prior_y)
    for prefix, cls in (("cap-", PerRequestCap), ("global-", GlobalCap)):
        if name.startswith(prefix):
            try:
                value = int(name[len(prefix) :])
            except ValueError:
                break
            return cls(value)
    raise PaceSchedulerError(
        f"policy {name!r}: expected irp-off, irp-eager, pace, pace-amortized, cap-N or global-N"
    )
