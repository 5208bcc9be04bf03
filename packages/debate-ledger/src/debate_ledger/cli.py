"""``debate-ledger``: run auditable debates, rebuild their tables, replay interventions.

- ``debate-ledger run --family NAME --ledger FILE (--model ID | --base-url URL --model NAME)``:
  homogeneous debates over a question set into a ledger (resumable: rerun to continue).
- ``debate-ledger validate LEDGER``: check every row against the schema (one line per problem).
- ``debate-ledger rebuild LEDGER --out DIR``: every table and figure from the ledger alone.
- ``debate-ledger replay LEDGER`` / ``screen LEDGER``: print the replay or screen table.
- ``debate-ledger exact-p X.. --vs Y..``: Spearman rho with its exact permutation p-value.
- ``debate-ledger demo --out DIR`` (``--quick``): the reproduction; ``bench --out DIR``.

Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from debate_ledger import __version__
from paperstack.errors import PaperstackError, cli_guard

PROG = "debate-ledger"
DIST = "debate-ledger"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"{DIST} {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one family's debates into a ledger (resumable)")
    run.add_argument("--ledger", type=Path, required=True, help="ledger JSONL (appended to)")
    run.add_argument("--family", required=True, help="family name for these debates")
    run.add_argument("--model", required=True, help="model id/path, or served model name")
    run.add_argument("--base-url", default=None, help="OpenAI-compatible server (e.g. vLLM)")
    run.add_argument("--questions", type=Path, default=None, help="question set JSONL")
    run.add_argument(
        "--builtin",
        choices=["mcq", "facts"],
        default="mcq",
        help="shipped question set when --questions is not given",
    )
    run.add_argument("--agents", type=int, default=3)
    run.add_argument("--rounds", type=int, default=2, help="rounds after round 0")
    run.add_argument("--repeats", type=int, default=1)
    run.add_argument("--resamples", type=int, default=0, help="extra round-0 samples per agent")
    run.add_argument("--visibility", choices=["all", "answers", "none"], default="all")
    run.add_argument("--coder", default="letter-v1")
    run.add_argument("--temperature", type=float, default=0.7)
    run.add_argument("--max-new-tokens", type=int, default=256)
    run.add_argument("--batch-size", type=int, default=8)
    run.add_argument("--concurrency", type=int, default=4)
    run.add_argument("--device", default=None)
    run.add_argument("--seed", type=int, default=0)

    val = sub.add_parser("validate", help="validate a ledger against the schema")
    val.add_argument("ledger", type=Path)

    reb = sub.add_parser("rebuild", help="regenerate every table and figure from a ledger")
    reb.add_argument("ledger", type=Path)
    reb.add_argument("--out", type=Path, required=True)
    reb.add_argument(
        "--prices",
        type=Path,
        default=None,
        help="JSON {model: {input_per_mtok, output_per_mtok}} for the cost card",
    )
    reb.add_argument("--gate-probe", default="agreement")

    for name, text in (("replay", "intervention replays"), ("screen", "pre-debate screen")):
        s = sub.add_parser(name, help=f"print the {text} table of a ledger")
        s.add_argument("ledger", type=Path)
        s.add_argument("--gate-probe", default="agreement")

    ex = sub.add_parser("exact-p", help="Spearman rho and its exact two-sided p (G <= 10)")
    ex.add_argument("x", type=float, nargs="+")
    ex.add_argument("--vs", type=float, nargs="+", required=True)

    demo = sub.add_parser("demo", help="run the reproduction and write results.json and report.md")
    demo.add_argument("--out", type=Path, required=True, help="directory for the results")
    demo.add_argument("--quick", action="store_true", help="small run (under a minute, for CI)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument(
        "--model",
        default=None,
        help="model id or path to debate as the LM family instead of the tiny model",
    )
    demo.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="question set JSONL to use instead of the built-in questions",
    )
    demo.add_argument("--device", default="cpu", help="cpu (scripted families run on numpy)")

    bench = sub.add_parser("bench", help="ledger analysis throughput vs a per-debate loop")
    bench.add_argument("--out", type=Path, required=True, help="directory for bench.json")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--debates", type=int, default=100_000)
    return p


@cli_guard(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {
        "run": _run,
        "validate": _validate,
        "rebuild": _rebuild,
        "replay": _table,
        "screen": _table,
        "exact-p": _exact_p,
        "demo": _demo,
        "bench": _bench,
    }[args.command]
    return handler(args)


def _run(args: argparse.Namespace) -> int:
    from debate_ledger.prompts import DebatePrompts
    from debate_ledger.questions import fact_questions, shipped_mcq
    from debate_ledger.runner import DebateConfig, run_debates
    from debate_ledger.schemas import read_questions
    from paperstack.llm import ChatModel

    if args.questions is not None:
        questions = read_questions(args.questions)
    else:
        questions = shipped_mcq() if args.builtin == "mcq" else fact_questions(200)
    cfg = DebateConfig(
        agents=args.agents,
        rounds=args.rounds,
        repeats=args.repeats,
        resamples=args.resamples,
        prompts=DebatePrompts(visibility=args.visibility),
        coder=args.coder,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        seed=args.seed,
        batch_size=args.batch_size,
        concurrency=args.concurrency,
    )
    model: ChatModel
    if args.base_url is not None:
        from paperstack.llm import OpenAIChat

        model = OpenAIChat(args.base_url, args.model, concurrency=args.concurrency)
    else:
        from paperstack.llm import TransformersChat

        model = TransformersChat.from_pretrained(
            args.model, device=args.device, batch_size=args.batch_size
        )

    def progress(done: int, total: int) -> None:
        print(f"{PROG}: {done}/{total} rows", flush=True)

    rows = run_debates(
        model, questions, args.ledger, family=args.family, config=cfg, progress=progress
    )
    print(f"{PROG}: {len(rows)} rows of family {args.family} in {args.ledger}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from debate_ledger.ledger import from_rows
    from debate_ledger.schemas import read_ledger

    rows = read_ledger(args.ledger)
    arr = from_rows(rows, source=str(args.ledger))
    print(
        f"{PROG}: {args.ledger}: {len(rows)} rows, {arr.n_debates} debates, "
        f"{len(arr.families)} families, {arr.n_agents} agents, rounds 0..{arr.n_rounds}: valid"
    )
    return 0


def _rebuild(args: argparse.Namespace) -> int:
    from debate_ledger.rebuild import rebuild, tree_digest

    summary = rebuild(args.ledger, args.out, prices=args.prices, gate_probe=args.gate_probe)
    digest = tree_digest(args.out)
    print(
        f"{PROG}: rebuilt {len(digest)} files in {args.out} from {summary['debates']} debates "
        "(no model calls)"
    )
    return 0


def _table(args: argparse.Namespace) -> int:
    import tempfile

    from debate_ledger.rebuild import rebuild

    with tempfile.TemporaryDirectory() as tmp:
        rebuild(args.ledger, tmp, gate_probe=args.gate_probe)
        print((Path(tmp) / f"{args.command}.md").read_text(), end="")
    return 0


def _exact_p(args: argparse.Namespace) -> int:
    import numpy as np

    from debate_ledger.screen import spearman_exact_p, spearman_rho

    if len(args.x) != len(args.vs):
        raise PaperstackError(f"x has {len(args.x)} values but --vs has {len(args.vs)}")
    x, y = np.array(args.x), np.array(args.vs)
    print(f"rho = {spearman_rho(x, y):.6f}  exact two-sided p = {spearman_exact_p(x, y):.6f}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from dataclasses import asdict, replace

    from debate_ledger.demo import DemoConfig, run_demo
    from paperstack.records import Manifest, Results, atomic_write, prepare_out_dir, write_results
    from paperstack.report import write_report

    if args.device != "cpu" and args.model is None:
        raise PaperstackError(f"--device {args.device}: the built-in demo runs on the CPU")
    if args.dataset is not None:
        raise PaperstackError(
            f"--dataset {args.dataset}: the demo needs questions the scripted families know; "
            "use `debate-ledger run --questions FILE` for your own question set"
        )
    out = prepare_out_dir(args.out)
    cfg = DemoConfig.quick() if args.quick else DemoConfig()
    if args.model is not None:
        cfg = replace(cfg, model=args.model)
    ledger = out / "ledger.jsonl"
    if ledger.exists():
        ledger.unlink()  # a demo is a fresh run; `run` is the resumable command
    manifest = Manifest.collect(DIST, __version__, seed=args.seed, config=asdict(cfg))
    rows, claims, info = run_demo(out, cfg, seed=args.seed)
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    tables = Path(info["tables"])
    intro = (
        f"{len(info['families'])} families x {info['questions']} questions "
        f"({info['debates']} debates; {cfg.agents} agents, rounds 0..{cfg.rounds}, "
        f"{cfg.resamples} round-0 resamples), seed {args.seed}. Six scripted families with known "
        "rates plus one tiny transformers family; every table below is rebuilt from "
        "`ledger.jsonl` alone (`debate-ledger rebuild ledger.jsonl --out tables`).\n\n"
        + "\n".join((tables / n).read_text() for n in ("transitions.md", "replay.md", "screen.md"))
    )
    figures = []  # beside report.md, so the report keeps its figures wherever it is copied
    for name in ("transitions.png", "screen.png"):
        figures.append(atomic_write(out / name, (tables / name).read_bytes()))
    write_report(
        out,
        results,
        title=f"{DIST} {__version__}: demo{' (quick)' if args.quick else ''}",
        intro=intro,
        figures=figures,
    )
    held = sum(c.held for c in claims)
    print(
        f"{PROG}: wrote {out / 'results.json'} and report.md "
        f"({held}/{len(claims)} claims held, {info['seconds']:.1f}s)"
    )
    for c in claims:
        print(f"  {'held' if c.held else 'NOT held'}: {c.id}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    import numpy as np

    from debate_ledger.families import Family, simulate
    from debate_ledger.ledger import reference_transitions, transitions
    from debate_ledger.screen import probe_values
    from paperstack.records import Manifest, Results, Row, prepare_out_dir, write_results

    if args.debates < 100:
        raise PaperstackError(f"--debates {args.debates}: needs at least 100")
    out = prepare_out_dir(args.out)
    manifest = Manifest.collect(
        DIST, __version__, seed=args.seed, config=vars(args) | {"out": str(args.out)}
    )
    rng = np.random.default_rng(args.seed)
    fam = Family("bench", accuracy=0.6, conformity=0.5, parse_fail=0.02)
    answers = simulate(fam, args.debates, 3, 2, 4, rng)
    gold = np.zeros(args.debates, dtype=np.int64)
    t0 = time.perf_counter()
    tr = transitions(answers, gold)
    t_vec = time.perf_counter() - t0
    n_ref = min(args.debates, 5_000)  # the loop is slow: time a slice, report per debate
    t0 = time.perf_counter()
    ref = reference_transitions(answers[:n_ref], gold[:n_ref])
    t_ref = (time.perf_counter() - t0) * args.debates / n_ref
    if not np.array_equal(ref["collapse"], tr.collapse[:n_ref].astype(int)):
        raise PaperstackError("vectorised and reference analyses disagree")
    rows = [
        Row(
            system="vectorised",
            metric="debates_per_s",
            value=args.debates / t_vec,
            n=args.debates,
            unit="debates/s",
        ),
        Row(
            system="per-debate-loop",
            metric="debates_per_s",
            value=args.debates / t_ref,
            n=n_ref,
            unit="debates/s",
        ),
        Row(system="vectorised", metric="speedup", value=t_ref / t_vec, n=args.debates),
    ]
    del probe_values  # imported to check the screen module loads with numpy alone
    results = Results(manifest=manifest.finish(), rows=rows, claims=[])
    path = write_results(out / "bench.json", results)
    print(
        f"{PROG}: wrote {path}: {args.debates / t_vec:,.0f} debates/s vectorised, "
        f"{t_ref / t_vec:.0f}x the per-debate loop"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
