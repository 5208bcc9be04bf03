"""``paperstack``: the core's command line.

- ``paperstack demo --out DIR``: the toy world's own reproduction. The default tiny preset is
  trained on each task alone (or loaded from the cache) and its held-out accuracy is reported
  against an untrained model of the same shape, with the floors every package relies on as claims;
  beside it, SmolLM2-135M-Instruct's greedy tokens/s here (when its wheel is installed).
- ``paperstack pretrain``: train (or fetch from the cache) one tiny model and print its directory.
- ``paperstack check FILE``: validate a ``results.json`` (claims recomputed) or a JSONL log.
- ``paperstack collect REPORTS``: rebuild ``REPORTS/index.md`` from every ``*/results.json``.

Heavy imports stay inside the commands so ``--help`` is instant and ``check`` needs no torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from paperstack import __version__, preregistration
from paperstack.contract import ContractCLI, Report, Run, positive_int, seed_int
from paperstack.errors import PaperstackError

if TYPE_CHECKING:
    from paperstack.records import Row

#: The floors of the foundation issue: accuracy the default preset must reach on each task alone.
FLOORS: dict[str, float] = {"addition": 0.90, "facts": 0.90, "countdown": 0.50}


cli = ContractCLI("paperstack", "paperstack-core", __version__, __doc__)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default=None, help="tiny preset (default: the default preset)")
    p.add_argument("--tasks", default=",".join(FLOORS), help="comma-separated task names")
    p.add_argument("--steps", type=positive_int, default=None, help="training steps (recipe)")
    p.add_argument("--eval-n", type=positive_int, default=None, help="held-out examples per task")


def _pretrain_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default=None)
    p.add_argument("--task", action="append", required=True, help="task name (repeatable)")
    p.add_argument("--steps", type=positive_int, default=None)
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar or lines")


@cli.command(
    "pretrain", "train or load a cached tiny model; print its directory", _pretrain_arguments
)
def _pretrain(args: argparse.Namespace) -> int:
    tiny = _import_tiny()
    preset = args.preset or tiny.DEFAULT_PRESET
    tasks = tuple(args.task)
    tiny.pretrained(preset, tasks, steps=args.steps, seed=args.seed, progress=not args.no_progress)
    print(tiny.pretrained_path(preset, tasks, steps=args.steps, seed=args.seed))
    return 0


@cli.command(
    "check",
    "validate a results.json (verdicts recomputed) or a JSONL log",
    lambda p: p.add_argument("path", type=Path),
)
def _check_command(args: argparse.Namespace) -> int:
    return _check(args.path)


@cli.command(
    "collect",
    "rebuild REPORTS/index.md from REPORTS/*/results.json",
    lambda p: p.add_argument("reports", type=Path, nargs="?", default=Path("reports")),
)
def _collect(args: argparse.Namespace) -> int:
    from paperstack.report import write_index

    if not args.reports.is_dir():
        raise PaperstackError(f"{args.reports}: no such directory")
    print(write_index(args.reports))
    return 0


def _declare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=Path, help="a results.json from a run on validation seeds")
    p.add_argument(
        "--for", dest="declared", default="demo", metavar="COMMAND",
        help="the command it declares (default demo)",
    )  # fmt: skip
    p.add_argument("--stopping", default="", help="the stopping rule, in words")


@cli.command(
    "declare",
    "print a preregistration.toml table declaring a results.json's claims and seeds",
    _declare_arguments,
)
def _declare(args: argparse.Namespace) -> int:
    from paperstack.records import load_results

    print(
        preregistration.to_toml(load_results(args.path), args.declared, stopping=args.stopping),
        end="",
    )
    return 0


main = cli.main


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
    from paperstack.records import load_results, read_jsonl, revision_known, verdict_counts

    if path.suffix == ".jsonl":
        records = read_jsonl(path)
        print(f"{path}: {len(records)} records, all complete")
        return 0
    results = load_results(path)
    rev = results.manifest.git_revision
    if rev and revision_known(rev, path) is False:
        raise PaperstackError(
            f"{path}: field 'manifest.git_revision': {rev} is not a commit of this repository "
            "(run from an unpublished or rewritten history: rerun the demo from a commit)"
        )
    try:
        declared = preregistration.check(results, path)
    except PaperstackError as exc:
        raise PaperstackError(f"{path}: {exc}") from None
    sealed = (
        "digest matches"
        if results.digest is not None
        else "no digest (written before paperstack-core 0.3: edits cannot be detected)"
    )
    print(
        f"{path}: {len(results.rows)} rows, {len(results.claims)} claims "
        f"({verdict_counts(results.claims)}), every verdict follows from the rows; {sealed}; "
        f"pre-registration: {declared}"
    )
    return 0


@cli.demo(arguments=_demo_arguments, devices=("cpu", "cuda"))
def _demo(run: Run) -> Report:
    from paperstack import tasks as task_lib
    from paperstack.records import Claim, Row
    from paperstack.report import bar_chart

    args = run.args
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not names:
        raise PaperstackError(f"--tasks {args.tasks!r}: names no task")
    for name in names:
        task_lib.get(name)  # one-line error for an unknown task before torch is even imported
    tiny = _import_tiny()
    preset = args.preset or (tiny.QUICK_PRESET if run.quick else tiny.DEFAULT_PRESET)
    if preset not in tiny.PRESETS:
        raise PaperstackError(f"--preset {preset}: unknown; known: {', '.join(tiny.PRESETS)}")
    steps = args.steps if args.steps is not None else (tiny.QUICK_STEPS if run.quick else None)
    eval_n = args.eval_n or (100 if run.quick else 500)
    rows: list[Row] = []
    for name in names:
        task = task_lib.get(name)
        model, tokenizer = tiny.pretrained(
            preset, (name,), steps=steps, seed=run.seed, progress=run.show_progress
        )
        path = tiny.pretrained_path(preset, (name,), steps=steps, seed=run.seed)
        train_s = float(tiny.training_record(path)["train_seconds"])
        model.to(run.device)
        acc = tiny.evaluate(model, tokenizer, task, n=eval_n, seed=run.seed)
        rows.append(
            Row.proportion(f"{preset}-trained", f"{name}_accuracy", round(acc * eval_n), eval_n,
                           split="test")
        )  # fmt: skip
        untrained = tiny.build_model(preset, tokenizer, seed=run.seed).to(run.device)
        base = tiny.evaluate(untrained, tokenizer, task, n=eval_n, seed=run.seed)
        rows.append(
            Row.proportion("untrained", f"{name}_accuracy", round(base * eval_n), eval_n,
                           split="test")
        )  # fmt: skip
        rows.append(
            Row(
                system=f"{preset}-trained",
                metric=f"{name}_train_seconds",
                value=train_s,
                unit="s",
                n=1,
            )
        )
        run.log(
            f"{name}: {preset}-trained {acc:.3f} (untrained {base:.3f}), trained in {train_s:.0f}s"
        )
    claims = []
    for name in names:
        if name not in FLOORS:
            continue
        claims.append(
            Claim.compare(
                f"{name}_solved",
                f"the {preset} preset trained on {name} alone reaches {FLOORS[name]:.0%} held-out",
                rows,
                (f"{preset}-trained", f"{name}_accuracy", "test"),
                "ge",
                FLOORS[name],
            )
        )
        claims.append(
            Claim.compare(
                f"{name}_premise_untrained_fails",
                f"premise: an untrained {preset} model solves less than 5% of {name}, so the "
                "floor measures training",
                rows,
                ("untrained", f"{name}_accuracy", "test"),
                "lt",
                0.05,
            )
        )
    acc_rows = [r for r in rows if r.metric.endswith("_accuracy")]
    figures = [
        bar_chart(acc_rows, f"{name}_accuracy", run.out / f"{name}_accuracy.png") for name in names
    ]
    intro = (
        f"The toy world of paperstack: the `{preset}` tiny Llama preset trained on each task "
        "alone on the CPU, greedy-decoded on held-out examples and checked by the task's exact "
        "verifier, against an untrained model of the same shape. Intervals are Wilson 95% over "
        f"the {eval_n} held-out examples; a floor is held when the whole interval clears it; one "
        f"training seed ({run.seed})."
        + (
            " Quick mode: small preset and few steps, so the floors are not expected to hold."
            if run.quick
            else ""
        )
    )
    speed = _smollm2_speed(run)
    if speed is not None:
        rows.append(speed)
        intro += (
            f" Beside it, the real SmolLM2-135M-Instruct (`{speed.system}`): greedy tokens/s at "
            f"batch 1 on {run.device}, {_SPEED_NEW_TOKENS} new tokens for one fixed chat prompt, "
            f"mean and t-interval over {speed.n} timed runs after a warm-up."
        )
    config = {"preset": preset, "tasks": names, "steps": steps, "eval_n": eval_n}
    return Report(rows, claims, title="paperstack toy world", intro=intro, figures=figures,
                  config=config)  # fmt: skip


_SPEED_PROMPT = "Write a short story about a robot who learns to paint."
_SPEED_NEW_TOKENS = 64
_SPEED_RUNS = 3


def _smollm2_speed(run: Run) -> Row | None:
    """SmolLM2's greedy decoding speed (batch 1, a fixed prompt), or None when its wheel is not
    installed (logged in one line) or in --quick mode (its first use converts it: a minute)."""
    import time

    from paperstack import models
    from paperstack.llm.local import TransformersChat
    from paperstack.records import Row
    from paperstack.stats import mean_ci

    name = "smollm2-135m-instruct"
    if run.quick:
        run.log(f"{name}: greedy tokens/s not measured in --quick mode")
        return None
    try:
        models.model_path(name)
    except models.MissingModelError as exc:
        run.log(f"greedy tokens/s skipped: {exc}")
        return None
    chat = TransformersChat.from_pretrained(name, device=run.device, batch_size=1)
    prompt = [[{"role": "user", "content": _SPEED_PROMPT}]]
    chat.generate(prompt, max_new_tokens=8)  # warm-up
    rates = []
    for _ in range(_SPEED_RUNS):
        start = time.perf_counter()
        out = chat.generate(prompt, max_new_tokens=_SPEED_NEW_TOKENS)[0][0]
        seconds = time.perf_counter() - start
        tokens = getattr(out, "completion_tokens", None) or _SPEED_NEW_TOKENS
        rates.append(tokens / seconds)
    mean, ci = mean_ci(rates)
    run.log(f"{name}: {mean:.1f} greedy tokens/s (batch 1, {run.device})")
    return Row(system=name, metric="greedy_tokens_per_s", value=mean, ci95=ci, n=len(rates),
               unit="tokens/s")  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
