"""``paperstack``: the core's command line.

- ``paperstack demo --out DIR``: the toy world's own reproduction. The default tiny preset is
  trained on each task alone (or loaded from the cache) and its held-out accuracy is reported
  against an untrained model of the same shape, with the floors every package relies on as claims.
- ``paperstack pretrain``: train (or fetch from the cache) one tiny model and print its directory.
- ``paperstack check FILE``: validate a ``results.json`` (claims recomputed) or a JSONL log.
- ``paperstack collect REPORTS``: rebuild ``REPORTS/index.md`` from every ``*/results.json``.

Heavy imports stay inside the commands so ``--help`` is instant and ``check`` needs no torch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from paperstack import __version__
from paperstack.errors import PaperstackError, cli_guard

#: The floors of the foundation issue: accuracy the default preset must reach on each task alone.
FLOORS: dict[str, float] = {"addition": 0.90, "facts": 0.90, "countdown": 0.50}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paperstack", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"paperstack-core {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="train the tiny toy-world models and report their accuracy")
    demo.add_argument("--out", type=Path, required=True, help="directory for results.json etc.")
    demo.add_argument("--quick", action="store_true", help="small preset, few steps (~1 minute)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--preset", default=None, help="tiny preset (default: the default preset)")
    demo.add_argument("--tasks", default=",".join(FLOORS), help="comma-separated task names")
    demo.add_argument("--steps", type=int, default=None, help="training steps (default: recipe)")
    demo.add_argument("--eval-n", type=int, default=None, help="held-out examples per task")
    demo.add_argument("--device", default="cpu")

    pre = sub.add_parser("pretrain", help="train or load a cached tiny model; print its directory")
    pre.add_argument("--preset", default=None)
    pre.add_argument("--task", action="append", required=True, help="task name (repeatable)")
    pre.add_argument("--steps", type=int, default=None)
    pre.add_argument("--seed", type=int, default=0)

    chk = sub.add_parser("check", help="validate a results.json or a JSONL log")
    chk.add_argument("path", type=Path)

    col = sub.add_parser("collect", help="rebuild REPORTS/index.md from REPORTS/*/results.json")
    col.add_argument("reports", type=Path, nargs="?", default=Path("reports"))
    return p


@cli_guard("paperstack")
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check":
        return _check(args.path)
    if args.command == "collect":
        from paperstack.report import write_index

        print(write_index(args.reports))
        return 0
    if args.command == "pretrain":
        tiny = _import_tiny()
        preset = args.preset or tiny.DEFAULT_PRESET
        tasks = tuple(args.task)
        tiny.pretrained(preset, tasks, steps=args.steps, seed=args.seed)  # trains unless cached
        print(tiny.pretrained_path(preset, tasks, steps=args.steps, seed=args.seed))
        return 0
    return _demo(args)


def _import_tiny() -> ModuleType:
    """``paperstack.tiny``, or a one-line hint when the ``torch`` extra is not installed."""
    try:
        from paperstack import tiny
    except ModuleNotFoundError as exc:
        raise PaperstackError(
            f"this command needs {exc.name}: pip install 'paperstack-core[torch]'"
        ) from None
    return tiny


def _check(path: Path) -> int:
    from paperstack.records import load_results, read_jsonl

    if path.suffix == ".jsonl":
        records = read_jsonl(path)
        print(f"{path}: {len(records)} records, all complete")
        return 0
    results = load_results(path)
    held = sum(c.held for c in results.claims)
    print(
        f"{path}: {len(results.rows)} rows, {len(results.claims)} claims "
        f"({held} held, {len(results.claims) - held} not held), all computed from the rows"
    )
    return 0


def _demo(args: argparse.Namespace) -> int:
    from paperstack import tasks as task_lib
    from paperstack.records import Claim, Manifest, Results, Row, prepare_out_dir, write_results
    from paperstack.report import bar_chart, write_report
    from paperstack.stats import wilson_ci

    out = prepare_out_dir(args.out)
    tiny = _import_tiny()
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    for name in names:
        task_lib.get(name)  # one-line error for an unknown task before any training
    preset = args.preset or (tiny.QUICK_PRESET if args.quick else tiny.DEFAULT_PRESET)
    steps = args.steps if args.steps is not None else (tiny.QUICK_STEPS if args.quick else None)
    eval_n = args.eval_n or (100 if args.quick else 500)
    config = {
        "preset": preset,
        "tasks": names,
        "steps": steps,
        "eval_n": eval_n,
        "quick": args.quick,
        "device": args.device,
    }
    manifest = Manifest.collect("paperstack-core", __version__, args.seed, config)
    rows: list[Row] = []
    for name in names:
        task = task_lib.get(name)
        model, tokenizer = tiny.pretrained(preset, (name,), steps=steps, seed=args.seed)
        path = tiny.pretrained_path(preset, (name,), steps=steps, seed=args.seed)
        train_s = float(tiny.training_record(path)["train_seconds"])
        model.to(args.device)
        acc = tiny.evaluate(model, tokenizer, task, n=eval_n, seed=args.seed)
        k = round(acc * eval_n)
        rows.append(
            Row(
                system=f"{preset}-trained",
                metric=f"{name}_accuracy",
                value=acc,
                ci95=wilson_ci(k, eval_n),
                n=eval_n,
                split="test",
            )
        )
        untrained = tiny.build_model(preset, tokenizer, seed=args.seed).to(args.device)
        base = tiny.evaluate(untrained, tokenizer, task, n=eval_n, seed=args.seed)
        rows.append(
            Row(
                system="untrained",
                metric=f"{name}_accuracy",
                value=base,
                ci95=wilson_ci(round(base * eval_n), eval_n),
                n=eval_n,
                split="test",
            )
        )
        rows.append(
            Row(
                system=f"{preset}-trained",
                metric=f"{name}_train_seconds",
                value=train_s,
                unit="s",
                n=1,
            )
        )
        print(
            f"{name}: {preset}-trained {acc:.3f} (untrained {base:.3f}), trained in {train_s:.0f}s",
            file=sys.stderr,
        )
    claims = [
        Claim.compare(
            f"{name}_solved",
            f"the {preset} preset trained on {name} alone reaches {FLOORS[name]:.0%} held-out",
            rows,
            (f"{preset}-trained", f"{name}_accuracy", "test"),
            "ge",
            FLOORS[name],
        )
        for name in names
        if name in FLOORS
    ]
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    acc_rows = [r for r in rows if r.metric.endswith("_accuracy")]
    figures = []
    for name in names:
        figures.append(bar_chart(acc_rows, f"{name}_accuracy", out / f"{name}_accuracy.png"))
    intro = (
        f"The toy world of paperstack: the `{preset}` tiny Llama preset trained on each task "
        "alone on the CPU, greedy-decoded on held-out examples and checked by the task's exact "
        "verifier, against an untrained model of the same shape. Intervals are Wilson 95% over "
        f"the {eval_n} held-out examples; one training seed ({args.seed})."
        + (
            " Quick mode: small preset and few steps, so the floors are not expected to hold."
            if args.quick
            else ""
        )
    )
    report = write_report(out, results, "paperstack toy world", intro, figures)
    print(report)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
