"""Issue #53, item 4: the scaling curve, 10k / 100k / 1M variables on two families.

At each point (family, size, generator seed) the instance is generated once, then PALL, plain
SCIP and HiGHS each run on it for the size's fixed time limit, each in its own process (so a
method's peak RSS is its own: that process's ``ru_maxrss``, and HiGHS's child's through
``RUSAGE_CHILDREN``). PALL is ``pall solve``'s default search: the shipped softmax-linear
selector, in-process (``--sync``), sub-MIPs freed on the critical path (one core, as the solvers
get), ``first_grace = 0`` (equal wall time: no uncharged time for its first solution), stop at
SCIP's proof (``gap = 0``). SCIP: defaults, one thread. HiGHS: one thread, in a child process
stopped ``HIGHS_GRACE`` seconds after its budget (it overran its own limit on 100k models).

Reference ("best known") per instance: the best final objective of the three methods at that
point (nothing longer fitted this session), so the time to a fixed gap is the time at which a
method's incumbent first came within that relative gap of the best any method found in the same
time limit; the best dual bound (SCIP's, PALL's initial run, HiGHS's) is recorded beside it, with
the proven gap of the reference. Overhead share: PALL's LNS loop time outside SCIP's
``optimize()`` (the ``pall bench`` definition) and its whole run outside any ``optimize()``.

Resumable: every finished (instance, method) is its own JSON under ``OUT/points/``; a rerun
skips them (a killed run keeps its finished points). ``OUT/scaling.json``, ``OUT/scaling.md``
and ``OUT/scaling.png`` are rebuilt from the points at the end of every run.

Run: ``python benchmarks/scaling.py OUT [--sizes 10k,100k,1m] [--families setcover,auction]``
(see ``--help``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: Generator arguments per family and size (variables: set cover's columns, auction's bids).
#: Set cover keeps the ``xl`` shape (rows = cols / 5, about 10 non-zeros per column), auction
#: too (items = bids / 5, 5 items per bid on average).
SHAPES: dict[str, dict[str, dict[str, Any]]] = {
    "setcover": {
        "smoke": {"rows": 150, "cols": 300, "density": 0.05},
        "10k": {"rows": 2000, "cols": 10000, "density": 0.005},
        "100k": {"rows": 20000, "cols": 100000, "density": 0.0005},
        "1m": {"rows": 200000, "cols": 1000000, "density": 0.00005},
    },
    "auction": {
        "smoke": {"items": 40, "bids": 200},
        "10k": {"items": 2000, "bids": 10000},
        "100k": {"items": 20000, "bids": 100000},
        "1m": {"items": 200000, "bids": 1000000},
    },
}
#: Time limit per size in wall seconds, fixed before the runs (``smoke``: the test's size).
TIME_LIMITS = {"smoke": 2.0, "10k": 30.0, "100k": 60.0, "1m": 120.0}
#: Relative gaps to the reference whose time of reaching is reported, fixed before the runs.
GAPS = (0.05, 0.01)
METHODS = ("pall", "scip", "highs")
HIGHS_GRACE = 30.0
SEED0 = 1000  # generator seeds SEED0, SEED0 + 1, ...


def _peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)  # a killed run leaves no half-written point


def _load() -> float:
    return os.getloadavg()[0]


def child_generate(family: str, size: str, seed: int, work: Path, out: Path) -> None:
    """Generate one instance into ``work``; its timing into ``out``."""
    from pall_lns import generators

    generators.SIZES[family][size] = SHAPES[family][size]
    t = time.perf_counter()
    g = generators.generate(family, size, seed, work)
    _write(
        out,
        {
            "instance": g.path.name,
            "family": family,
            "size": size,
            "seed": seed,
            "shape": SHAPES[family][size],
            "n_vars": g.meta["n_vars"],
            "n_rows": g.meta["n_rows"],
            "generate_s": time.perf_counter() - t,
            "lp_file_mb": g.path.stat().st_size / 2**20,
            "peak_rss_mb": _peak_mb(),
        },
    )


def child_run(method: str, path: Path, T: float, out: Path) -> None:
    """One method on one instance for ``T`` seconds; the point's JSON into ``out``."""
    from pall_lns.baselines import run_highs, run_scip
    from pall_lns.errors import PallError
    from pall_lns.lns import LnsConfig, run_lns
    from pall_lns.selectors import load_default

    res: dict[str, Any] = {
        "method": method,
        "instance": path.name,
        "time_limit_s": T,
        "load_start": _load(),
    }
    t0 = time.perf_counter()
    if method == "pall":
        sel = load_default()
        cfg = LnsConfig(T, seed=0, background_free=False, first_grace=0.0, gap=0.0)
        try:
            r = run_lns(path, sel.ops, sel, cfg, t0=t0)
        except PallError as exc:  # no incumbent within T
            res.update({"final": None, "timeline": [], "error": str(exc)})
        else:
            inner = r.stats["submip_breakdown_s"]
            res.update(
                {
                    "final": r.objective if r.x is not None else None,
                    "sense": r.stats["sense"],
                    "timeline": r.timeline,
                    "iterations": r.iterations,
                    # no LNS iteration (SCIP proved the optimum first): no loop to measure
                    "overhead_loop": r.overhead if r.iterations else None,
                    "loop_s": r.loop_s,
                    "submip_s": r.submip_s,
                    "init_end_s": r.stats["init_end_s"],
                    "dual_bound": r.stats["dual_bound"],
                    "stop": r.stats["stop"],
                    "submip_breakdown_s": inner,
                    "loop_breakdown_s": r.stats["loop_breakdown_s"],
                }
            )
            res["loop_share_of_run"] = r.loop_s / max(r.wall_s, 1e-9)
    else:
        if method == "scip":
            b = run_scip(path, T, t0=t0)
        else:
            b = run_highs(path, T, t0=t0, grace=HIGHS_GRACE)
        res.update(
            {
                "final": b.objective,
                "sense": b.sense,
                "timeline": b.timeline,
                "status": b.status,
                "dual_bound": b.dual_bound,
            }
        )
    res.update({"wall_s": time.perf_counter() - t0, "peak_rss_mb": _peak_mb(), "load_end": _load()})
    _write(out, res)


