"""``pall``: the command line of pall-lns.

- ``pall solve MODEL --time-limit T``: PALL on your .lp/.mps file; prints each new incumbent,
  writes the checked solution (.sol) and a JSONL trajectory. Ctrl-C or SIGTERM writes the best
  so far.
- ``pall generate``: seeded instances (set cover, auctions, facility location, independent set).
- ``pall evolve`` / ``pall oracle`` / ``pall train`` / ``pall export-sft``: the offline pipeline
  that produced the shipped default selector (operator ensemble + weights).
- ``pall demo --out DIR``: the reproduction (``--quick`` for CI); ``pall bench --out DIR``: LNS
  overhead outside the sub-MIPs as a share of wall time.

The common flags and flow of ``demo`` and ``bench`` (``--out``, ``--quick``, ``--seed``/
``--seeds``, ``--no-progress``; results written atomically, verdicts printed) come from
:class:`paperstack.contract.ContractCLI`. Heavy imports stay inside the commands so that
``--help`` is instant.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pall_lns import __version__
from pall_lns.errors import PallError
from paperstack.contract import ContractCLI, Report, Run, seed_int
from paperstack.errors import Terminated

PROG = "pall"
DIST = "pall-lns"

cli = ContractCLI(PROG, DIST, __version__, __doc__)


# ---------------------------------------------------------------------------- flag types


def _number(flag: str, text: str, kind: type) -> Any:
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise PallError(f"{flag} {text}: not {what}") from None


def seconds(flag: str, *, zero: bool = False) -> Any:
    """argparse type for ``flag``: a finite number of seconds above 0 (or >= 0 with ``zero``).

    ``inf``, ``nan`` and negatives are one line naming the flag (a :class:`PallError` passes
    through argparse to the CLI guard), never a traceback or a silently endless run."""

    def parse(text: str) -> float:
        value = float(_number(flag, text, float))
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            bound = ">= 0" if zero else "above 0"
            raise PallError(f"{flag} {text}: must be a finite number of seconds {bound}")
        return value

    return parse


def count(flag: str, *, minimum: int = 1) -> Any:
    """argparse type for ``flag``: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        value = int(_number(flag, text, int))
        if value < minimum:
            raise PallError(f"{flag} {text}: must be at least {minimum}")
        return value

    return parse


#: ``--seed``: the contract's type, what every RNG accepts (numpy's seeds stop at 2**32 - 1);
#: a larger or negative seed is refused by argparse, not after minutes of work (issue #46).
SEED = seed_int


def _models(items: Sequence[Path]) -> list[Path]:
    from pall_lns.instance import SUFFIXES, missing_reason

    out: list[Path] = []
    for item in items:
        if item.is_dir():
            out += sorted(
                p for p in item.iterdir() if p.is_file() and p.name.lower().endswith(SUFFIXES)
            )
        elif item.exists():
            out.append(item)
        else:
            reason = missing_reason(item)
            if reason == "no such file":
                reason = "no such file or folder"
            raise PallError(f"{item}: {reason}")
    if not out:
        raise PallError(f"{', '.join(map(str, items))}: no .lp/.mps models found")
    return out


def _readable_models(items: Sequence[Path]) -> list[Path]:
    """Every model, read once up front, so a bad file is one error naming it, before hours of
    evolution or oracle runs (not SCIP's syntax error once per operator)."""
    from pall_lns.instance import read_instance

    paths = _models(items)
    for p in paths:
        read_instance(p)
    return paths


def _output_file(path: Path, flag: str) -> Path:
    if path.is_dir():
        raise PallError(f"{flag} {path}: is a directory; name a file")
    return path


SELECTORS = "default (softmax-linear), lm (fine-tuned LM), random, bandit, exp3, egreedy"


def _selector(spec: str, seed: int) -> tuple[Any, list[Any]]:
    """A selector by name (over the shipped ensemble), or a selector JSON file (its own), or
    a folder of an LM trained by ``pall train-lm``."""
    from pall_lns import selectors as s

    default = s.load_default()
    k = len(default.ops)
    named = {
        "default": lambda: default,
        "random": lambda: s.RandomSelector(seed),
        "bandit": lambda: s.UCBSelector(k, seed=seed),
        "exp3": lambda: s.Exp3Selector(k, seed=seed),
        "egreedy": lambda: s.EpsilonGreedySelector(k, seed=seed),
    }
    if spec in named:
        return named[spec](), default.ops
    if spec == "lm":
        from pall_lns.demo import shipped_records
        from pall_lns.lm import RECIPE, LMSelector, train_lm

        _log("selector LM: fine-tuning on the shipped oracle states (cached after the first)")
        path = train_lm(shipped_records("oracle-train.jsonl"), k, RECIPE, log=_log)
        return LMSelector.load(path, k), default.ops
    if Path(spec).is_dir():
        from pall_lns.lm import LMSelector

        return LMSelector.load(spec, k), default.ops
    sel = s.LearnedSelector.load(spec)
    return sel, sel.ops


