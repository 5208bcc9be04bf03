"""``pall``: the command line of pall-lns.

- ``pall solve MODEL --time-limit T``: PALL on your .lp/.mps file; prints each new incumbent,
  writes the checked solution (.sol) and a JSONL trajectory. Ctrl-C writes the best so far.
- ``pall generate``: seeded instances (set cover, auctions, facility location, independent set).
- ``pall evolve`` / ``pall oracle`` / ``pall train`` / ``pall export-sft``: the offline pipeline
  that produced the shipped default selector (operator ensemble + weights).
- ``pall demo --out DIR``: the reproduction (``--quick`` for CI); ``pall bench --out DIR``: LNS
  overhead outside the sub-MIPs as a share of wall time.

Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pall_lns import __version__
from pall_lns.errors import PallError
from paperstack.errors import cli_guard

PROG = "pall"
DIST = "pall-lns"

# The demo's protocol (toy scale; see README "Differences from the paper").
QUICK: dict[str, Any] = {
    "size": "small",
    "per_family": 1,
    "time_limit": 2.0,
    "reference_factor": 0.0,
}
FULL: dict[str, Any] = {
    "size": "medium",
    "per_family": 2,
    "time_limit": 20.0,
    "reference_factor": 2.0,
}
TEST_SEED_BASE = 1000  # test instances use seeds 1000+; training instances seeds 0-99


def _number(value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    return v


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"{DIST} {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("solve", help="run PALL on a .lp/.mps model and write the solution")
    s.add_argument("model", type=Path, help="model file (.lp, .mps, optionally .gz)")
    s.add_argument("--time-limit", type=_number, required=True, help="wall seconds (> 0)")
    s.add_argument("--sol", type=Path, default=None, help="solution file (default MODEL.sol)")
    s.add_argument(
        "--trajectory",
        type=Path,
        default=None,
        help="JSONL trajectory (default MODEL.trajectory.jsonl)",
    )
    s.add_argument(
        "--selector",
        default="default",
        help="default (shipped learned selector), random, bandit, or a selector JSON",
    )
    s.add_argument("--sync", action="store_true", help="select in-process (no async worker)")
    s.add_argument("--submip-time", type=float, default=0.0, help="sub-MIP limit (0 = auto)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--quiet", action="store_true", help="no progress lines")

    g = sub.add_parser("generate", help="write seeded benchmark instances (.lp + .json)")
    g.add_argument(
        "--family",
        required=True,
        help="setcover, auction, facility or indset (comma-separated for several)",
    )
    g.add_argument("--size", default="small", help="smoke, small, medium, large or xl")
    g.add_argument("--count", type=int, default=1)
    g.add_argument("--seed", type=int, default=0, help="first seed")
    g.add_argument("--format", default="lp", help="lp (default) or mps")
    g.add_argument("--out", type=Path, required=True)

    e = sub.add_parser("evolve", help="evolve operator parameters, pick a diverse ensemble")
    e.add_argument("train", nargs="+", type=Path, help="training models or folders of them")
    e.add_argument("--time-limit", type=_number, default=3.0, help="seconds per LNS run")
    e.add_argument("--generations", type=int, default=2)
    e.add_argument("--mu", type=int, default=2)
    e.add_argument("--lam", type=int, default=2)
    e.add_argument("--ensemble-size", type=int, default=6)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--out", type=Path, required=True, help="ensemble JSON")

    o = sub.add_parser("oracle", help="hindsight-oracle labels: fork every operator")
    o.add_argument("train", nargs="+", type=Path)
    o.add_argument("--ensemble", type=Path, required=True)
    o.add_argument("--time-limit", type=_number, default=6.0)
    o.add_argument("--states", type=int, default=15, help="oracle states per instance")
    o.add_argument("--seed", type=int, default=0)
    o.add_argument("--out", type=Path, required=True, help="JSONL records")

    t = sub.add_parser("train", help="fit the learned selector on oracle records")
    t.add_argument("--data", type=Path, required=True, help="JSONL from pall oracle")
    t.add_argument("--ensemble", type=Path, required=True)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", type=Path, required=True, help="selector JSON")

    x = sub.add_parser("export-sft", help="oracle records as a chat dataset for trl SFTTrainer")
    x.add_argument("--data", type=Path, required=True)
    x.add_argument("--out", type=Path, required=True)

    demo = sub.add_parser("demo", help="run the reproduction and write results.json and report.md")
    demo.add_argument("--out", type=Path, required=True, help="directory for the results")
    demo.add_argument("--quick", action="store_true", help="small instances, 2 s budgets (CI)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--time-limit", type=float, default=None, help="override T (seconds)")
    demo.add_argument("--per-family", type=int, default=None, help="override instances/family")
    demo.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="folder of .lp/.mps models to evaluate instead of generated ones",
    )
    demo.add_argument("--model", default=None, help="(unused: this method needs no model)")
    demo.add_argument("--device", default="cpu", help="cpu (SCIP runs on the CPU)")

    b = sub.add_parser("bench", help="LNS overhead outside the sub-MIPs, share of wall time")
    b.add_argument("--out", type=Path, required=True, help="directory for bench.json")
    b.add_argument("--size", default="xl", help="instance size (xl = 100k+ variables)")
    b.add_argument("--time-limit", type=_number, default=60.0)
    b.add_argument("--seed", type=int, default=0)
    return p


@cli_guard(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {
        "solve": _solve,
        "generate": _generate,
        "evolve": _evolve,
        "oracle": _oracle,
        "train": _train,
        "export-sft": _export,
        "demo": _demo,
        "bench": _bench,
    }
    return int(handler[args.command](args))


def _models(items: Sequence[Path]) -> list[Path]:
    from pall_lns.instance import SUFFIXES

    out: list[Path] = []
    for item in items:
        if item.is_dir():
            out += sorted(p for p in item.iterdir() if p.name.lower().endswith(SUFFIXES))
        elif item.exists():
            out.append(item)
        else:
            raise PallError(f"{item}: no such file or folder")
    if not out:
        raise PallError(f"{', '.join(map(str, items))}: no .lp/.mps models found")
    return out


def _selector(spec: str, n_ops: int, seed: int) -> tuple[Any, list[Any]]:
    from pall_lns.selectors import LearnedSelector, RandomSelector, UCBSelector, load_default

    default = load_default()
    if spec == "default":
        return default, default.ops
    if spec == "random":
        return RandomSelector(seed), default.ops
    if spec == "bandit":
        return UCBSelector(len(default.ops), seed=seed), default.ops
    sel = LearnedSelector.load(spec)
    return sel, sel.ops


def write_sol(path: Path, names: Sequence[str], x: Any, objective: float) -> None:
    """SCIP's .sol text: the objective, then the non-zero variables."""
    import numpy as np

    from paperstack.records import atomic_write

    lines = [f"objective value: {objective:.15g}"]
    nz = np.flatnonzero(np.abs(x) > 1e-9)
    lines += [f"{names[j]} {x[j]:.15g}" for j in nz.tolist()]
    atomic_write(path, "\n".join(lines) + "\n")