def _child(args: list[str], timeout: float, log: Any) -> int:
    cmd = [sys.executable, __file__, "--child", *args]
    try:
        return subprocess.run(cmd, timeout=timeout, stdout=log, stderr=log).returncode
    except subprocess.TimeoutExpired:
        return -9


def run_points(
    out: Path,
    work: Path,
    families: list[str],
    sizes: list[str],
    seeds: dict[str, int],
    methods: list[str],
    limits: dict[str, float],
) -> None:
    pts = out / "points"
    pts.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    with (out / "log.txt").open("a") as log:
        for size in sizes:
            T = limits[size]
            for family in families:
                for seed in range(SEED0, SEED0 + seeds[size]):
                    name = f"{family}-{size}-s{seed}"
                    todo = [m for m in methods if not (pts / f"{name}.{m}.json").is_file()]
                    if not todo:
                        continue
                    lp, gen = work / f"{name}.lp", pts / f"{name}.gen.json"
                    if not (lp.is_file() and gen.is_file()):
                        print(f"{time.strftime('%H:%M:%S')} generate {name}", file=log, flush=True)
                        args = ["generate", family, size, str(seed), str(work), str(gen)]
                        if _child(args, 1800, log) != 0:
                            print(f"  generation of {name} failed", file=log, flush=True)
                            continue
                    for m in todo:
                        print(
                            f"{time.strftime('%H:%M:%S')} {name} {m} T={T:g} load={_load():.1f}",
                            file=log,
                            flush=True,
                        )
                        point = pts / f"{name}.{m}.json"
                        rc = _child(["run", m, str(lp), str(T), str(point)], 4 * T + 600, log)
                        if rc != 0 and not point.is_file():
                            _write(
                                point,
                                {
                                    "method": m,
                                    "instance": lp.name,
                                    "time_limit_s": T,
                                    "final": None,
                                    "timeline": [],
                                    "error": f"process ended with {rc}",
                                },
                            )
                    for p in (lp, work / f"{name}.json"):
                        p.unlink(missing_ok=True)  # large; the generator seed rebuilds it
    summarise(out)


