"""``opct``: the command line of opct.

- ``opct demo --out DIR``: the reproduction on the embedded defaults; writes
  ``DIR/results.json``, ``DIR/report.md`` and a figure. ``--quick`` is the one-minute version.
- ``opct bench --out DIR``: speed of the method against its baseline, as ratios, in
  ``DIR/bench.json``.

The common flags and flow (``--out``, ``--quick``, ``--seed``/``--seeds``, ``--device``,
``--model``, ``--no-progress``; results written atomically, verdicts printed) come from
:class:`paperstack.contract.ContractCLI`. Heavy imports stay inside the commands so that
``--help`` is instant.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from opct import __version__
from paperstack.contract import ContractCLI, Report, Run
from paperstack.errors import PaperstackError

cli = ContractCLI("opct", "opct", __version__, __doc__)

# The demo's protocol. Full run and --quick differ only in the number of trials.
CONTAMINATION = {"clean": 0.0, "contaminated": 0.1}  # split -> fraction of outliers
SAMPLES = 200
BLOCKS = 50
TRIALS = 400
QUICK_TRIALS = 40


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="text file of numbers (one per line) to estimate the mean of, instead of the "
        "generated samples",
    )


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


@cli.demo(arguments=_demo_arguments, seeds=3, quick_seeds=3, devices=("cpu",))
def demo(run: Run) -> Report:
    """Median of means against the sample mean, with and without gross outliers.

    Each seed runs ``trials`` independent samples; a row holds the per-seed mean absolute
    error, so the claims compare the two estimators paired over seeds.
    """
    import numpy as np

    from opct.estimators import contaminated_sample, median_of_means, sample_mean
    from paperstack.records import Claim, Row
    from paperstack.report import bar_chart

    trials = QUICK_TRIALS if run.quick else TRIALS
    config: dict[str, Any] = {
        "samples": SAMPLES,
        "blocks": BLOCKS,
        "trials": trials,
        "contamination": CONTAMINATION,
    }
    if run.args.dataset is not None:
        # A user's data: no ground truth, so report the two estimates side by side.
        data = _load_dataset(run.args.dataset)
        estimates = [
            Row(system="sample-mean", metric="estimate", value=sample_mean(data), n=data.size),
            Row(system="median-of-means", metric="estimate",
                value=median_of_means(data, BLOCKS), n=data.size),
        ]  # fmt: skip
        figure = bar_chart(estimates, "estimate", run.out / "estimate.png")
        intro = f"Estimates of the mean of {run.args.dataset}."
        config["dataset"] = str(run.args.dataset)
        return Report(estimates, [], intro=intro, figures=[figure], config=config)

    rows: list[Row] = []
    with run.progress(len(CONTAMINATION) * len(run.seeds), "trials") as bar:
        for split, fraction in CONTAMINATION.items():
            errors: dict[str, dict[int, float]] = {"sample-mean": {}, "median-of-means": {}}
            for seed in run.seeds:
                rng = np.random.default_rng([seed, int(fraction * 100)])
                xs = [contaminated_sample(rng, SAMPLES, fraction) for _ in range(trials)]
                errors["sample-mean"][seed] = float(np.mean([abs(sample_mean(x)) for x in xs]))
                errors["median-of-means"][seed] = float(
                    np.mean([abs(median_of_means(x, BLOCKS)) for x in xs])
                )
                bar.advance()
            for name, per_seed in errors.items():
                rows.append(Row.from_seeds(name, "abs_error", per_seed, split=split))
    claims = [
        Claim.compare(
            "premise_outliers_hurt_the_mean",
            "premise: 10% gross outliers raise the sample mean's error by more than 0.1, so "
            "there is something for a robust estimator to fix",
            rows,
            lhs=("sample-mean", "abs_error", "contaminated"),
            op="gt",
            rhs=("sample-mean", "abs_error", "clean"),
            margin=0.1,
        ),
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
    figure = bar_chart(rows, "abs_error", run.out / "abs_error.png", split="contaminated")
    intro = (
        "Median of means against the sample mean on Gaussian samples with and without gross "
        f"outliers ({trials} trials of {SAMPLES} samples per seed, {BLOCKS} blocks, seeds "
        f"{', '.join(map(str, run.seeds))}); claims are paired over seeds."
    )
    return Report(rows, claims, intro=intro, figures=[figure], config=config)


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repeats", type=int, default=200, help="timed repeats (default 200)")


@cli.bench(arguments=_bench_arguments, devices=("cpu",))
def bench(run: Run) -> Report:
    """Time of median of means over the sample mean's, on the same samples, as a ratio."""
    import numpy as np

    from opct.estimators import median_of_means, sample_mean
    from paperstack.records import Row

    repeats = 20 if run.quick else run.args.repeats
    if repeats < 2:
        raise PaperstackError(f"--repeats {repeats}: needs at least 2")
    x = np.random.default_rng(run.seed).standard_normal(SAMPLES)
    ratios: dict[int, float] = {}
    for i in range(repeats):
        t0 = time.perf_counter()
        sample_mean(x)
        t1 = time.perf_counter()
        median_of_means(x, BLOCKS)
        t2 = time.perf_counter()
        ratios[i] = (t2 - t1) / max(t1 - t0, 1e-9)
    rows = [
        Row(system="sample-mean", metric="time_ratio", value=1.0, n=repeats),
        Row.from_items("median-of-means", "time_ratio", ratios),
    ]
    summary = f"median of means takes {rows[1].value:.1f}x the sample mean's time"
    return Report(rows, summary=summary, config={"samples": SAMPLES, "repeats": repeats})


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