def write_sol(path: Path, names: Sequence[str], x: Any, objective: float) -> None:
    """SCIP's .sol text: the objective, then the non-zero variables."""
    import numpy as np

    from paperstack.records import atomic_write

    lines = [f"objective value: {objective:.15g}"]
    nz = np.flatnonzero(np.abs(x) > 1e-9)
    lines += [f"{names[j]} {x[j]:.15g}" for j in nz.tolist()]
    atomic_write(path, "\n".join(lines) + "\n")


@dataclass
class StopSignals:
    """What :func:`sigterm_as_ctrl_c` saw: ``terminated`` once a SIGTERM arrived (the exit
    status is then 143, the core's convention for SIGTERM, rather than Ctrl-C's 130)."""

    terminated: bool = False


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[StopSignals]:
    """Within the block, SIGTERM (``kill``, ``timeout``, a batch scheduler's stop) is turned
    into SIGINT, so it does exactly what Ctrl-C does: ``pall solve`` stops the search and writes
    the best checked solution (exit 130) instead of dying with nothing written.

    Why SIGINT and not a ``KeyboardInterrupt`` raised from the handler: while SCIP solves, it
    catches SIGINT in its own C handler and returns cleanly ("userinterrupt"), but a Python
    exception raised by a SIGTERM handler that runs inside one of our SCIP callbacks (the
    incumbent event handler) is swallowed by PySCIPOpt and turns into "SCIP: unspecified error!"
    and a traceback. Re-raised as SIGINT, the signal meets SCIP's handler during a solve and
    Python's ``KeyboardInterrupt`` outside one. Python runs a signal handler between bytecodes,
    so a SIGTERM that arrives inside a SCIP solve without callbacks (a sub-MIP) acts when that
    solve returns: within the sub-MIP's time limit. An ignored SIGINT (a job started with
    ``&`` by a non-interactive shell) is given Python's default handler for the block, or the
    re-raised signal would be lost. Both previous handlers are restored on leaving."""
    seen = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield seen  # signal handlers can only be set in the main thread (an API caller's)
        return

    def as_sigint(signum: int, frame: Any) -> None:
        from pall_lns.lns import request_stop

        seen.terminated = True
        request_stop()  # survives a SIGINT that SCIP's hand-over would otherwise absorb
        signal.raise_signal(signal.SIGINT)

    previous_int = signal.getsignal(signal.SIGINT)
    if not callable(previous_int):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    previous_term = signal.signal(signal.SIGTERM, as_sigint)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        if previous_int is not None:
            signal.signal(signal.SIGINT, previous_int)


def _log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- solve


def _solve_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("model", type=Path, help="model file (.lp, .mps, optionally .gz)")
    s.add_argument("--time-limit", type=seconds("--time-limit"), required=True, help="wall seconds")
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
        help=f"{SELECTORS}; or a selector JSON, or an LM folder from pall train-lm",
    )
    s.add_argument("--sync", action="store_true", help="select in-process (no async worker)")
    s.add_argument(
        "--submip-time",
        type=seconds("--submip-time", zero=True),
        default=0.0,
        help="sub-MIP limit (0 = auto)",
    )
    s.add_argument(
        "--no-background-free",
        action="store_true",
        help="free solved sub-MIPs on the search's own thread (one core; default: a second "
        "thread frees one while the next solves)",
    )
    s.add_argument(
        "--gap",
        type=_gap,
        default=0.0,
        help="stop once the incumbent is within this relative gap of SCIP's dual bound "
        "(default 0: stop when SCIP proved it optimal)",
    )
    s.add_argument(
        "--first-grace",
        type=seconds("--first-grace", zero=True),
        default=30.0,
        help="seconds SCIP's first run may go on past its share while it has no solution, not "
        "charged to --time-limit (said in the output; default %(default)s, 0: none)",
    )
    s.add_argument("--seed", type=SEED, default=0)
    s.add_argument("--quiet", action="store_true", help="no progress lines")


