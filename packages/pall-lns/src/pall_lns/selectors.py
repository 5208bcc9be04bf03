"""Operator selectors behind one interface: ``select(ctx) -> op`` and ``update(ctx, op, r)``.

- :class:`RandomSelector`: uniform over the ensemble (random-operator LNS);
- :class:`FixedSelector`: always one operator (the "best single operator" baseline);
- :class:`UCBSelector`: the UCB1 bandit of SCIP's ALNS heuristic (``heur_alns.c``) with its
  reward: ``r = eta * 1[improved] + (1 - eta) * closed_gap``, scaled down by effort;
  :class:`Exp3Selector` and :class:`EpsilonGreedySelector`, its other two bandits;
- :class:`LearnedSelector`: softmax policy ``p(o | ctx) = softmax(W phi(ctx))_o`` trained on
  hindsight-oracle labels (:mod:`pall_lns.train`), shipped as JSON weights;
- :class:`LLMSelector`: any paperstack ``ChatModel`` (or a ``str -> str`` callable) reading
  :meth:`Context.prompt`, answer parsed as ``OP=<id>``, with a timeout and a fallback selector.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pall_lns.context import Context
from pall_lns.errors import PallError
from pall_lns.operators import OperatorSpec

__all__ = [
    "DEFAULT_SELECTOR",
    "EpsilonGreedySelector",
    "Exp3Selector",
    "FixedSelector",
    "LLMSelector",
    "LearnedSelector",
    "RandomSelector",
    "Selector",
    "UCBSelector",
    "alns_reward",
    "load_default",
]

DEFAULT_SELECTOR = "default_selector.json"
_OP_RE = re.compile(r"OP\s*=\s*(\d+)")


@runtime_checkable
class Selector(Protocol):
    name: str

    def select(self, ctx: Context) -> int: ...

    def update(self, ctx: Context, op: int, reward: float) -> None: ...


def alns_reward(improved: bool, closed_gap: float, effort: float, eta: float = 0.8) -> float:
    """SCIP ALNS reward: ``(eta * 1[improved] + (1 - eta) * closed_gap) / max(effort, 0.1)``,
    clipped to [0, 1]; ``effort`` is the sub-MIP time over its limit."""
    r = (eta * float(improved) + (1.0 - eta) * min(max(closed_gap, 0.0), 1.0)) / max(effort, 0.1)
    return float(min(1.0, max(0.0, r)))


class RandomSelector:
    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self.rng = np.random.default_rng(seed)

    def select(self, ctx: Context) -> int:
        return int(self.rng.integers(0, ctx.n_ops))

    def update(self, ctx: Context, op: int, reward: float) -> None:
        return None


class FixedSelector:
    name = "fixed"

    def __init__(self, op: int) -> None:
        self.op = int(op)

    def select(self, ctx: Context) -> int:
        if not 0 <= self.op < ctx.n_ops:
            raise PallError(f"operator id {self.op}: the ensemble has {ctx.n_ops} operators")
        return self.op

    def update(self, ctx: Context, op: int, reward: float) -> None:
        return None


class _MeanBandit:
    """Per-operator reward counts and sums, and the rule every SCIP ALNS bandit starts with:
    each operator is tried once before any is preferred."""

    def __init__(self, n_ops: int, seed: int) -> None:
        self.n = np.zeros(n_ops)
        self.s = np.zeros(n_ops)
        self.seed = int(seed)
        self.rng = np.random.default_rng(seed)

    def untried(self) -> int | None:
        idle = np.flatnonzero(self.n == 0)
        return int(self.rng.choice(idle)) if idle.size else None

    def update(self, ctx: Context, op: int, reward: float) -> None:
        self.n[op] += 1
        self.s[op] += reward


class UCBSelector(_MeanBandit):
    """UCB1: ``argmax_o mean_o + c sqrt(2 ln t / n_o)``, every arm tried once first.

    Rewards are :func:`alns_reward` values (in [0, 1]), passed by the LNS loop as ``reward``.
    """

    name = "bandit"

    def __init__(self, n_ops: int, c: float = 0.3, seed: int = 0) -> None:
        super().__init__(n_ops, seed)
        self.c = c

    def select(self, ctx: Context) -> int:
        first = self.untried()
        if first is not None:
            return first
        t = self.n.sum()
        ucb = self.s / self.n + self.c * np.sqrt(2.0 * math.log(t) / self.n)
        return int(np.argmax(ucb))


class EpsilonGreedySelector(_MeanBandit):
    """epsilon-greedy (one of SCIP ALNS's bandits, ``heur_alns.c``): with probability ``eps``
    a uniformly random operator, else the best running mean reward; untried ones first."""

    name = "egreedy"

    def __init__(self, n_ops: int, eps: float = 0.1, seed: int = 0) -> None:
        if not 0.0 <= eps <= 1.0:
            raise PallError(f"epsilon {eps}: must be in [0, 1]")
        super().__init__(n_ops, seed)
        self.eps = eps

    def select(self, ctx: Context) -> int:
        first = self.untried()
        if first is not None:
            return first
        if self.rng.random() < self.eps:
            return int(self.rng.integers(0, self.n.size))
        return int(np.argmax(self.s / self.n))


class Exp3Selector:
    """EXP3 (Auer et al. 2002; SCIP ALNS's 'e'): ``p_o = (1 - gamma) w_o / sum w + gamma / K``,
    and after reward ``r`` of the chosen ``o``: ``w_o *= exp(gamma r / (K p_o))``, the
    importance-weighted estimate that keeps the bandit unbiased against adversarial rewards."""

    name = "exp3"

    def __init__(self, n_ops: int, gamma: float = 0.07, seed: int = 0) -> None:
        if not 0.0 < gamma <= 1.0:
            raise PallError(f"gamma {gamma}: must be in (0, 1]")
        self.gamma = gamma
        self.log_w = np.zeros(n_ops)
        self.seed = int(seed)
        self.rng = np.random.default_rng(seed)

    def probabilities(self) -> np.ndarray:
        w = np.exp(self.log_w - self.log_w.max())
        k = self.log_w.size
        return (1.0 - self.gamma) * w / w.sum() + self.gamma / k

    def select(self, ctx: Context) -> int:
        return int(self.rng.choice(self.log_w.size, p=self.probabilities()))

    def update(self, ctx: Context, op: int, reward: float) -> None:
        p = self.probabilities()[op]
        self.log_w[op] += self.gamma * float(reward) / (self.log_w.size * p)


class LearnedSelector:
    """Softmax policy over the ensemble: ``argmax_o (W phi(ctx))_o`` (greedy at deployment)."""

    name = "learned"

    def __init__(
        self, weights: np.ndarray, ops: list[OperatorSpec], meta: dict[str, Any] | None = None
    ) -> None:
        self.W = np.asarray(weights, dtype=float)
        self.ops = ops
        self.meta = meta or {}
        if self.W.shape[0] != len(ops):
            raise PallError(f"selector weights have {self.W.shape[0]} rows for {len(ops)} ops")

    def scores(self, ctx: Context) -> np.ndarray:
        phi = ctx.features()
        if phi.shape[0] != self.W.shape[1]:
            raise PallError(
                f"selector expects {self.W.shape[1]} features, context has "
                f"{phi.shape[0]} (ensemble of a different size?)"
            )
        return self.W @ phi

    def select(self, ctx: Context) -> int:
        return int(np.argmax(self.scores(ctx)))

    def update(self, ctx: Context, op: int, reward: float) -> None:
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "pall-lns/selector-v1",
            "ops": [o.to_json() for o in self.ops],
            "weights": self.W.tolist(),
            "meta": self.meta,
        }

    @classmethod
    def load(cls, path: str | Path) -> LearnedSelector:
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError:
            raise PallError(f"{p}: no such selector file") from None
        except (OSError, ValueError) as exc:
            raise PallError(f"{p}: not a selector JSON file ({exc})") from None
        return cls.from_json(data, str(p))

    @classmethod
    def from_json(cls, data: Any, where: str = "selector") -> LearnedSelector:
        if not isinstance(data, dict) or data.get("format") != "pall-lns/selector-v1":
            raise PallError(f"{where}: field 'format' is not 'pall-lns/selector-v1'")
        try:
            ops = [OperatorSpec.from_json(o) for o in data["ops"]]
            w = np.asarray(data["weights"], dtype=float)
        except (KeyError, TypeError, ValueError) as exc:
            raise PallError(f"{where}: bad field ({exc})") from None
        if w.ndim != 2 or not np.all(np.isfinite(w)):
            raise PallError(f"{where}: field 'weights' must be a finite 2-D array")
        return cls(w, ops, data.get("meta", {}))


def load_default() -> LearnedSelector:
    """The shipped selector (ensemble + weights), produced by ``pall train``; see the README."""
    text = resources.files("pall_lns").joinpath("data", DEFAULT_SELECTOR).read_text()
    return LearnedSelector.from_json(json.loads(text), f"pall_lns/data/{DEFAULT_SELECTOR}")


class LLMSelector:
    """An LLM picks the operator from :meth:`Context.prompt`; ``OP=<id>`` is parsed.

    ``model`` is a paperstack ``ChatModel`` or a callable ``prompt -> text``. A reply that is
    late (over ``timeout`` seconds), unparsable or out of range falls back to ``fallback``
    (a bandit by default), which also receives every reward.
    """

    name = "llm"

    def __init__(
        self,
        model: Any,
        n_ops: int,
        timeout: float = 5.0,
        fallback: Selector | None = None,
        max_new_tokens: int = 16,
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.fallback = fallback if fallback is not None else UCBSelector(n_ops)
        self.max_new_tokens = max_new_tokens
        self.fallbacks = 0
        self._pool: ThreadPoolExecutor | None = None

    def _ask(self, prompt: str) -> str:
        if callable(self.model) and not hasattr(self.model, "generate"):
            fn: Callable[[str], str] = self.model
            return fn(prompt)
        return str(
            self.model.generate([prompt], max_new_tokens=self.max_new_tokens, temperature=0.0, n=1)[
                0
            ][0]
        )

    def select(self, ctx: Context) -> int:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1)
        future = self._pool.submit(self._ask, ctx.prompt())
        try:
            text = future.result(timeout=self.timeout)
        except FutureTimeout:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None  # abandon the late call; the next one gets a fresh thread
            text = ""
        except Exception:
            text = ""
        match = _OP_RE.search(text or "")
        if match and 0 <= int(match.group(1)) < ctx.n_ops:
            return int(match.group(1))
        self.fallbacks += 1
        return self.fallback.select(ctx)

    def update(self, ctx: Context, op: int, reward: float) -> None:
        self.fallback.update(ctx, op, reward)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_pool"] = None
        return state
