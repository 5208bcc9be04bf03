"""Neighbourhood operators: which integer variables the next sub-MIP may change.

An operator maps ``(instance, state, rng, k)`` to a :class:`Neighbourhood`: the free set ``F``
(every other integer variable is fixed to the incumbent; continuous variables are never fixed)
and, for local branching, a Hamming radius. ``k`` is the adaptive neighbourhood size in
variables, scaled by the operator's own ``size`` parameter. Families (notes section 1a):

- ``random``: ``k`` integer variables uniformly at random;
- ``block``: constraint-block (ACP): random constraints, freeing their variables, until ``k``;
- ``bfs``: breadth-first search on the variable-constraint graph from a random variable
  (Song et al. 2020), frontier by frontier, until ``k``;
- ``rins``: RINS-like, variables whose root-LP value differs from the incumbent
  (``|x_lp - x_inc| > 0.5 * delta``), topped up at random;
- ``localbranch``: local branching: a region of ``radius_factor * k`` variables (BFS) is freed
  and the sub-MIP gets ``sum_{j in F} |x_j - x_inc_j| <= k``;
- ``scored``: the parametrised scoring family ``s_i = w1 |x_lp,i - x_inc,i| + w2 c~_i +
  w3 deg~_i + w4 u_i`` (``c~``, ``deg~`` objective and degree scaled to [0, 1], ``u`` uniform
  noise), freeing the top ``k``; LLM-LNS's evolved ``select_neighborhood`` has this shape;
- ``rens`` (Berthold 2014): the integer variables whose root-LP value is fractional are free
  (the ``k`` most fractional), every other integer variable is fixed to its *rounded LP value*,
  not the incumbent's; falls back to ``rins`` without an LP point;
- ``crossover`` (SCIP's crossover heuristic): the variables on which the incumbent and an
  earlier incumbent of the run disagree are free, topped up at random to ``k``; falls back to
  ``random`` while there is only one incumbent;
- ``dins`` (Ghosh 2007, with the root LP for the node LP): free where ``|x_lp - x_inc| >= 0.5``
  and, for binaries, where the last two incumbents disagree, topped up at random;
- ``proximity`` (Fischetti & Monaci 2014): a BFS region of ``k`` variables whose sub-MIP
  minimises the Hamming distance to the incumbent subject to ``c x <= f(x_inc) - delta |f|``.

All are vectorised over numpy arrays (BFS expands whole frontiers through CSR/CSC slices).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from pall_lns.errors import PallError
from pall_lns.instance import Instance

__all__ = ["FAMILIES", "Neighbourhood", "OperatorSpec", "State", "default_pool", "neighbourhood"]

FAMILIES = (
    "random",
    "block",
    "bfs",
    "rins",
    "localbranch",
    "scored",
    "rens",
    "crossover",
    "dins",
    "proximity",
)

#: Parameter defaults and search ranges (low, high) per family, used by ``pall evolve``.
PARAM_SPACE: dict[str, dict[str, tuple[float, float, float]]] = {
    "random": {"size": (1.0, 0.3, 3.0)},
    "block": {"size": (1.0, 0.3, 3.0)},
    "bfs": {"size": (1.0, 0.3, 3.0)},
    "rins": {"size": (1.0, 0.3, 3.0), "delta": (1.0, 0.1, 1.0)},
    "localbranch": {"size": (0.3, 0.05, 1.0), "radius_factor": (4.0, 2.0, 10.0)},
    "scored": {
        "size": (1.0, 0.3, 3.0),
        "w1": (1.0, -1.0, 1.0),
        "w2": (0.0, -1.0, 1.0),
        "w3": (0.0, -1.0, 1.0),
        "w4": (0.5, 0.0, 1.0),
    },
    "rens": {"size": (1.0, 0.3, 3.0)},
    "crossover": {"size": (1.0, 0.3, 3.0)},
    "dins": {"size": (1.0, 0.3, 3.0)},
    "proximity": {"size": (1.0, 0.3, 3.0), "delta": (0.001, 0.0001, 0.02)},
}


@dataclass(frozen=True)
class OperatorSpec:
    """One operator: a family and its parameters (the unit ``pall evolve`` searches over)."""

    family: str
    params: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.family not in PARAM_SPACE:
            raise PallError(f"operator family {self.family!r}: not one of {', '.join(FAMILIES)}")
        unknown = set(self.params) - set(PARAM_SPACE[self.family])
        if unknown:
            raise PallError(f"operator {self.family}: unknown parameter {sorted(unknown)[0]!r}")

    def get(self, name: str) -> float:
        return float(self.params.get(name, PARAM_SPACE[self.family][name][0]))

    @property
    def label(self) -> str:
        extra = ",".join(f"{k}={v:.2g}" for k, v in sorted(self.params.items()))
        return f"{self.family}({extra})" if extra else self.family

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> OperatorSpec:
        if not isinstance(data, dict) or "family" not in data:
            raise PallError(f"operator entry {data!r}: expected {{'family': ..., 'params': ...}}")
        return cls(str(data["family"]), {k: float(v) for k, v in data.get("params", {}).items()})


def default_pool() -> list[OperatorSpec]:
    """One operator per family at its default parameters."""
    return [OperatorSpec(f) for f in FAMILIES]


@dataclass
class State:
    """What operators may look at: incumbent, root-LP point (None when SCIP solved no LP) and
    the run's earlier incumbents (newest last, the current one excluded)."""

    x: np.ndarray
    x_lp: np.ndarray | None = None
    previous: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class Neighbourhood:
    """Free integer variables and what else the sub-MIP needs: a local-branching radius, the
    values to fix the others to (RENS; default the incumbent), a proximity ``delta``."""

    free: np.ndarray
    hamming: int | None = None
    fix_to: np.ndarray | None = None
    proximity: float | None = None


