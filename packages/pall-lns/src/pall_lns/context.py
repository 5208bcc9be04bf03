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
from typing import Any

import numpy as np

__all__ = ["N_BASE_FEATURES", "Context", "Event", "context_from_json", "context_to_json"]

#: Features before the four per-operator blocks (mean reward, usage share, last operator,
#: reward within the history window).
N_BASE_FEATURES = 11
#: Per-operator feature blocks.
N_OP_BLOCKS = 4


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
            # the whole history window, not only the last event: how the search is going now
            float(np.mean([e.improved for e in self.history])) if self.history else 0.0,
            float(np.mean([e.status == "timelimit" for e in self.history]))
            if self.history
            else 0.0,
        ]
        mean = np.zeros(self.n_ops)
        share = np.zeros(self.n_ops)
        onehot = np.zeros(self.n_ops)
        recent = np.zeros(self.n_ops)
        if self.op_mean:
            mean = np.tanh(np.asarray(self.op_mean, dtype=float))
            share = np.asarray(self.op_count, dtype=float) / total
        if last is not None:
            onehot[last.op] = 1.0
        for o in {e.op for e in self.history}:
            recent[o] = np.tanh(np.mean([e.reward for e in self.history if e.op == o]))
        return np.concatenate([np.asarray(base), mean, share, onehot, recent])

    def text(self) -> str:
        """The compact serialisation the fine-tuned LM selector reads (a few hundred
        characters, so a character-level tiny model sees all of it): instance features, search
        phase, every operator's use count and mean reward, and the last ``h`` operators with
        their rewards (``+`` improved, ``-`` not, ``t`` timed out). Answer: ``OP=<id>``."""

        def num(v: float) -> str:
            return f"{max(-99.0, min(99.0, v)):.3f}"

        ops = " ".join(
            f"{i}:{self.op_count[i] if self.op_count else 0}/"
            f"{num(self.op_mean[i] if self.op_mean else 0.0)}"
            for i in range(self.n_ops)
        )
        last = " ".join(
            f"{e.op}{'+' if e.improved else 't' if e.status == 'timelimit' else '-'}{num(e.reward)}"
            for e in self.history
        )
        return (
            f"milp vars {self.n_vars} rows {self.n_rows} int {self.int_frac:.2f} "
            f"dens {self.density:.1e}\n"
            f"phase {self.progress:.2f} iter {self.iteration} stall {self.stagnation} "
            f"k {self.k_frac:.3f} gap {min(self.gap, 9.999):.3f}\n"
            f"ops {ops}\nlast {last or '-'}"
        )

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


def context_to_json(ctx: Context) -> dict[str, Any]:
    """A :class:`Context` as plain JSON (for the selector worker's protocol)."""
    from dataclasses import asdict

    return asdict(ctx)


def context_from_json(data: dict[str, Any]) -> Context:
    """The inverse of :func:`context_to_json`."""
    fields: dict[str, Any] = dict(data)
    events = tuple(Event(**e) for e in fields.pop("history", ()))
    for key in ("op_labels", "op_mean", "op_count"):
        fields[key] = tuple(fields.get(key, ()))
    return Context(history=events, **fields)