def _within(r: dict[str, Any], sense: float) -> float | None:
    """The run's final value (internal sense) if it kept to its budget (5% + 0.1 s of slack),
    else the best incumbent it found within that: a 1M model's reading is not interruptible,
    and what a run finds after T must not count (as :func:`pall_lns.experiment.final_within`)."""
    if r.get("final") is None:
        return None
    limit = 1.05 * r["time_limit_s"] + 0.1
    if (r.get("wall_s") or 0.0) <= limit:
        return float(sense * r["final"])
    inside = [v for t, v in r["timeline"] if t <= limit]
    return min(inside) if inside else None


def _first_within(
    timeline: list[list[float]], ref: float, gap: float, limit: float
) -> float | None:
    from pall_lns.metrics import primal_gap

    for t, v in sorted(timeline):
        if t > limit:
            break
        if primal_gap(v, ref) <= gap + 1e-12:
            return float(t)
    return None


def summarise(out: Path) -> dict[str, Any]:
    """Aggregate ``OUT/points`` into scaling.json, scaling.md and scaling.png."""
    from pall_lns.metrics import primal_gap, primal_integral

    pts = out / "points"
    gens = {
        json.loads(p.read_text())["instance"]: json.loads(p.read_text())
        for p in sorted(pts.glob("*.gen.json"))
    }
    runs = [
        json.loads(p.read_text())
        for p in sorted(pts.glob("*.json"))
        if not p.name.endswith(".gen.json")
    ]
    rows = []
    for inst, g in sorted(gens.items(), key=lambda kv: (kv[1]["family"], kv[1]["n_vars"])):
        mine = [r for r in runs if r["instance"] == inst]
        if not mine:
            continue
        sense = next((r["sense"] for r in mine if r.get("sense") is not None), 1.0)
        finals = [f for f in (_within(r, sense) for r in mine) if f is not None]
        ref = min(finals) if finals else None  # internal (minimisation) sense
        # SCIP reports +-1e20 (its infinity) before it has any dual bound
        duals = [sense * r["dual_bound"] for r in mine
                 if r.get("dual_bound") is not None and abs(r["dual_bound"]) < 1e19]  # fmt: skip
        dual = max(duals) if duals else None
        proven = None if ref is None or dual is None else primal_gap(ref, dual)
        for r in sorted(mine, key=lambda r: METHODS.index(r["method"])):
            T = r["time_limit_s"]
            f = _within(r, sense)
            row = {
                "family": g["family"],
                "size": g["size"],
                "instance": inst,
                "n_vars": g["n_vars"],
                "method": r["method"],
                "time_limit_s": T,
                "final": r.get("final"),
                "final_within_budget": None if f is None else sense * f,
                "reference": None if ref is None else sense * ref,
                "best_dual": None if dual is None else sense * dual,
                "reference_proven_gap": proven,
                "final_gap": None if ref is None else primal_gap(f, ref),
                "primal_integral": None
                if ref is None
                else primal_integral([tuple(x) for x in r["timeline"]], ref, T),
                "first_incumbent_s": min((t for t, _ in r["timeline"]), default=None),
                "wall_s": r.get("wall_s"),
                "peak_rss_mb": r.get("peak_rss_mb"),
                "overhead_loop": r.get("overhead_loop"),
                "iterations": r.get("iterations"),
                "generate_s": g["generate_s"],
                "lp_file_mb": g["lp_file_mb"],
                "load": [r.get("load_start"), r.get("load_end")],
                "error": r.get("error"),
                "status": r.get("status") or r.get("stop"),
            }
            for gap in GAPS:
                row[f"time_to_{gap:g}"] = (
                    None if ref is None else _first_within(r["timeline"], ref, gap, 1.05 * T + 0.1)
                )
            rows.append(row)
    data = {
        "time_limits_s": TIME_LIMITS,
        "gaps": list(GAPS),
        "methods": list(METHODS),
        "shapes": SHAPES,
        "rows": rows,
    }
    _write(out / "scaling.json", data)
    (out / "scaling.md").write_text(_table(rows))
    _plot(rows, out / "scaling.png")
    return data


def _fmt(v: Any, spec: str = ".1f", unit: str = "") -> str:
    return "-" if v is None else f"{v:{spec}}{unit}"


