"""``mosa``: the command line of mosa-rl.

- ``mosa demo --out DIR``: GRPO on Countdown without KL, with token-level KL (two betas) and
  with MOSA, 3 seeds; writes ``DIR/results.json``, ``DIR/report.md``, figures and a JSONL
  log of every run. ``--quick`` is the one-minute smoke version.
- ``mosa bench --out DIR``: per-step time and memory of MOSA against token-KL GRPO in one
  run, and the profile term's cost against K, as ratios, in ``DIR/bench.json``.

Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

from mosa_rl import __version__
from mosa_rl.errors import MosaError
from paperstack.errors import cli_guard

PROG = "mosa"
DIST = "mosa-rl"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"{DIST} {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the reproduction and write results.json and report.md")
    demo.add_argument("--out", type=Path, required=True, help="directory for the results")
    demo.add_argument("--quick", action="store_true", help="smoke run (about a minute, for CI)")
    demo.add_argument("--seed", type=int, default=0, help="first RL seed (default 0)")
    demo.add_argument(
        "--model", default=None, help="base model id or path instead of the tiny SFT model"
    )
    demo.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help='JSONL of held-out Countdown problems, one {"numbers": [...], "target": N} a line',
    )
    demo.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    demo.add_argument("--steps", type=int, default=None, help="GRPO steps per run")
    demo.add_argument("--mosa-beta", type=float, default=None, help="MOSA weight beta_M")
    demo.add_argument("--top-k", type=int, default=None, help="MOSA ranks K (plus a tail bucket)")
    demo.add_argument(
        "--workers", type=int, default=None, help="parallel runs (default: cores; quick: 1)"
    )
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")

    bench = sub.add_parser("bench", help="time and memory of MOSA against token-KL GRPO")
    bench.add_argument("--out", type=Path, required=True, help="directory for bench.json")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--steps", type=int, default=4, help="GRPO steps timed per system")
    bench.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    bench.add_argument("--quick", action="store_true", help="smaller shapes (seconds)")
    return p


@cli_guard(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "bench":
        return _bench(args)
    return _demo(args)


def _demo(args: argparse.Namespace) -> int:
    from mosa_rl.demo import FULL, QUICK, run_demo
    from paperstack.records import prepare_out_dir

    config = QUICK if args.quick else FULL
    if args.steps is not None:
        if args.steps < 1:
            raise MosaError(f"--steps {args.steps}: must be >= 1")
        config = dataclasses.replace(config, grpo_steps=args.steps)
    if args.top_k is not None:
        if args.top_k < 1 or args.top_k > 512:
            raise MosaError(f"--top-k {args.top_k}: must be between 1 and 512")
        config = dataclasses.replace(config, mosa_top_k=args.top_k)
    if args.mosa_beta is not None:
        if not args.mosa_beta > 0:
            raise MosaError(f"--mosa-beta {args.mosa_beta}: must be > 0")
        systems = tuple(
            dataclasses.replace(s, mosa_beta=args.mosa_beta) if s.mosa_beta > 0 else s
            for s in config.systems
        )
        config = dataclasses.replace(config, systems=systems)
    if args.workers is not None and args.workers < 1:
        raise MosaError(f"--workers {args.workers}: must be >= 1")
    workers = args.workers if args.workers is not None else (1 if args.quick else None)
    if args.dataset is not None and not args.dataset.is_file():
        raise MosaError(f"--dataset {args.dataset}: no such file")
    out = prepare_out_dir(args.out)
    started = time.perf_counter()
    results = run_demo(
        config,
        out,
        seed=args.seed,
        model=args.model,
        dataset=args.dataset,
        device=args.device,
        progress=not args.no_progress,
        workers=workers,
    )
    for claim in results.claims:
        print(f"{PROG}: {claim.id}: {'held' if claim.held else 'NOT held'} ({claim.describe()})")
    held = sum(c.held for c in results.claims)
    print(
        f"{PROG}: wrote {out / 'results.json'} and report.md "
        f"({held}/{len(results.claims)} claims held, {time.perf_counter() - started:.0f}s)"
    )
    return 0


def _bench(args: argparse.Namespace) -> int:
    from mosa_rl.bench import run_bench
    from paperstack.records import prepare_out_dir

    if args.steps < 1:
        raise MosaError(f"--steps {args.steps}: must be >= 1")
    out = prepare_out_dir(args.out)
    path, summary = run_bench(
        out, seed=args.seed, steps=args.steps, device=args.device, quick=args.quick
    )
    print(f"{PROG}: wrote {path} ({summary})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
