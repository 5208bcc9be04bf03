"""``tmpl-cli``: the command line of tmpl-dist.

- ``tmpl-cli demo --out DIR``: the reproduction on the embedded defaults; writes
  ``DIR/results.json``, ``DIR/report.md`` and a figure. ``--quick`` is the one-minute version.
- ``tmpl-cli bench --out DIR``: speed of the method against its baseline, as ratios, in
  ``DIR/bench.json``.

Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paperstack.errors import PaperstackError, cli_guard

from tmpl_import import __version__

PROG = "tmpl-cli"
DIST = "tmpl-dist"

# The demo's protocol. Full run and --quick differ only in the number of trials.
CONTAMINATION = {"clean": 0.0, "contaminated": 0.1}  # split -> fraction of outliers
SAMPLES = 200
BLOCKS = 50
TRIALS = 400
QUICK_TRIALS = 40


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"{DIST} {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the reproduction and write results.json and report.md")
    demo.add_argument("--out", type=Path, required=True, help="directory for the results")
    demo.add_argument("--quick", action="store_true", help="fewer trials (seconds, for CI)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument(
        "--model", default=None, help="model id or path (this method uses none; must be unset)"
    )
    demo.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="text file of numbers (one per line) to estimate the mean of, instead of the "
        "generated samples",
    )
    demo.add_argument("--device", default="cpu", help="cpu (this method runs on numpy)")

    bench = sub.add_parser("bench", help="time the method against its baseline")
    bench.add_argument("--out", type=Path, required=True, help="directory for bench.json")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--repeats", type=int, default=200)
    return p


@cli_guard(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "bench":
        return _bench(args)
    return _demo(args)


def _load_dataset(path: Path) -> Any:
    import numpy as np

    try:
        values = np.loadtxt(path, dtype=np.float64, ndmin=1)
    except OSError as exc:
        raise PaperstackError(f"--dataset {path}: cannot read ({exc})") from None
    except ValueError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "not numbers"
        raise PaperstackError(f"--dataset {path}: not one number per line ({first})") from None
    if values.size < BLOCKS:
        raise PaperstackError(
            f"--dataset {path}: needs at least {BLOCKS} numbers, has {values.size}"
        )
    return values


def _demo(args: argparse.Namespace) -> int:
    import numpy as np
    from paperstack.records import (
        Claim,
        Manifest,
        Results,
        Row,
        prepare_out_dir,
        write_results,
    )
    from paperstack.report import bar_chart, write_report
    from paperstack.stats import mean_ci

    from tmpl_import.estimators import contaminated_sample, median_of_means, sample_mean

    if args.model is not None:
        raise PaperstackError(f"--model {args.model}: this method uses no model")
    if args.device != "cpu":
        raise PaperstackError(f"--device {args.device}: this method runs on the CPU only")
    out = prepare_out_dir(args.out)
    trials = QUICK_TRIALS if args.quick else TRIALS
    config = {
        "samples": SAMPLES,
        "blocks": BLOCKS,
        "trials": trials,
        "contamination": CONTAMINATION,
        "dataset": str(args.dataset) if args.dataset else None,
    }
    manifest = Manifest.collect(DIST, __version__, seed=args.seed, config=config)
    rng = np.random.default_rng(args.seed)
    rows: list[Row] = []
    started = time.perf_counter()
    if args.dataset is not None:
        # A user's data: no ground truth, so report the two estimates side by side.
        data = _load_dataset(args.dataset)
        estimates = {
            "sample-mean": sample_mean(data),
            "median-of-means": median_of_means(data, BLOCKS),
        }
        for name, value in estimates.items():
            rows.append(Row(system=name, metric="estimate", value=value, n=int(data.size)))
        claims: list[Claim] = []
    else:
        for split, fraction in CONTAMINATION.items():
            errors: dict[str, list[float]] = {"sample-mean": [], "median-of-means": []}
            for _ in range(trials):
                x = contaminated_sample(rng, SAMPLES, fraction)
                errors["sample-mean"].append(abs(sample_mean(x)))
                errors["median-of-means"].append(abs(median_of_means(x, BLOCKS)))
            for name, errs in errors.items():
                mean, ci = mean_ci(errs)
                rows.append(
                    Row(system=name, metric="abs_error", value=mean, ci95=ci, n=trials, split=split)
                )
        claims = [
            Claim.compare(
                "robust",
                "With 10% gross outliers, median of means has a lower absolute error than the "
                "sample mean.",
                rows,
                lhs=("median-of-means", "abs_error", "contaminated"),
                op="lt",
                rhs=("sample-mean", "abs_error", "contaminated"),
            ),
            Claim.compare(
                "clean-cost",
                "On clean data, median of means costs at most 0.1 in absolute error over the "
                "sample mean.",
                rows,
                lhs=("median-of-means", "abs_error", "clean"),
                op="le",
                rhs=("sample-mean", "abs_error", "clean"),
                margin=0.1,
            ),
        ]
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    metric = "estimate" if args.dataset is not None else "abs_error"
    shown = None if args.dataset is not None else "contaminated"
    figure = bar_chart(rows, metric, out / f"{metric}.png", split=shown)
    write_report(
        out,
        results,
        title=f"{DIST} {__version__}: demo",
        intro="Median of means against the sample mean on Gaussian samples with and without "
        f"gross outliers ({trials} trials of {SAMPLES} samples, {BLOCKS} blocks).",
        figures=[figure],
    )
    held = sum(c.held for c in claims)
    print(
        f"{PROG}: wrote {out / 'results.json'} and report.md "
        f"({held}/{len(claims)} claims held, {time.perf_counter() - started:.1f}s)"
    )
    return 0


def _bench(args: argparse.Namespace) -> int:
    import numpy as np
    from paperstack.records import Manifest, Results, Row, prepare_out_dir, write_results
    from paperstack.stats import mean_ci

    from tmpl_import.estimators import median_of_means, sample_mean

    if args.repeats < 2:
        raise PaperstackError(f"--repeats {args.repeats}: needs at least 2")
    out = prepare_out_dir(args.out)
    config = {"samples": SAMPLES, "blocks": BLOCKS, "repeats": args.repeats}
    manifest = Manifest.collect(DIST, __version__, seed=args.seed, config=config)
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal(SAMPLES)
    ratios = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        sample_mean(x)
        t1 = time.perf_counter()
        median_of_means(x, BLOCKS)
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / max(t1 - t0, 1e-9))
    mean, ci = mean_ci(ratios)
    rows = [
        Row(system="sample-mean", metric="time_ratio", value=1.0, n=args.repeats),
        Row(system="median-of-means", metric="time_ratio", value=mean, ci95=ci, n=args.repeats),
    ]
    results = Results(manifest=manifest.finish(), rows=rows, claims=[])
    path = write_results(out / "bench.json", results)
    print(f"{PROG}: wrote {path} (median of means takes {mean:.1f}x the sample mean's time)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