def _table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| family | size | instance | method | T | first incumbent | "
        + " | ".join(f"to {g:.0%} gap" for g in GAPS)
        + " | final | final gap | primal integral | overhead (loop) | iterations | peak RSS |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        err = f" ({r['error']})" if r.get("error") else ""
        lines.append(
            f"| {r['family']} | {r['size']} | {r['instance']} | {r['method']}{err} | "
            f"{r['time_limit_s']:g} s | {_fmt(r['first_incumbent_s'], '.1f', ' s')} | "
            + " | ".join(_fmt(r[f"time_to_{g:g}"], ".1f", " s") for g in GAPS)
            + f" | {_fmt(r['final_within_budget'], ',.2f')} | {_fmt(r['final_gap'], '.4f')} | "
            f"{_fmt(r['primal_integral'], '.3f')} | "
            f"{_fmt(None if r['overhead_loop'] is None else 100 * r['overhead_loop'], '.1f', '%')}"
            f" | {_fmt(r['iterations'], 'd')} | {_fmt(r['peak_rss_mb'], '.0f', ' MB')} |"
        )
    refs = {}
    for r in rows:
        refs[r["instance"]] = (
            r["reference"],
            r["best_dual"],
            r["reference_proven_gap"],
            r["generate_s"],
            r["lp_file_mb"],
        )
    lines += [
        "",
        "| instance | reference (best final of the methods) | best dual bound | "
        "proven gap of the reference | generation | .lp |",
        "|---|---|---|---|---|---|",
    ]
    for inst, (ref, dual, pg, gs, mb) in refs.items():
        lines.append(
            f"| {inst} | {_fmt(ref, ',.2f')} | {_fmt(dual, ',.2f')} | "
            f"{_fmt(pg, '.4f')} | {gs:.1f} s | {mb:.0f} MB |"
        )
    return "\n".join(lines) + "\n"


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Final gap and peak RSS against the number of variables, one line per family x method."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    keys = sorted({(r["family"], r["method"]) for r in rows})
    for fam, m in keys:
        mine = sorted(
            (r for r in rows if (r["family"], r["method"]) == (fam, m)), key=lambda r: r["n_vars"]
        )
        xs = [r["n_vars"] for r in mine]
        style = "-" if fam == "setcover" else "--"
        axes[0].plot(xs, [r["final_gap"] for r in mine], style, marker="o", label=f"{fam} {m}")
        axes[1].plot(xs, [r["peak_rss_mb"] or 0 for r in mine], style, marker="o")
    for ax, lab in zip(axes, ("final primal gap to the reference", "peak RSS (MB)"), strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("variables")
        ax.set_ylabel(lab)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        kind, *rest = argv[1:]
        if kind == "generate":
            fam, size, seed, work, out = rest
            child_generate(fam, size, int(seed), Path(work), Path(out))
        else:
            m, lp, T, out = rest
            child_run(m, Path(lp), float(T), Path(out))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--sizes", default="10k,100k,1m")
    p.add_argument("--families", default="setcover,auction")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--seeds", default="10k=2,100k=1,1m=1", help="instances per size")
    p.add_argument("--time-limits", default=None, help="e.g. 10k=30,100k=60,1m=120")
    p.add_argument("--work", type=Path, default=None, help="instance folder (default OUT/work)")
    p.add_argument("--summarise-only", action="store_true")
    a = p.parse_args(argv)
    if a.summarise_only:
        summarise(a.out)
        return
    seeds = {k: int(v) for k, v in (x.split("=") for x in a.seeds.split(","))}
    limits = dict(TIME_LIMITS)
    if a.time_limits:
        limits.update({k: float(v) for k, v in (x.split("=") for x in a.time_limits.split(","))})
    sizes = a.sizes.split(",")
    for s in sizes:
        if s not in limits:
            raise SystemExit(f"--sizes {s}: not one of {', '.join(limits)}")
    run_points(
        a.out,
        a.work or a.out / "work",
        a.families.split(","),
        sizes,
        {s: seeds.get(s, 1) for s in sizes},
        a.methods.split(","),
        limits,
    )


if __name__ == "__main__":
    main()
