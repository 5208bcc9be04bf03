"""The process-aware context a selector reads: instance, search phase and optimisation history.

PALL's selector sees "the optimisation history: operators tried, rewards, state". One
:class:`Context` carries it as plain numbers, and renders it two ways: :meth:`Context.features`,
a fixed-length vector for the learned (softmax) selector, and :meth:`Context.prompt`, text for an
LLM selector (the same text the SFT exporter writes). Contexts are small and picklable, so the
asynchronous selector process receives them cheaply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["N_BASE_FEATURES", "Context", "Event"]

#: Features before the three per-operator blocks (mean reward, usage share, last operator).
N_BASE_FEATURES = 9


@dataclass(frozen=True)
class Event:
    """One finished LNS iteration as the selector sees it."""

    op: int
    reward: float
    improved: bool
    status: str
    seconds: float


@dataclass(frozen=True)
class Context:
    """Selector input at the start of an iteration.

    ``progress`` is elapsed/T, ``stagnation`` the iterations since the last improvement,
    ``k_frac`` the adaptive neighbourhood size over the integer variables, ``gap`` the relative
    distance between incumbent and dual bound (1 when no bound is known), ``history`` the last
    ``h`` events, and ``op_mean``/``op_count`` each operator's running mean reward and usage.
    """

    n_ops: int
    op_labels: tuple[str, ...]
    n_vars: int
    n_rows: int
    density: float
    int_frac: float
    progress: float
    iteration: int
    stagnation: int
    k_frac: float
    gap: float
    history: tuple[Event, ...] = ()
    op_mean: tuple[float, ...] = field(default_factory=tuple)
    op_count: tuple[int, ...] = field(default_factory=tuple)

    def features(self) -> np.ndarray:
        """``phi(ctx)``: base features, then mean reward, usage share and last-op indicator."""
        last = self.history[-1] if self.history else None
        total = max(1, sum(self.op_count))
        base = [
            1.0,
            self.progress,
            math.log10(max(self.n_vars, 1)) / 6.0,
            min(1.0, self.density * 100.0),
            self.int_frac,
            min(self.stagnation, 20) / 20.0,
            min(1.0, self.k_frac * 5.0),
            float(last.improved) if last else 0.0,
            float(last is not None and last.status == "timelimit"),
        ]
        mean = np.zeros(self.n_ops)
        share = np.zeros(self.n_ops)
        onehot = np.zeros(self.n_ops)
        if self.op_mean:
            mean = np.tanh(np.asarray(self.op_mean, dtype=float))
            share = np.asarray(self.op_count, dtype=float) / total
        if last is not None:
            onehot[last.op] = 1.0
        return np.concatenate([np.asarray(base), mean, share, onehot])

    def prompt(self) -> str:
        """The context as text for an LLM selector; the answer format is ``OP=<id>``."""
        ops = "\n".join(
            f"  {i}: {label} (used {self.op_count[i] if self.op_count else 0} times, "
            f"mean reward {self.op_mean[i] if self.op_mean else 0.0:.3g})"
            for i, label in enumerate(self.op_labels)
        )
        hist = (
            "\n".join(
                f"  op {e.op}: reward {e.reward:.3g}, {'improved' if e.improved else 'no change'}, "
                f"{e.status}, {e.seconds:.2f}s"
                for e in self.history
            )
            or "  (none yet)"
        )
        return (
            "You choose the neighbourhood operator for the next iteration of large neighbourhood "
            "search on a MILP.\n"
            f"Instance: {self.n_vars} variables ({self.int_frac:.0%} integer), {self.n_rows} "
            f"rows, density {self.density:.2g}.\n"
            f"Search: {self.progress:.0%} of the time used, iteration {self.iteration}, "
            f"{self.stagnation} iterations without improvement, neighbourhood size "
            f"{self.k_frac:.1%} of the integer variables, gap to dual bound {self.gap:.3g}.\n"
            f"Operators:\n{ops}\nLast iterations:\n{hist}\n"
            "Answer with OP=<id>."
        )