def _solve(args: argparse.Namespace) -> int:
    from pall_lns.lns import LnsConfig, Progress, run_lns

    if args.time_limit <= 0:
        raise PallError(f"--time-limit {args.time_limit:g}: must be positive")
    model: Path = args.model
    base = model.with_name(model.name.split(".")[0])
    sol = args.sol or base.with_suffix(".sol")
    traj = args.trajectory or base.with_suffix(".trajectory.jsonl")
    t0 = time.perf_counter()
    selector, ops = _selector(args.selector, 0, args.seed)

    def show(p: Progress) -> None:
        if not args.quiet:
            print(
                f"{PROG}: {p.seconds:7.2f}s  obj {p.objective:.10g}  iter {p.iteration}  ({p.op})",
                file=sys.stderr,
                flush=True,
            )

    if traj.exists():
        traj.unlink()
    cfg = LnsConfig(
        args.time_limit, seed=args.seed, async_select=not args.sync, submip_time=args.submip_time
    )
    res = run_lns(model, ops, selector, cfg, trajectory=traj, on_improve=show, t0=t0)
    if res.x is None:
        raise PallError(f"{model}: no feasible solution found within {args.time_limit:g}s")
    # run_lns checked res.x against the original model (every row, bound and integrality)
    # before returning it; re-reading the file here would cost seconds on large models.
    write_sol(sol, res.names, res.x, res.objective)
    state = "interrupted" if res.interrupted else "done"
    print(
        f"{PROG}: {state}: objective {res.objective:.10g} after {res.wall_s:.1f}s, "
        f"{res.iterations} LNS iterations, overhead {res.overhead:.1%}; wrote {sol} and {traj}"
    )
    return 130 if res.interrupted else 0


