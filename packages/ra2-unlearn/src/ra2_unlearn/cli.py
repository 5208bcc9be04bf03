"""``ra2``: the command line of ra2-unlearn.

- ``ra2 demo --out DIR``: RA^2 and its baselines (GA, GradDiff, NPO, SimNPO, RMU) unlearn one
  domain of the fact world with matched steps over 3 seeds; writes ``DIR/results.json``,
  ``DIR/report.md`` and figures. ``--quick``: one seed, a small world, a model trained in the
  demo (about a minute).
- ``ra2 bench --out DIR``: wall time and peak memory per unlearning step, RA^2 vs RMU, as
  ratios, in ``DIR/bench.json``.
- ``ra2 unlearn``: unlearn a model (id or path) from forget/retain multiple-choice JSONL files
  (WMDP/MUSE style) and save it.

Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from paperstack.errors import PaperstackError, cli_guard
from ra2_unlearn import __version__
from ra2_unlearn.config import METHODS

PROG = "ra2"
DIST = "ra2-unlearn"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"{DIST} {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the reproduction and write results.json and report.md")
    demo.add_argument("--out", type=Path, required=True, help="directory for the results")
    demo.add_argument("--quick", action="store_true", help="1 seed, small world (about a minute)")
    demo.add_argument("--seed", type=int, default=None, help="run only this unlearning seed")
    demo.add_argument("--steps", type=int, default=None, help="unlearning steps per method")
    demo.add_argument(
        "--methods",
        default=None,
        help=f"comma-separated subset of the systems ({','.join(METHODS)},ra2-pca)",
    )
    demo.add_argument(
        "--model",
        default=None,
        help="a causal LM id or path that already knows the fact world (default: the cached "
        "tiny model, trained on first use)",
    )
    demo.add_argument("--device", default="cpu", help="cpu or cuda")
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")

    bench = sub.add_parser("bench", help="time RA^2 against RMU per unlearning step")
    bench.add_argument("--out", type=Path, required=True, help="directory for bench.json")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--steps", type=int, default=20, help="timed steps per method")
    bench.add_argument("--preset", default="tiny", help="tiny-model preset (default tiny)")

    rep = sub.add_parser(
        "report", help="rebuild results.json and report.md from a demo's runs.jsonl (partial runs)"
    )
    rep.add_argument("runs", type=Path, help="runs.jsonl written by ra2 demo")
    rep.add_argument("--out", type=Path, required=True, help="directory for the results")
    rep.add_argument("--note", default="", help="a sentence added to the report's intro")

    un = sub.add_parser("unlearn", help="unlearn a model from forget/retain MC JSONL files")
    un.add_argument("--model", required=True, help="model id or path (from_pretrained)")
    un.add_argument("--forget", type=Path, required=True, help="forget set, MC JSONL")
    un.add_argument("--retain", type=Path, required=True, help="retain set, MC JSONL")
    un.add_argument("--out", type=Path, required=True, help="directory for the unlearned model")
    un.add_argument("--method", default="ra2", choices=METHODS)
    un.add_argument("--layer", type=int, default=7)
    un.add_argument("--steps", type=int, default=150)
    un.add_argument("--lr", type=float, default=5e-5)
    un.add_argument("--batch-size", type=int, default=4)
    un.add_argument("--alpha", type=float, default=1.0)
    un.add_argument("--lora-r", type=int, default=None, help="train a LoRA adapter of rank r")
    un.add_argument("--seed", type=int, default=0)
    un.add_argument("--device", default="cpu")
    return p


@cli_guard(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "bench":
        from ra2_unlearn.bench import run_bench

        return run_bench(args)
    if args.command == "unlearn":
        return _unlearn(args)
    if args.command == "report":
        return _report(args)
    return _demo(args)


def _demo(args: argparse.Namespace) -> int:
    from dataclasses import asdict, replace

    from paperstack.records import Manifest, Results, prepare_out_dir, write_results
    from paperstack.report import bar_chart, write_report
    from ra2_unlearn.demo import FULL, QUICK, run_demo

    settings = QUICK if args.quick else FULL
    if args.seed is not None:
        settings = replace(settings, seeds=(args.seed,))
    if args.steps is not None:
        if args.steps < 1:
            raise PaperstackError(f"--steps {args.steps}: must be >= 1")
        settings = replace(settings, steps=args.steps)
    if args.methods is not None:
        chosen = tuple(m.strip() for m in args.methods.split(",") if m.strip())
        from ra2_unlearn.demo import SYSTEMS

        bad = [m for m in chosen if m not in SYSTEMS]
        if bad or not chosen:
            known = ",".join(SYSTEMS)
            raise PaperstackError(f"--methods {args.methods}: unknown {bad}; known: {known}")
        settings = replace(settings, methods=chosen)
    if args.device != "cpu":
        raise PaperstackError(f"--device {args.device}: the demo's toy model runs on cpu only")
    out = prepare_out_dir(args.out)
    manifest = Manifest.collect(
        DIST, __version__, seed=settings.seeds[0], config={"settings": asdict(settings)}
    )
    started = time.perf_counter()
    (out / "runs.jsonl").unlink(missing_ok=True)  # a fresh log per run
    rows, claims, facts = run_demo(
        settings,
        model_path=args.model,
        progress=not args.no_progress,
        runs_path=out / "runs.jsonl",
    )
    manifest = manifest.model_copy(update={"config": {**manifest.config, "run": facts}})
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    figures = [
        bar_chart(rows, metric, out / f"{metric}.png")
        for metric in ("forget_acc", "adjacent_acc", "retain_acc", "relearn_forget_acc")
    ]
    write_report(
        out,
        results,
        title=f"{DIST} {__version__}: demo" + (" (--quick)" if args.quick else ""),
        intro=_intro(settings, facts),
        figures=figures,
    )
    held = sum(c.held for c in claims)
    print(
        f"{PROG}: wrote {out / 'results.json'} and report.md "
        f"({held}/{len(claims)} claims held, {time.perf_counter() - started:.1f}s)"
    )
    return 0


def _intro(settings: object, facts: dict[str, object]) -> str:
    from ra2_unlearn.demo import DemoSettings

    assert isinstance(settings, DemoSettings)
    seeds = len(settings.seeds)
    ci = (
        f"mean over {seeds} unlearning seeds with a t 95% interval over seeds (n = seeds)"
        if seeds > 1
        else "one seed, Wilson 95% interval over questions (n = questions)"
    )
    return (
        f"Fact world of {settings.n_entities} entities; forget = the `{settings.forget_domain}` "
        f"domain of {settings.n_forget} entities; adjacent = their other domains; retain "
        "accuracy on entities never seen during unlearning. Every method runs "
        f"{settings.steps} steps of batch {settings.batch_size} (forget + retain halves); "
        f"RMU and RA^2 act on layer {settings.layer} and train the MLP down-projections of "
        f"layers {max(0, settings.layer - 2)}..{settings.layer}. Values: {ci}. Chance "
        f"accuracy on the forget questions: {facts['chance']:.3g}. Model: {facts['model']}. "
        "Toy scale on a CPU; GPU not measured."
    )


def _report(args: argparse.Namespace) -> int:
    from paperstack.records import (
        Manifest,
        Results,
        iter_jsonl,
        prepare_out_dir,
        write_results,
    )
    from paperstack.report import bar_chart, write_report
    from ra2_unlearn.demo import FULL, claims_from_rows, rows_from_runs

    if not args.runs.is_file():
        raise PaperstackError(f"{args.runs}: no such runs log")
    records = list(iter_jsonl(args.runs, allow_torn_tail=True))
    if not records:
        raise PaperstackError(f"{args.runs}: no runs recorded")
    try:
        rows = rows_from_runs(records)
    except (KeyError, TypeError, ValueError) as exc:
        raise PaperstackError(f"{args.runs}: not a ra2 demo runs log ({exc})") from None
    systems = sorted({r.system for r in rows})
    claims = claims_from_rows(rows, 0.1) if {"ra2", "rmu", "ga"} <= set(systems) else []
    out = prepare_out_dir(args.out)
    manifest = Manifest.collect(
        DIST, __version__, seed=0, config={"runs": str(args.runs), "systems": systems}
    )
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    figures = [
        bar_chart(rows, m, out / f"{m}.png")
        for m in ("forget_acc", "adjacent_acc", "retain_acc")
        if any(r.metric == m for r in rows)
    ]
    intro = _intro(FULL, {"chance": 0.1, "model": "cached tiny facts model"})
    write_report(
        out,
        results,
        title=f"{DIST} {__version__}: demo (from {args.runs.name})",
        intro=(args.note + " " if args.note else "")
        + f"Systems in the log: {', '.join(systems)}. "
        + intro,
        figures=figures,
    )
    print(f"{PROG}: wrote {out / 'results.json'} from {len(records)} runs ({len(claims)} claims)")
    return 0


def _unlearn(args: argparse.Namespace) -> int:
    from ra2_unlearn.config import UnlearnConfig
    from ra2_unlearn.data import load_mc_jsonl
    from ra2_unlearn.trainer import load_model, unlearn

    forget = load_mc_jsonl(args.forget)
    retain = load_mc_jsonl(args.retain)
    model, tok = load_model(args.model, args.device)
    config = UnlearnConfig(method=args.method, layer=args.layer, alpha=args.alpha)
    result = unlearn(
        model,
        tok,
        forget,
        retain,
        config,
        steps=args.steps,
        lr=args.lr,
        batch_size=args.batch_size,
        seed=args.seed,
        lora_r=args.lora_r,
        device=args.device,
        progress=True,
    )
    from paperstack.records import prepare_out_dir

    out = prepare_out_dir(args.out)
    result.model.save_pretrained(out)  # type: ignore[operator]
    tok.save_pretrained(out)
    print(f"{PROG}: unlearned with {args.method} in {result.seconds:.1f}s; saved to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