def _cap(rng: np.random.Generator, idx: np.ndarray, k: int) -> np.ndarray:
    return idx if idx.size <= k else rng.choice(idx, size=k, replace=False)


def _top_up(rng: np.random.Generator, inst: Instance, idx: np.ndarray, k: int) -> np.ndarray:
    """Fill ``idx`` up to ``k`` integer variables with random others."""
    if idx.size >= k:
        return idx
    mask = np.zeros(inst.n, dtype=bool)
    mask[idx] = True
    rest = inst.int_idx[~mask[inst.int_idx]]
    return np.concatenate([idx, _cap(rng, rest, k - idx.size)])


def _block(inst: Instance, rng: np.random.Generator, k: int) -> np.ndarray:
    if inst.m == 0:
        return _cap(rng, inst.int_idx, k)
    order = rng.permutation(inst.m)
    lengths = np.diff(inst.indptr)[order]
    take = order[: int(np.searchsorted(np.cumsum(lengths), k)) + 1]
    cols = np.concatenate([inst.indices[inst.indptr[r] : inst.indptr[r + 1]] for r in take])
    cols = np.unique(cols)
    cols = cols[inst.is_int[cols]]
    return _top_up(rng, inst, _cap(rng, cols, k), k)


def _slices(ptr: np.ndarray, idx: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Concatenate ``idx[ptr[i]:ptr[i+1]]`` for all ``i`` in ``items`` (vectorised)."""
    starts, ends = ptr[items], ptr[items + 1]
    lens = ends - starts
    if lens.sum() == 0:
        return np.zeros(0, dtype=idx.dtype)
    offs = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return idx[np.arange(lens.sum()) + offs]


def _bfs(inst: Instance, rng: np.random.Generator, k: int) -> np.ndarray:
    seen = np.zeros(inst.n, dtype=bool)
    seen_row = np.zeros(max(inst.m, 1), dtype=bool)
    start = int(rng.choice(inst.int_idx))
    frontier = np.array([start])
    seen[start] = True
    out = [frontier]
    count = 1
    while count < k and frontier.size:
        rows = np.unique(_slices(inst.col_ptr, inst.col_rows, frontier))
        rows = rows[~seen_row[rows]]
        seen_row[rows] = True
        nxt = np.unique(_slices(inst.indptr, inst.indices, rows))
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        nxt = rng.permutation(nxt)
        out.append(nxt)
        count += nxt.size
        frontier = nxt
    cols = np.concatenate(out)
    cols = cols[inst.is_int[cols]][:k]
    return _top_up(rng, inst, cols, k)


def _scores(
    inst: Instance, state: State, spec: OperatorSpec, rng: np.random.Generator, k: int
) -> np.ndarray:
    """Eq. (scored family): ``s_i = w1 |x_lp,i - x_inc,i| + w2 c~_i + w3 deg~_i + w4 u_i``."""
    ii = inst.int_idx
    dist = np.zeros(ii.size) if state.x_lp is None else np.abs(state.x_lp[ii] - state.x[ii])
    c = inst.c[ii]
    c_n = (c - c.min()) / max(float(np.ptp(c)), 1e-12)
    d = inst.degree[ii].astype(float)
    d_n = (d - d.min()) / max(float(np.ptp(d)), 1e-12)
    s = (
        spec.get("w1") * dist
        + spec.get("w2") * c_n
        + spec.get("w3") * d_n
        + spec.get("w4") * rng.random(ii.size)
    )
    top = np.argpartition(-s, min(k, ii.size) - 1)[:k] if k < ii.size else np.arange(ii.size)
    return ii[top]


def neighbourhood(
    spec: OperatorSpec, inst: Instance, state: State, rng: np.random.Generator, k: int
) -> Neighbourhood:
    """The free set chosen by ``spec`` for adaptive size ``k`` (scaled by ``spec.size``)."""
    n_int = inst.int_idx.size
    if n_int == 0:
        return Neighbourhood(np.zeros(0, dtype=np.int64))
    kk = int(np.clip(round(k * spec.get("size")), 1, n_int))
    fam = spec.family
    if fam == "random":
        free = _cap(rng, inst.int_idx, kk)
    elif fam == "block":
        free = _block(inst, rng, kk)
    elif fam == "bfs":
        free = _bfs(inst, rng, kk)
    elif fam == "rins":
        if state.x_lp is None:
            free = _cap(rng, inst.int_idx, kk)
        else:
            ii = inst.int_idx
            diff = ii[np.abs(state.x_lp[ii] - state.x[ii]) > 0.5 * spec.get("delta")]
            free = _top_up(rng, inst, _cap(rng, diff, kk), kk)
    elif fam == "localbranch":
        region = int(np.clip(round(kk * spec.get("radius_factor")), 1, n_int))
        return Neighbourhood(np.sort(_bfs(inst, rng, region)), hamming=max(1, kk))
    elif fam == "rens":
        if state.x_lp is None:
            return neighbourhood(OperatorSpec("rins", {"size": spec.get("size")}), inst, state,
                                 rng, k)  # fmt: skip
        ii = inst.int_idx
        frac = np.abs(state.x_lp[ii] - np.round(state.x_lp[ii]))
        order = np.argsort(-frac, kind="stable")
        chosen = ii[order[: min(kk, int(np.count_nonzero(frac > 1e-6)))]]
        fix_to = np.clip(np.round(state.x_lp), inst.lb, inst.ub)
        return Neighbourhood(np.sort(chosen.astype(np.int64)), fix_to=fix_to)
    elif fam == "crossover":
        if not state.previous:
            free = _cap(rng, inst.int_idx, kk)
        else:
            ii = inst.int_idx
            differ = ii[state.previous[-1][ii] != state.x[ii]]
            free = _top_up(rng, inst, _cap(rng, differ, kk), kk)
    elif fam == "dins":
        ii = inst.int_idx
        far = np.zeros(ii.size, dtype=bool)
        if state.x_lp is not None:
            far |= np.abs(state.x_lp[ii] - state.x[ii]) >= 0.5
        if state.previous:
            far |= state.previous[-1][ii] != state.x[ii]
        free = _top_up(rng, inst, _cap(rng, ii[far], kk), kk)
    elif fam == "proximity":
        return Neighbourhood(np.sort(_bfs(inst, rng, kk)), proximity=spec.get("delta"))
    else:
        free = _scores(inst, state, spec, rng, kk)
    return Neighbourhood(np.sort(free.astype(np.int64)))