def _generate(args: argparse.Namespace) -> int:
    from pall_lns.generators import generate

    if args.count < 1:
        raise PallError(f"--count {args.count}: must be at least 1")
    for fam in args.family.split(","):
        for i in range(args.count):
            g = generate(fam.strip(), args.size, args.seed + i, args.out, args.format)
            print(f"{g.path}  ({g.meta['n_vars']} variables, {g.meta['n_rows']} rows)")
    return 0


def _evolve(args: argparse.Namespace) -> int:
    from pall_lns.evolve import choose_ensemble, ensemble_json, evolve
    from paperstack.records import atomic_write_json

    train = _models(args.train)
    cands = evolve(
        train,
        args.time_limit,
        generations=args.generations,
        mu=args.mu,
        lam=args.lam,
        seed=args.seed,
        log=lambda msg: print(f"{PROG}: {msg}", file=sys.stderr, flush=True),
    )
    chosen, _, mean_pi = choose_ensemble(cands, args.time_limit, k=args.ensemble_size)
    meta = {
        "command": ["pall", *sys.argv[1:]] if sys.argv else [],
        "train": [p.name for p in train],
        "time_limit": args.time_limit,
        "seed": args.seed,
    }
    atomic_write_json(args.out, ensemble_json(cands, chosen, mean_pi, meta))
    for i in chosen:
        print(f"{cands[i].spec.label}  mean PI {mean_pi[i]:.4f}")
    print(f"{PROG}: wrote {args.out}")
    return 0