def _gap(text: str) -> float:
    """A relative gap in [0, 1) for ``--gap`` (argparse turns the error into one line)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number") from None
    if not (math.isfinite(v) and 0 <= v < 1):
        raise argparse.ArgumentTypeError(f"{text}: must be a relative gap in [0, 1)")
    return v


@cli.command("solve", "run PALL on a .lp/.mps model and write the solution", _solve_arguments)
def _solve(args: argparse.Namespace) -> int:
    from pall_lns.lns import LnsConfig, Progress, run_lns

    t0 = time.perf_counter()
    model: Path = args.model
    base = model.with_name(model.name.split(".")[0])
    sol = _output_file(args.sol or base.with_suffix(".sol"), "--sol")
    traj = _output_file(args.trajectory or base.with_suffix(".trajectory.jsonl"), "--trajectory")
    selector, ops = _selector(args.selector, args.seed)

    def show(p: Progress) -> None:
        if not args.quiet:
            _log(f"{p.seconds:7.2f}s  obj {p.objective:.10g}  iter {p.iteration}  ({p.op})")

    if traj.exists():
        traj.unlink()
    cfg = LnsConfig(
        args.time_limit,
        seed=args.seed,
        async_select=not args.sync,
        submip_time=args.submip_time,
        background_free=not args.no_background_free,
        gap=args.gap,
        first_grace=args.first_grace,
    )
    with sigterm_as_ctrl_c() as signals:
        try:
            res = run_lns(model, ops, selector, cfg, trajectory=traj, on_improve=show, t0=t0)
        except KeyboardInterrupt:  # before the search began: no solution to write
            if signals.terminated:
                raise Terminated() from None
            raise
    if res.x is None:
        if res.interrupted:  # stopped before SCIP's first incumbent: the guard says which
            raise Terminated() if signals.terminated else KeyboardInterrupt()
        raise PallError(
            f"{model}: no feasible solution found within {args.time_limit:g}s "
            f"(+{args.first_grace:g}s --first-grace)"
        )
    # run_lns checked res.x against the original model (every row, bound and integrality)
    # before returning it; re-reading the file here would cost seconds on large models.
    write_sol(sol, res.names, res.x, res.objective)
    state = "done"
    if res.interrupted:
        state = "terminated (SIGTERM)" if signals.terminated else "interrupted"
    fallback = f", {res.fallbacks} selector fallbacks" if res.fallbacks else ""
    extra = res.stats.get("first_solution_extra_s", 0.0)
    if extra > 0:
        _log(
            f"SCIP's first solution took {extra:.1f}s past its share of the budget: that time "
            "was not charged to --time-limit (--first-grace)"
        )
    stop = res.stats.get("stop")
    if stop == "optimal":
        state += ", proven optimal by SCIP"
    elif stop == "gap":
        state += f", within --gap {args.gap:g} of SCIP's dual bound (gap {res.stats['gap']:.3g})"
    print(
        f"{PROG}: {state}: objective {res.objective:.10g} after {res.wall_s:.1f}s, "
        f"{res.iterations} LNS iterations, overhead {res.overhead:.1%}{fallback}; "
        f"wrote {sol} and {traj}"
    )
    if not res.interrupted:
        return 0
    return 128 + signal.SIGTERM if signals.terminated else 130  # 143, as the core guard


# ---------------------------------------------------------------------------- generate


def _generate_arguments(g: argparse.ArgumentParser) -> None:
    g.add_argument(
        "--family",
        required=True,
        help="setcover, auction, facility or indset (comma-separated for several)",
    )
    g.add_argument("--size", default="small", help="smoke, small, medium, large or xl")
    g.add_argument("--count", type=count("--count"), default=1)
    g.add_argument("--seed", type=SEED, default=0, help="first seed")
    g.add_argument("--format", default="lp", help="lp (default) or mps")
    g.add_argument("--out", type=Path, required=True)


@cli.command("generate", "write seeded benchmark instances (.lp + .json)", _generate_arguments)
def _generate(args: argparse.Namespace) -> int:
    from pall_lns.generators import generate

    if args.out.exists() and not args.out.is_dir():
        raise PallError(f"--out {args.out}: exists and is not a directory")
    for fam in args.family.split(","):
        for i in range(args.count):
            g = generate(fam.strip(), args.size, args.seed + i, args.out, args.format)
            print(f"{g.path}  ({g.meta['n_vars']} variables, {g.meta['n_rows']} rows)")
    return 0


# ---------------------------------------------------------------------------- offline pipeline


def _evolve_arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("train", nargs="+", type=Path, help="training models or folders of them")
    e.add_argument("--time-limit", type=seconds("--time-limit"), default=3.0, help="s per LNS run")
    e.add_argument("--generations", type=count("--generations", minimum=0), default=2)
    e.add_argument("--mu", type=count("--mu"), default=2, help="parents kept per family")
    e.add_argument("--lam", type=count("--lam"), default=2, help="children per generation")
    e.add_argument("--ensemble-size", type=count("--ensemble-size"), default=6)
    e.add_argument("--seed", type=SEED, default=0)
    e.add_argument("--out", type=Path, required=True, help="ensemble JSON")


@cli.command("evolve", "evolve operator parameters, pick a diverse ensemble", _evolve_arguments)
def _evolve(args: argparse.Namespace) -> int:
    from pall_lns.evolve import choose_ensemble, ensemble_json, evolve
    from paperstack.records import atomic_write_json

    out = _output_file(args.out, "--out")
    train = _readable_models(args.train)
    cands = evolve(
        train,
        args.time_limit,
        generations=args.generations,
        mu=args.mu,
        lam=args.lam,
        seed=args.seed,
        log=_log,
    )
    chosen, _, mean_pi = choose_ensemble(cands, args.time_limit, k=args.ensemble_size)
    meta = {
        "command": ["pall", *sys.argv[1:]] if sys.argv else [],
        "train": [p.name for p in train],
        "time_limit": args.time_limit,
        "generations": args.generations,
        "mu": args.mu,
        "lam": args.lam,
        "seed": args.seed,
    }
    atomic_write_json(out, ensemble_json(cands, chosen, mean_pi, meta))
    for i in chosen:
        print(f"{cands[i].spec.label}  mean PI {mean_pi[i]:.4f}")
    print(f"{PROG}: wrote {out}")
    return 0


def _oracle_arguments(o: argparse.ArgumentParser) -> None:
    o.add_argument("train", nargs="+", type=Path)
    o.add_argument("--ensemble", type=Path, required=True)
    o.add_argument("--time-limit", type=seconds("--time-limit"), default=6.0)
    o.add_argument("--states", type=count("--states"), default=15, help="states per instance")
    o.add_argument("--seed", type=SEED, default=0)
    o.add_argument("--out", type=Path, required=True, help="JSONL records")


@cli.command("oracle", "hindsight-oracle labels: fork every operator", _oracle_arguments)
def _oracle(args: argparse.Namespace) -> int:
    from pall_lns.evolve import load_ensemble
    from pall_lns.oracle import collect

    out = _output_file(args.out, "--out")
    ops, _ = load_ensemble(args.ensemble)
    paths = _readable_models(args.train)
    if out.exists():
        out.unlink()
    n = collect(paths, ops, args.time_limit, out, states=args.states, seed=args.seed, log=_log)
    print(f"{PROG}: wrote {n} oracle records to {out}")
    return 0


def _train_arguments(t: argparse.ArgumentParser) -> None:
    t.add_argument("--data", type=Path, required=True, help="JSONL from pall oracle")
    t.add_argument("--ensemble", type=Path, required=True)
    t.add_argument("--seed", type=SEED, default=0)
    t.add_argument("--out", type=Path, required=True, help="selector JSON")


@cli.command("train", "fit the softmax-linear selector on oracle records", _train_arguments)
def _train(args: argparse.Namespace) -> int:
    from pall_lns.evolve import load_ensemble
    from pall_lns.oracle import load_records
    from pall_lns.train import fit_selector
    from paperstack.records import atomic_write_json

    out = _output_file(args.out, "--out")
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
    atomic_write_json(out, sel.to_json())
    print(
        f"{PROG}: wrote {out} (n={stats['n']:.0f}, oracle agreement "
        f"{stats['accuracy']:.2f}, majority {stats['majority_baseline']:.2f})"
    )
    return 0


def _export_arguments(x: argparse.ArgumentParser) -> None:
    x.add_argument("--data", type=Path, required=True)
    x.add_argument("--out", type=Path, required=True)


@cli.command("export-sft", "oracle records as a chat dataset for trl SFTTrainer", _export_arguments)
def _export(args: argparse.Namespace) -> int:
    from pall_lns.oracle import export_sft

    n = export_sft(args.data, _output_file(args.out, "--out"))
    print(f"{PROG}: wrote {n} SFT examples to {args.out}")
    return 0


def _train_lm_arguments(t: argparse.ArgumentParser) -> None:
    t.add_argument("--data", type=Path, required=True, help="JSONL from pall oracle")
    t.add_argument("--ensemble", type=Path, required=True, help="its ensemble (operator count)")
    t.add_argument("--model", default=None, help="HF causal LM folder to fine-tune (default: "
                   "the toy world's tiny Llama from its random init)")  # fmt: skip
    t.add_argument("--steps", type=count("--steps"), default=None, help="training steps")
    t.add_argument("--seed", type=SEED, default=0)
    t.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    t.add_argument("--out", type=Path, required=True, help="folder for the fine-tuned model")


@cli.command(
    "train-lm",
    "fine-tune the LM selector on oracle records with trl's SFTTrainer",
    _train_lm_arguments,
)
def _train_lm(args: argparse.Namespace) -> int:
    import dataclasses

    from pall_lns.evolve import load_ensemble
    from pall_lns.lm import RECIPE, train_lm
    from pall_lns.oracle import load_records
    from paperstack.contract import check_device, check_model
    from paperstack.records import prepare_out_dir

    if args.out.exists() and not args.out.is_dir():
        raise PallError(f"--out {args.out}: exists and is not a directory")
    device = check_device(args.device)
    model = check_model(args.model)
    ops, _ = load_ensemble(args.ensemble)
    records = load_records(args.data)
    recipe = RECIPE if args.steps is None else dataclasses.replace(RECIPE, steps=args.steps)
    recipe = dataclasses.replace(recipe, seed=args.seed)
    # --out checked through the core before fine-tuning (a read-only place or a full disk was
    # met only when the trained model was moved there); the folder made here is removed again
    # if training fails, and replaced by the trained model if it succeeds
    created = not args.out.exists()
    prepare_out_dir(args.out)
    try:
        path = train_lm(records, len(ops), recipe, base=model, out=args.out, device=device,
                        log=_log)  # fmt: skip
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                args.out.rmdir()  # only when still empty
        raise
    print(f"{PROG}: wrote {path}")
    return 0


# ---------------------------------------------------------------------------- demo


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--time-limit", type=seconds("--time-limit"), default=None, help="override T (seconds)"
    )
    p.add_argument(
        "--per-family",
        type=count("--per-family"),
        default=None,
        help="instances per family and seed (default 1)",
    )
    p.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="folder of .lp/.mps models to evaluate instead of generated ones",
    )


@cli.demo(
    arguments=_demo_arguments,
    seeds=3,
    quick_seeds=1,
    model="a Hugging Face causal LM folder to fine-tune as the selector (default: the toy "
    "world's tiny Llama)",
    devices=("cpu", "cuda"),
)
def demo(run: Run) -> Report:
    """Equal-wall-time comparison of PALL, its selector baselines and the plain solvers."""
    from pall_lns.demo import demo_report

    return demo_report(run)


# ---------------------------------------------------------------------------- bench


def _share(text: str) -> float:
    """A share in [0, 1) for ``--overhead-share`` (argparse turns the error into one line)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be in [0, 1)")
    return v


