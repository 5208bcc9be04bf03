"""Seeded numpy generators for the four benchmark families, written as .lp files.

Ports of the classical generators (Gasse et al. 2019, ``learn2branch/01_generate_instances.py``)
to plain numpy, so no Ecole build is needed: set cover (Balas & Ho style), combinatorial auctions
(a simplified Leyton-Brown "arbitrary" scheme: bundles drawn by item popularity, prices from item
values with complementarity noise), capacitated facility location (Cornuejols et al. 1991) and
maximum independent set on Barabasi-Albert graphs (edge formulation). Each family has sizes from
``smoke`` (CI) to ``xl`` (100k+ variables).

Each instance is written as ``<name>.lp`` with a sidecar ``<name>.json`` holding the family,
size, seed and, once a long reference run has been made, ``best_known`` (the reference value of
the primal gap, in the model's own sense).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pall_lns.errors import PallError
from paperstack.records import atomic_write, atomic_write_json

__all__ = ["FAMILIES", "SIZES", "Generated", "generate", "write_lp"]

FAMILIES = ("setcover", "auction", "facility", "indset")

#: family -> size -> generator arguments. ``xl`` has >= 100k variables.
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "setcover": {
        "smoke": {"rows": 150, "cols": 300, "density": 0.05},
        "small": {"rows": 500, "cols": 1000, "density": 0.05},
        "medium": {"rows": 1000, "cols": 2000, "density": 0.05},
        "large": {"rows": 2000, "cols": 4000, "density": 0.05},
        "xl": {"rows": 20000, "cols": 100000, "density": 0.0005},
    },
    "auction": {
        "smoke": {"items": 40, "bids": 200},
        "small": {"items": 100, "bids": 500},
        "medium": {"items": 200, "bids": 1000},
        "large": {"items": 300, "bids": 1500},
        "xl": {"items": 20000, "bids": 100000},
    },
    "facility": {
        "smoke": {"customers": 20, "facilities": 10, "ratio": 5.0},
        "small": {"customers": 50, "facilities": 30, "ratio": 5.0},
        "medium": {"customers": 100, "facilities": 50, "ratio": 5.0},
        "large": {"customers": 200, "facilities": 100, "ratio": 5.0},
        "xl": {"customers": 1000, "facilities": 100, "ratio": 5.0},
    },
    "indset": {
        "smoke": {"nodes": 200, "affinity": 4},
        "small": {"nodes": 500, "affinity": 4},
        "medium": {"nodes": 1000, "affinity": 4},
        "large": {"nodes": 1500, "affinity": 4},
        "xl": {"nodes": 100000, "affinity": 4},
    },
}


@dataclass(frozen=True)
class _Milp:
    """Rows as COO triplets plus sides; ``sense`` is "minimize" or "maximize"."""

    sense: str
    cost: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    binary: np.ndarray
    ub: np.ndarray


@dataclass(frozen=True)
class Generated:
    path: Path
    meta: dict[str, Any]


def _set_cover(rng: np.random.Generator, rows: int, cols: int, density: float) -> _Milp:
    nnz = int(rows * cols * density)
    r = np.concatenate(
        [rng.integers(0, rows, nnz), np.repeat(np.arange(rows), 2), rng.integers(0, rows, cols)]
    )
    c = np.concatenate(
        [rng.integers(0, cols, nnz), rng.integers(0, cols, 2 * rows), np.arange(cols)]
    )
    key = np.unique(r.astype(np.int64) * cols + c)
    r, c = key // cols, key % cols
    return _Milp(
        "minimize",
        rng.integers(1, 101, cols).astype(float),
        r,
        c,
        np.ones(r.size),
        np.ones(rows),
        np.full(rows, np.inf),
        np.ones(cols, bool),
        np.ones(cols),
    )


def _auction(rng: np.random.Generator, items: int, bids: int) -> _Milp:
    value = rng.uniform(1.0, 100.0, items)
    popularity = rng.dirichlet(np.full(items, 0.5))
    size = 1 + rng.poisson(4.0, bids)
    bid_of = np.repeat(np.arange(bids), size)
    item = rng.choice(items, size=bid_of.size, p=popularity)
    key = np.unique(bid_of.astype(np.int64) * items + item)
    bid_of, item = key // items, key % items
    base = np.bincount(bid_of, weights=value[item], minlength=bids)
    count = np.bincount(bid_of, minlength=bids)
    price = base * rng.uniform(1.0, 1.5, bids) * (1 + 0.2 * count) ** 0.5
    return _Milp(
        "maximize",
        np.round(price, 2),
        item,
        bid_of,
        np.ones(item.size),
        np.full(items, -np.inf),
        np.ones(items),
        np.ones(bids, bool),
        np.ones(bids),
    )


def _facility(rng: np.random.Generator, customers: int, facilities: int, ratio: float) -> _Milp:
    cx, cy = rng.random(customers), rng.random(customers)
    fx, fy = rng.random(facilities), rng.random(facilities)
    demand = rng.integers(5, 36, customers).astype(float)
    cap = rng.integers(10, 161, facilities).astype(float)
    fixed = np.round(
        rng.integers(100, 111, facilities) * np.sqrt(cap) + rng.integers(0, 91, facilities)
    )
    cap = np.round(cap * ratio * demand.sum() / cap.sum())
    dist = np.sqrt((cx[:, None] - fx[None, :]) ** 2 + (cy[:, None] - fy[None, :]) ** 2)
    trans = np.round(dist * 10 * demand[:, None], 3)
    nx = customers * facilities  # x_ij at i * facilities + j, then y_j at nx + j
    xi = np.arange(nx)
    i_of, j_of = xi // facilities, xi % facilities
    y = nx + np.arange(facilities)
    r_dem = i_of
    r_cap_x, r_cap_y = customers + j_of, customers + np.arange(facilities)
    r_tot = np.full(facilities, customers + facilities)
    r_tight = customers + facilities + 1 + xi
    rows = np.concatenate([r_dem, r_cap_x, r_cap_y, r_tot, r_tight, r_tight])
    cols = np.concatenate([xi, xi, y, y, xi, y[j_of]])
    vals = np.concatenate([np.ones(nx), demand[i_of], -cap, cap, np.ones(nx), -np.ones(nx)])
    m = customers + facilities + 1 + nx
    lo = np.full(m, -np.inf)
    hi = np.zeros(m)
    lo[:customers], hi[:customers] = 1.0, np.inf
    lo[customers + facilities], hi[customers + facilities] = demand.sum(), np.inf
    binary = np.zeros(nx + facilities, bool)
    binary[nx:] = True
    return _Milp(
        "minimize",
        np.concatenate([trans.ravel(), fixed]),
        rows,
        cols,
        vals,
        lo,
        hi,
        binary,
        np.ones(nx + facilities),
    )


def _indset(rng: np.random.Generator, nodes: int, affinity: int) -> _Milp:
    # Barabasi-Albert: each new node links to `affinity` earlier nodes, chosen by degree.
    a = affinity
    src = [np.repeat(np.arange(a + 1), a + 1)]
    dst = [np.tile(np.arange(a + 1), a + 1)]
    keep = src[0] < dst[0]
    src, dst = [src[0][keep]], [dst[0][keep]]
    ends = list(np.concatenate([src[0], dst[0]]))  # degree-weighted urn
    for v in range(a + 1, nodes):
        picks: set[int] = set()
        while len(picks) < a:
            picks.add(int(ends[int(rng.integers(0, len(ends)))]))
        targets = np.fromiter(picks, dtype=np.int64, count=a)
        src.append(targets)
        dst.append(np.full(a, v))
        ends.extend(targets.tolist())
        ends.extend([v] * a)
    u, w = np.concatenate(src), np.concatenate(dst)
    e = np.arange(u.size)
    return _Milp(
        "maximize",
        np.ones(nodes),
        np.concatenate([e, e]),
        np.concatenate([u, w]),
        np.ones(2 * u.size),
        np.full(u.size, -np.inf),
        np.ones(u.size),
        np.ones(nodes, bool),
        np.ones(nodes),
    )


def _fmt(v: np.ndarray) -> list[str]:
    return [f"{x:.12g}" for x in v.tolist()]


def write_lp(path: Path, milp: _Milp, comment: str = "") -> None:
    """Write CPLEX LP text, one term per line (SCIP's LP reader limits line length)."""
    n = milp.cost.size
    names = np.array([f"x{j}" for j in range(n)], dtype=object)
    out = [f"\\ {comment}", "Maximize" if milp.sense == "maximize" else "Minimize", " obj:"]
    nzc = np.flatnonzero(milp.cost != 0)
    out += [f" + {c} {nm}" for c, nm in zip(_fmt(milp.cost[nzc]), names[nzc], strict=True)]
    out.append("Subject To")
    order = np.lexsort((milp.cols, milp.rows))
    r, c, v = milp.rows[order], milp.cols[order], milp.vals[order]
    starts = np.searchsorted(r, np.arange(milp.lo.size + 1))
    terms = [
        f" {'+' if x >= 0 else '-'} {abs(x):.12g} {nm}"
        for x, nm in zip(v.tolist(), names[c], strict=True)
    ]
    for i in range(milp.lo.size):
        body = terms[starts[i] : starts[i + 1]]
        if not body:
            continue
        lo, hi = milp.lo[i], milp.hi[i]
        if np.isfinite(lo) and np.isfinite(hi):
            out += [f" r{i}_lo:", *body, f" >= {lo:.12g}", f" r{i}_hi:", *body, f" <= {hi:.12g}"]
        elif np.isfinite(lo):
            out += [f" r{i}:", *body, f" >= {lo:.12g}"]
        else:
            out += [f" r{i}:", *body, f" <= {hi:.12g}"]
    out.append("Bounds")
    cont = np.flatnonzero(~milp.binary)
    out += [f" 0 <= {names[j]} <= {milp.ub[j]:.12g}" for j in cont]
    out.append("Binaries")
    out += [f" {nm}" for nm in names[milp.binary]]
    out.append("End")
    atomic_write(path, "\n".join(out) + "\n")


def generate(family: str, size: str, seed: int, out_dir: str | Path, fmt: str = "lp") -> Generated:
    """Generate one instance of ``family`` at ``size`` with ``seed`` into ``out_dir``.

    ``fmt="mps"`` converts the LP text through SCIP's writer (free MPS), so both formats hold
    the same model."""
    if fmt not in ("lp", "mps"):
        raise PallError(f"--format {fmt!r}: not one of lp, mps")
    if family not in SIZES:
        raise PallError(f"--family {family!r}: not one of {', '.join(FAMILIES)}")
    if size not in SIZES[family]:
        raise PallError(f"--size {size!r}: not one of {', '.join(SIZES[family])}")
    rng = np.random.default_rng([seed, FAMILIES.index(family)])
    args = SIZES[family][size]
    table: dict[str, Callable[..., _Milp]] = {
        "setcover": _set_cover,
        "auction": _auction,
        "facility": _facility,
        "indset": _indset,
    }
    fn = table[family]
    milp = fn(rng, **args)
    name = f"{family}-{size}-s{seed}"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.lp"
    write_lp(path, milp, comment=f"pall-lns generator: {family} {size} seed {seed} {args}")
    meta: dict[str, Any] = {
        "family": family,
        "size": size,
        "seed": seed,
        "params": args,
        "n_vars": int(milp.cost.size),
        "n_rows": int(milp.lo.size),
        "sense": milp.sense,
    }
    if fmt == "mps":
        from pall_lns.instance import read_scip_model

        model = read_scip_model(path)
        model.setProbName(name)  # else SCIP writes the reading path (a local path) into NAME
        mps = out / f"{name}.mps"
        model.writeProblem(str(mps), verbose=False)
        path.unlink()
        path = mps
    atomic_write_json(out / f"{name}.json", meta)
    return Generated(path, meta)


def record_best_known(path: str | Path, value: float, source: str) -> None:
    """Store a reference value (model sense) in the sidecar metadata of ``path``."""
    p = Path(path)
    side = p.with_name(p.name.split(".")[0] + ".json")
    meta = json.loads(side.read_text()) if side.is_file() else {}
    meta["best_known"] = float(value)
    meta["best_known_source"] = source
    atomic_write_json(side, meta)
