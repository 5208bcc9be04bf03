"""``debate-ledger``: run auditable debates, rebuild their tables, replay interventions.

- ``debate-ledger run --ledger FILE --family NAME --model ID [--base-url URL]``: homogeneous
  debates of one model over a question set into a ledger (resumable: rerun to continue).
- ``debate-ledger validate LEDGER``: check every row against the schema.
- ``debate-ledger rebuild LEDGER --out DIR``: every table and figure from the ledger alone.
- ``debate-ledger replay LEDGER`` / ``screen LEDGER``: print the replay or screen table.
- ``debate-ledger exact-p X.. --vs Y..``: Spearman rho with its exact permutation p-value.
- ``debate-ledger demo --out DIR`` (``--quick``): the reproduction; ``bench --out DIR``.

The common flags and flow of ``demo`` and ``bench`` come from
:class:`paperstack.contract.ContractCLI`. Heavy imports stay inside the commands so that
``--help`` is instant.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from debate_ledger import __version__
from paperstack.contract import ContractCLI, Report, Run, parse_seeds
from paperstack.errors import PaperstackError

PROG = "debate-ledger"
cli = ContractCLI(PROG, "debate-ledger", __version__, __doc__)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 2.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 2], got {value}")
    return value


# --------------------------------------------------------------------------- run


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ledger", type=Path, required=True, help="ledger JSONL (appended to)")
    p.add_argument("--family", required=True, help="model family these debates belong to")
    p.add_argument("--model", required=True, help="model id/path, or the served model's name")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server (e.g. vLLM)")
    p.add_argument("--questions", type=Path, default=None, help="question set JSONL")
    p.add_argument(
        "--builtin",
        choices=["mcq", "facts"],
        default="mcq",
        help="shipped question set when --questions is not given",
    )
    p.add_argument("--agents", type=_positive, default=3)
    p.add_argument("--rounds", type=_positive, default=2, help="rounds after round 0")
    p.add_argument(
        "--seeds", type=parse_seeds, default=(0,), help="one debate per question per seed"
    )
    p.add_argument(
        "--resamples", type=_non_negative, default=0, help="extra round-0 samples per agent"
    )
    p.add_argument("--visibility", choices=["all", "answers", "none"], default="all")
    p.add_argument("--coder", default="letter-v1")
    p.add_argument("--temperature", type=_temperature, default=0.7)
    p.add_argument("--max-new-tokens", type=_positive, default=256)
    p.add_argument("--batch-size", type=_positive, default=8)
    p.add_argument("--concurrency", type=_positive, default=4, help="requests in flight")
    p.add_argument("--device", default="cpu", help="cpu or cuda (a local --model)")


@cli.command("run", "run one model's debates into a ledger (resumable)", _run_arguments)
def _run(args: argparse.Namespace) -> int:
    from debate_ledger.prompts import DebatePrompts
    from debate_ledger.questions import fact_questions, shipped_mcq
    from debate_ledger.runner import DebateConfig, run_debates
    from debate_ledger.schemas import read_questions
    from paperstack.contract import check_device, check_model
    from paperstack.llm import ChatModel

    if args.questions is not None:
        questions = read_questions(args.questions)
    else:
        questions = shipped_mcq() if args.builtin == "mcq" else fact_questions(200)
    cfg = DebateConfig(
        agents=args.agents,
        rounds=args.rounds,
        repeats=len(args.seeds),
        resamples=args.resamples,
        prompts=DebatePrompts(visibility=args.visibility),
        coder=args.coder,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        seed=args.seeds[0],
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
            check_model(args.model) or args.model,
            device=check_device(args.device),
            batch_size=args.batch_size,
        )

    def progress(done: int, total: int) -> None:
        print(f"{PROG}: {done}/{total} rows", flush=True)

    rows = run_debates(
        model, questions, args.ledger, family=args.family, config=cfg, progress=progress
    )
    print(f"{PROG}: {len(rows)} rows of family {args.family} in {args.ledger}")
    return 0


# --------------------------------------------------------------------------- ledger commands


@cli.command(
    "validate",
    "validate a ledger against the schema",
    lambda p: p.add_argument("ledger", type=Path),
)
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


def _rebuild_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("ledger", type=Path)
    p.add_argument("--out", type=Path, required=True, help="directory for the tables")
    p.add_argument(
        "--prices",
        type=Path,
        default=None,
        help="JSON {model: {input_per_mtok, output_per_mtok}} for the cost card",
    )
    p.add_argument("--gate-probe", default="agreement")


@cli.command(
    "rebuild",
    "regenerate every table and figure from a ledger (no model calls)",
    _rebuild_arguments,
)
def _rebuild(args: argparse.Namespace) -> int:
    from debate_ledger.rebuild import rebuild, tree_digest

    summary = rebuild(args.ledger, args.out, prices=args.prices, gate_probe=args.gate_probe)
    digest = tree_digest(args.out)
    print(
        f"{PROG}: rebuilt {len(digest)} files in {args.out} from {summary['debates']} debates "
        "(no model calls)"
    )
    return 0


def _table_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("ledger", type=Path)
    p.add_argument("--gate-probe", default="agreement")


def _print_table(args: argparse.Namespace, name: str) -> int:
    import tempfile

    from debate_ledger.rebuild import rebuild

    with tempfile.TemporaryDirectory() as tmp:
        rebuild(args.ledger, tmp, gate_probe=args.gate_probe)
        print((Path(tmp) / f"{name}.md").read_text(), end="")
    return 0


@cli.command("replay", "print the intervention replays of a ledger", _table_arguments)
def _replay(args: argparse.Namespace) -> int:
    return _print_table(args, "replay")


@cli.command("screen", "print the pre-debate screen of a ledger", _table_arguments)
def _screen(args: argparse.Namespace) -> int:
    return _print_table(args, "screen")


def _exact_p_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("x", type=float, nargs="+")
    p.add_argument("--vs", type=float, nargs="+", required=True)


@cli.command("exact-p", "Spearman rho and its exact two-sided p (G <= 10)", _exact_p_arguments)
def _exact_p(args: argparse.Namespace) -> int:
    import numpy as np

    from debate_ledger.screen import spearman_exact_p, spearman_rho

    if len(args.x) != len(args.vs):
        raise PaperstackError(f"x has {len(args.x)} values but --vs has {len(args.vs)}")
    x, y = np.array(args.x), np.array(args.vs)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise PaperstackError("exact-p: every value must be a finite number")
    print(f"rho = {spearman_rho(x, y):.6f}  exact two-sided p = {spearman_exact_p(x, y):.6f}")
    return 0


# --------------------------------------------------------------------------- demo and bench


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="not supported: the scripted families need questions they know; use `run`",
    )


@cli.demo(
    arguments=_demo_arguments,
    seeds=3,
    quick_seeds=1,
    model="model id or path to debate as the LM family instead of the tiny model",
    devices=("cpu", "cuda"),
)
def demo(run: Run) -> Report:
    from debate_ledger.demo import run_demo

    if run.args.dataset is not None:
        raise PaperstackError(
            f"--dataset {run.args.dataset}: the demo needs questions the scripted families know; "
            "use `debate-ledger run --questions FILE` for your own question set"
        )
    return run_demo(run)


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debates", type=_positive, default=100_000, help="simulated debates")
    p.add_argument("--repeats", type=_positive, default=3, help="timed repeats (paired)")


@cli.bench(arguments=_bench_arguments, seeds=1, devices=("cpu",))
def bench(run: Run) -> Report:
    from debate_ledger.bench import run_bench

    return run_bench(run)


main = cli.main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