def _bench_arguments(b: argparse.ArgumentParser) -> None:
    b.add_argument("--size", default="xl", help="instance size (xl = 100k+ variables)")
    b.add_argument("--time-limit", type=seconds("--time-limit"), default=60.0)
    b.add_argument(
        "--compare",
        action="store_true",
        help="also compare PALL with SCIP, SCIP aggressive, HiGHS, random and bandit LNS on "
        "--families at --size, one instance per seed",
    )
    b.add_argument(
        "--submip",
        choices=("auto", "kept", "reduced"),
        default="auto",
        help="sub-MIPs of the overhead run: by bound changes on the one kept model, as reduced "
        "problems read into a second SCIP, or by size (auto: reduced from 20,000 variables)",
    )
    b.add_argument(
        "--overhead-share",
        type=_share,
        default=0.03,  # LnsConfig.overhead_share (tested equal)
        help="amortisation rule of the overhead run: each sub-MIP's limit is at least the "
        "recent fixed cost per iteration, and its own building and reading cost, over this "
        "share (default %(default)s; 0: off, limit T/20)",
    )
    b.add_argument(
        "--no-background-free",
        action="store_true",
        help="overhead run: free solved sub-MIPs on the search's thread (one core); the "
        "comparison always does",
    )
    b.add_argument("--families", default="setcover,auction,facility,indset")
    b.add_argument(
        "--compare-time",
        type=seconds("--compare-time"),
        default=None,
        help="seconds per method in the comparison (default: --time-limit)",
    )


@cli.bench(arguments=_bench_arguments, devices=("cpu",))
def bench(run: Run) -> Report:
    """LNS overhead outside SCIP's optimize() as a share of the loop's wall time."""
    from pall_lns.demo import bench_report

    return bench_report(run)


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
