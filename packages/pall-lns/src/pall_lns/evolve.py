"""Offline evolution of operator parameters and the choice of a diverse ensemble.

For each operator family a (mu + lambda) evolution strategy searches the family's parameters
(:data:`pall_lns.operators.PARAM_SPACE`): children are Gaussian mutations (sigma = 20% of each
range, clipped), fitness is the mean primal integral of single-operator LNS over the training
instances (lower is better), with each instance's reference value the best objective any run
reached. Every evaluated operator is kept with its timelines.

The ensemble is then chosen by greedy maximum coverage over (instance, phase) cells: with
``u(o, i, p) = 1 - PI_p(o, i)`` the primal integral of operator ``o`` on instance ``i`` restricted
to phase ``p`` (equal thirds of the budget), pick ``K`` operators maximising
``sum_{i,p} max_{o in E} u(o, i, p)`` (a monotone submodular function, so greedy is within
``1 - 1/e`` of optimal). Operators that win a phase on some family survive even when their
average is weak.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pall_lns.errors import PallError
from pall_lns.lns import LnsConfig, run_lns
from pall_lns.metrics import primal_integral
from pall_lns.operators import FAMILIES, PARAM_SPACE, OperatorSpec
from pall_lns.selectors import FixedSelector

__all__ = ["Candidate", "choose_ensemble", "evolve", "load_ensemble", "phase_utility"]


@dataclass
class Candidate:
    spec: OperatorSpec
    timelines: list[list[tuple[float, float]]]
    finals: list[float]


def phase_utility(
    timeline: Sequence[tuple[float, float]], reference: float, horizon: float, phases: int
) -> np.ndarray:
    """``u_p = 1 - PI_p``: one minus the primal integral restricted to each phase window."""
    out = np.zeros(phases)
    for p in range(phases):
        a, b = horizon * p / phases, horizon * (p + 1) / phases
        shifted = [(t - a, v) for t, v in timeline if t <= b]
        first = [(0.0, v) for t, v in timeline if t <= a][-1:]  # incumbent carried in
        out[p] = 1.0 - primal_integral(first + [e for e in shifted if e[0] > 0], reference, b - a)
    return out


def _mutate(spec: OperatorSpec, rng: np.random.Generator) -> OperatorSpec:
    params = {}
    for name, (_default, lo, hi) in PARAM_SPACE[spec.family].items():
        v = spec.get(name) + rng.normal(0.0, 0.2 * (hi - lo))
        params[name] = float(np.clip(v, lo, hi))
    return OperatorSpec(spec.family, params)


def evolve(
    train: Sequence[str | Path],
    time_limit: float,
    *,
    generations: int = 2,
    mu: int = 2,
    lam: int = 2,
    families: Sequence[str] = FAMILIES,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> list[Candidate]:
    """Evaluate and evolve every family; returns all evaluated candidates."""
    if not train:
        raise PallError("pall evolve: no training instances")
    rng = np.random.default_rng(seed)
    evaluated: list[Candidate] = []

    def evaluate(spec: OperatorSpec) -> Candidate:
        tls, finals = [], []
        for j, path in enumerate(train):
            cfg = LnsConfig(time_limit, seed=seed + j)
            try:
                timeline = run_lns(path, [spec], FixedSelector(0), cfg).timeline
            except PallError:  # no incumbent within the budget: gap 1 throughout
                timeline = []
            tls.append(timeline)
            finals.append(min(v for _, v in timeline) if timeline else np.inf)
        cand = Candidate(spec, tls, finals)
        evaluated.append(cand)
        if log:
            log(f"evaluated {spec.label}")
        return cand

    def fitness(c: Candidate) -> float:
        refs = _references(evaluated, len(train))
        return float(
            np.mean(
                [
                    primal_integral(tl, r, time_limit)
                    for tl, r in zip(c.timelines, refs, strict=True)
                ]
            )
        )

    for fam in families:
        pop = [evaluate(OperatorSpec(fam))]
        pop += [evaluate(_mutate(OperatorSpec(fam), rng)) for _ in range(mu - 1)]
        for _ in range(generations):
            kids = [
                evaluate(_mutate(pop[int(rng.integers(len(pop)))].spec, rng)) for _ in range(lam)
            ]
            pop = sorted(pop + kids, key=fitness)[:mu]
    return evaluated


def _references(cands: Sequence[Candidate], n: int) -> list[float]:
    return [min(c.finals[i] for c in cands) for i in range(n)]


def choose_ensemble(
    cands: Sequence[Candidate], time_limit: float, k: int = 6, phases: int = 3
) -> tuple[list[int], np.ndarray, list[float]]:
    """Greedy max coverage over (instance x phase); returns (chosen indices, utilities, PI)."""
    n = len(cands[0].timelines)
    refs = _references(cands, n)
    util = np.array(
        [
            [phase_utility(c.timelines[i], refs[i], time_limit, phases) for i in range(n)]
            for c in cands
        ]
    ).reshape(len(cands), -1)
    mean_pi = [
        float(np.mean([primal_integral(c.timelines[i], refs[i], time_limit) for i in range(n)]))
        for c in cands
    ]
    chosen: list[int] = []
    covered = np.zeros(util.shape[1])
    for _ in range(min(k, len(cands))):
        gains = np.maximum(util, covered).sum(axis=1) - covered.sum()
        gains[chosen] = -np.inf
        best = int(np.argmax(gains - 1e-6 * np.asarray(mean_pi)))  # ties: better mean PI
        chosen.append(best)
        covered = np.maximum(covered, util[best])
    return chosen, util, mean_pi


def ensemble_json(
    cands: Sequence[Candidate],
    chosen: Sequence[int],
    mean_pi: Sequence[float],
    meta: dict[str, Any],
) -> dict[str, Any]:
    ops = [cands[i].spec for i in chosen]
    pis = [mean_pi[i] for i in chosen]
    return {
        "format": "pall-lns/ensemble-v1",
        "ops": [o.to_json() for o in ops],
        "mean_primal_integral": pis,
        "best_single": int(np.argmin(pis)),
        "meta": meta,
        "evaluated": [
            {"op": c.spec.to_json(), "mean_primal_integral": mean_pi[i]}
            for i, c in enumerate(cands)
        ],
    }


def load_ensemble(path: str | Path) -> tuple[list[OperatorSpec], int]:
    """Ops and the best single operator's index from an ensemble or selector JSON file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise PallError(f"{p}: no such ensemble file") from None
    except (OSError, ValueError) as exc:
        raise PallError(f"{p}: not JSON ({exc})") from None
    if not isinstance(data, dict) or "ops" not in data:
        raise PallError(f"{p}: field 'ops' is missing")
    ops = [OperatorSpec.from_json(o) for o in data["ops"]]
    best = int(data.get("best_single", data.get("meta", {}).get("best_single", 0)))
    return ops, best