def _oracle(args: argparse.Namespace) -> int:
    from pall_lns.evolve import load_ensemble
    from pall_lns.oracle import collect

    ops, _ = load_ensemble(args.ensemble)
    if args.out.exists():
        args.out.unlink()
    n = collect(
        _models(args.train),
        ops,
        args.time_limit,
        args.out,
        states=args.states,
        seed=args.seed,
        log=lambda m: print(f"{PROG}: {m}", file=sys.stderr, flush=True),
    )
    print(f"{PROG}: wrote {n} oracle records to {args.out}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from pall_lns.evolve import load_ensemble
    from pall_lns.oracle import load_records
    from pall_lns.train import fit_selector
    from paperstack.records import atomic_write_json

    ops, best = load_ensemble(args.ensemble)
    sel, stats = fit_selector(load_records(args.data), ops, seed=args.seed)
    sel.meta.update(
        {
            "best_single": best,
            "data": args.data.name,
            "ensemble": args.ensemble.name,
            "command": "pall train --data DATA --ensemble ENSEMBLE --out OUT",
        }
    )
    atomic_write_json(args.out, sel.to_json())
    print(
        f"{PROG}: wrote {args.out} (n={stats['n']:.0f}, oracle agreement "
        f"{stats['accuracy']:.2f}, majority {stats['majority_baseline']:.2f})"
    )
    return 0


def _export(args: argparse.Namespace) -> int:
    from pall_lns.oracle import export_sft

    n = export_sft(args.data, args.out)
    print(f"{PROG}: wrote {n} SFT examples to {args.out}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from pall_lns.baselines import run_scip
    from pall_lns.experiment import RunRecord, claims_from_rows, evaluate, summarise
    from pall_lns.generators import FAMILIES, generate, record_best_known
    from pall_lns.selectors import load_default
    from paperstack.records import JsonlWriter, Manifest, Results, prepare_out_dir, write_results
    from paperstack.report import bar_chart, write_report

    if args.model is not None:
        raise PallError(f"--model {args.model}: this method uses no model")
    if args.device != "cpu":
        raise PallError(f"--device {args.device}: SCIP and HiGHS run on the CPU only")
    out = prepare_out_dir(args.out)
    proto: dict[str, Any] = dict(QUICK if args.quick else FULL)
    if args.time_limit is not None:
        if args.time_limit <= 0:
            raise PallError(f"--time-limit {args.time_limit:g}: must be positive")
        proto["time_limit"] = args.time_limit
    if args.per_family is not None:
        proto["per_family"] = args.per_family
    T = float(proto["time_limit"])
    started = time.perf_counter()
    if args.dataset is not None:
        paths = _models([args.dataset])
    else:
        inst_dir = out / "instances"
        paths = [
            generate(f, str(proto["size"]), TEST_SEED_BASE + args.seed + i, inst_dir).path
            for f in FAMILIES
            for i in range(int(proto["per_family"]))
        ]
        if float(proto["reference_factor"]) > 0:  # long reference runs -> best_known
            for p in paths:
                ref = run_scip(p, float(proto["reference_factor"]) * T, seed=args.seed)
                if ref.objective is not None:
                    record_best_known(p, ref.objective, f"scip {proto['reference_factor']}xT")
                print(f"{PROG}: reference {p.name}: {ref.objective}", file=sys.stderr, flush=True)
    selector = load_default()
    best_single = int(selector.meta.get("best_single", 0))
    config = {
        **proto,
        "seed": args.seed,
        "instances": [p.name for p in paths],
        "ensemble": [o.label for o in selector.ops],
        "best_single": best_single,
    }
    manifest = Manifest.collect(DIST, __version__, seed=args.seed, config=config)
    log = JsonlWriter(out / "runs.jsonl", fsync=False)

    def show(r: RunRecord) -> None:
        print(
            f"{PROG}: {r.instance:28s} {r.method:16s} final {r.final}  "
            f"({r.wall_s:.1f}s, {time.perf_counter() - started:.0f}s total)",
            file=sys.stderr,
            flush=True,
        )
        log.write(
            {
                "instance": r.instance,
                "family": r.family,
                "method": r.method,
                "final": r.final,
                "timeline": r.timeline,
                "wall_s": r.wall_s,
                **r.info,
            }
        )

    records = evaluate(paths, T, selector, best_single, seed=args.seed, log=show)
    log.close()
    rows, _extra = summarise(records, paths, T)
    claims = claims_from_rows(rows)
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    figure = bar_chart(rows, "primal_integral", out / "primal_integral.png", split="all")
    write_report(
        out,
        results,
        title=f"{DIST} {__version__}: demo",
        intro=(
            f"{'Quick' if args.quick else 'Full'} demo: {len(paths)} instances "
            f"({proto['size']} size, {proto['per_family']} per family, test seeds "
            f"{TEST_SEED_BASE + args.seed}+), every method {T:g} s wall, one thread. "
            "Primal integral and final primal gap against the best known value "
            "(long SCIP reference run where made, or the best any method found). "
            "Toy scale on CPU; GPU: not measured."
        ),
        figures=[figure],
    )
    held = sum(c.held for c in claims)
    print(
        f"{PROG}: wrote {out / 'results.json'} and report.md ({held}/{len(claims)} claims "
        f"held, {time.perf_counter() - started:.1f}s)"
    )
    for c in claims:
        print(f"  {c.id}: {'held' if c.held else 'NOT held'} ({c.describe()})")
    return 0


def _bench(args: argparse.Namespace) -> int:
    import numpy as np

    from pall_lns.generators import generate
    from pall_lns.lns import LnsConfig, run_lns
    from pall_lns.selectors import load_default
    from paperstack.records import Manifest, Results, Row, prepare_out_dir, write_results
    from paperstack.stats import mean_ci

    out = prepare_out_dir(args.out)
    selector = load_default()
    path = generate("setcover", args.size, args.seed, out / "instances").path
    traj = out / "bench-trajectory.jsonl"
    if traj.exists():
        traj.unlink()
    cfg = LnsConfig(args.time_limit, seed=args.seed, async_select=True)
    res = run_lns(path, selector.ops, selector, cfg, trajectory=traj)
    from paperstack.records import read_jsonl

    its = [r for r in read_jsonl(traj) if r.get("event") == "iteration"]
    fr = np.array([1.0 - r["solve_s"] / r["iter_s"] for r in its if r["iter_s"] > 0])
    rows = [
        Row(
            system="pall",
            metric="overhead_share",
            value=res.overhead,
            n=res.iterations,
            split=args.size,
        )
    ]
    if fr.size >= 2:
        m, ci = mean_ci(fr)
        rows.append(
            Row(
                system="pall",
                metric="overhead_share_per_iteration",
                value=m,
                ci95=ci,
                n=int(fr.size),
                split=args.size,
            )
        )
    # The strict overhead above splits into SCIP's own handling of each sub-MIP outside
    # optimize() (parsing its LP text, freeing it) and the LNS's work (selection, neighbourhood,
    # reduction, text, read-back, checks, bookkeeping).
    bd = res.stats["submip_breakdown_s"]
    if res.loop_s > 0:
        scip_io = (bd.get("scip_read", 0.0) + bd.get("scip_free", 0.0)) / res.loop_s
        for metric, value in (
            ("scip_read_free_share", scip_io),
            ("lns_work_share", max(0.0, res.overhead - scip_io)),
        ):
            rows.append(
                Row(system="pall", metric=metric, value=value, n=res.iterations, split=args.size)
            )
    manifest = Manifest.collect(
        DIST,
        __version__,
        seed=args.seed,
        config={
            "size": args.size,
            "time_limit": args.time_limit,
            "n_vars": int(res.x.size) if res.x is not None else 0,
            "objective": res.objective,
            "iterations": res.iterations,
            "loop_s": res.loop_s,
            "submip_s": res.submip_s,
            "initial_end_s": res.stats["init_end_s"],
            "submip_breakdown_s": res.stats["submip_breakdown_s"],
        },
    )
    from paperstack.records import Claim

    claims = [
        Claim.compare(
            "overhead_under_5pct",
            "LNS work outside the sub-MIP (selection, "
            "fixing, bookkeeping) is under 5% of the loop's wall time.",
            rows,
            ("pall", "overhead_share", args.size),
            "lt",
            0.05,
        )
    ]
    path_out = write_results(
        out / "bench.json", Results(manifest=manifest.finish(), rows=rows, claims=claims)
    )
    split = {r.metric: r.value for r in rows}
    print(
        f"{PROG}: wrote {path_out} (overhead {res.overhead:.1%} of the LNS loop over "
        f"{res.iterations} iterations: SCIP reading/freeing sub-MIPs "
        f"{split.get('scip_read_free_share', 0.0):.1%}, LNS work "
        f"{split.get('lns_work_share', 0.0):.1%}; objective {res.objective:.10g}; seconds "
        f"{ {k: round(v, 2) for k, v in bd.items()} })"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
