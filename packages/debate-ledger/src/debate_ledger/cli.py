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
import math
import time
from pathlib import Path
from typing import Any

from debate_ledger import __version__
from debate_ledger.coders import REAL_MODEL_CODER
from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    non_negative_int,
    parse_seeds,
    positive_float,
    positive_int,
)
from paperstack.errors import PaperstackError

PROG = "debate-ledger"
cli = ContractCLI(PROG, "debate-ledger", __version__, __doc__)


def _temperature(text: str) -> float:
    """argparse type: a sampling temperature in [0, 2] (what OpenAI-compatible servers accept)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and 0.0 <= value <= 2.0):
        raise argparse.ArgumentTypeError(f"must be in [0, 2], got {text}")
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
    p.add_argument("--agents", type=positive_int, default=3)
    p.add_argument("--rounds", type=positive_int, default=2, help="rounds after round 0")
    p.add_argument(
        "--seeds", type=parse_seeds, default=(0,), help="one debate per question per seed (0-2)"
    )
    p.add_argument(
        "--resamples",
        type=non_negative_int,
        default=None,
        help="extra round-0 samples per agent (default: --rounds, so the majority-vote "
        "baseline makes as many calls as the debate)",
    )
    p.add_argument("--visibility", choices=["all", "answers", "none"], default="all")
    p.add_argument(
        "--coder",
        default=REAL_MODEL_CODER,
        help="answer coder (letter-v3 reads 'A) Venus', 'B. Mars' and option texts, and "
        "refuses a letter its words contradict; letter-v2 is the scripted demos' coder)",
    )
    p.add_argument("--temperature", type=_temperature, default=0.7)
    p.add_argument("--max-new-tokens", type=positive_int, default=512)
    p.add_argument("--no-shuffle", action="store_true", help="show options in the given order")
    p.add_argument(
        "--concurrency", type=positive_int, default=4, help="requests in flight (--base-url)"
    )
    p.add_argument(
        "--max-retries", type=non_negative_int, default=3, help="retries per request (--base-url)"
    )
    p.add_argument(
        "--timeout", type=positive_float, default=120.0, help="seconds per request (--base-url)"
    )
    p.add_argument(
        "--cost-card",
        type=Path,
        default=None,
        help="where this session's calls are added (default: cost_card.json beside the ledger)",
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda (a local --model)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar or lines")


@cli.command("run", "run one model's debates into a ledger (resumable)", _run_arguments)
def _run(args: argparse.Namespace) -> int:
    from debate_ledger.prompts import DebatePrompts
    from debate_ledger.questions import fact_questions, shipped_mcq
    from debate_ledger.runner import DebateConfig, run_debates
    from debate_ledger.schemas import read_questions
    from paperstack.contract import check_device, check_model
    from paperstack.llm import ChatModel
    from paperstack.progress import Progress, quiet_libraries

    quiet_libraries()
    # Paths first: a bad --ledger or --cost-card is one line before any model is loaded.
    for flag, path in (("--ledger", args.ledger), ("--cost-card", args.cost_card)):
        if path is not None and path.is_dir():
            raise PaperstackError(f"{flag} {path}: is a directory; name a file")
    if args.questions is not None:
        questions = read_questions(args.questions)
    else:
        questions = shipped_mcq() if args.builtin == "mcq" else fact_questions(200)
    cfg = DebateConfig(
        agents=args.agents,
        rounds=args.rounds,
        seeds=tuple(args.seeds),
        resamples=args.rounds if args.resamples is None else args.resamples,
        prompts=DebatePrompts(visibility=args.visibility),
        coder=args.coder,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        shuffle=not args.no_shuffle,
    )
    model: ChatModel
    if args.base_url is not None:
        from paperstack.llm import OpenAIChat

        model = OpenAIChat(
            args.base_url,
            args.model,
            concurrency=args.concurrency,
            max_retries=args.max_retries,
            timeout=args.timeout,
        )
    else:
        from paperstack.llm import TransformersChat

        device = check_device(args.device)
        model = TransformersChat.from_pretrained(check_model(args.model) or args.model,
                                                 device=device)  # fmt: skip
    card = args.cost_card or args.ledger.parent / "cost_card.json"
    started = time.time()
    total = len(questions) * len(cfg.seeds) * cfg.agents * (cfg.rounds + 1 + cfg.resamples)
    bar = Progress(total, f"{args.family}/{args.model}", enabled=not args.no_progress)
    last: list[int | None] = [None]

    def progress(done: int, _total: int) -> None:
        previous = last[0]
        if previous is not None:
            bar.advance(done - previous)
        else:
            bar.completed = done
        last[0] = done

    result = None
    try:
        _require_sampling(model, cfg)
        with bar:
            result = run_debates(model, questions, args.ledger, family=args.family, config=cfg,
                                 progress=progress)  # fmt: skip
    finally:
        _add_session(card, args, model, cfg, started, result)
    print(
        f"{PROG}: {len(result.rows)} rows of {args.family}/{args.model} in {args.ledger} "
        f"({result.written} new, run {result.run}, {result.seconds:.0f} s); costs in {card}"
    )
    return 0


def _require_sampling(model: object, cfg: Any) -> None:
    """A served model must really sample when the debate needs independent draws: the agents'
    round-0 answers and the resamples (the majority-vote baseline) at ``--temperature`` > 0. A
    server that ignores temperature (``transformers serve`` without ``do_sample`` in the
    model's generation_config) would make them one answer repeated: refused in one line."""
    from paperstack.llm import BackendError, OpenAIChat

    if not isinstance(model, OpenAIChat):
        return
    if cfg.temperature <= 0 or (cfg.agents < 2 and cfg.resamples == 0):
        return
    try:
        model.require_sampling(
            f"--temperature {cfg.temperature:g} with {cfg.agents} agents and "
            f"{cfg.resamples} resamples"
        )
    except BackendError as exc:
        raise PaperstackError(
            f"{model.model}: the sampling check's call failed ({exc}); nothing was written: "
            "rerun the same command"
        ) from None


def _add_session(card: Path, args: argparse.Namespace, model: object, cfg: object,
                 started: float, result: object) -> None:  # fmt: skip
    """Append this session's calls (the backend's own cost ledger: the server's token counts,
    retries, failures) to the cost card, also when the run failed."""
    import datetime
    import json

    from debate_ledger.runner import config_hash
    from paperstack.llm import CostLedger
    from paperstack.records import atomic_write_json

    ledger = getattr(result, "cost", None) or getattr(model, "ledger", None)
    if not isinstance(ledger, CostLedger):
        return
    data: dict = {"sessions": []}
    if card.is_file():
        try:
            loaded = json.loads(card.read_text())
            if isinstance(loaded, dict) and isinstance(loaded.get("sessions"), list):
                data = loaded
        except (OSError, json.JSONDecodeError):
            raise PaperstackError(f"{card}: not a readable cost card; move it away") from None
    data["sessions"].append({
        "ledger": str(args.ledger), "family": args.family, "model": args.model,
        "base_url": args.base_url, "run": config_hash(cfg),  # type: ignore[arg-type]
        "started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc)
        .isoformat(timespec="seconds"),
        "completed": result is not None, "rows_written": getattr(result, "written", None),
        **ledger.to_json(),
    })  # fmt: skip
    keys = ("calls", "failed", "retries", "prompt_tokens", "completion_tokens", "total_tokens",
            "unmetered_calls", "request_seconds")  # fmt: skip
    data["totals"] = {k: round(sum(s.get(k, 0) or 0 for s in data["sessions"]), 3) for k in keys}
    atomic_write_json(card, data)


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
        f"{len(arr.models)} model(s) in {len(arr.families)} family(ies), {arr.n_agents} agents, "
        f"rounds 0..{arr.n_rounds}, {arr.n_resamples} resamples per agent: valid"
    )
    return 0


def _rebuild_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("ledger", type=Path)
    # A plain string: argparse's Path("") would be "." and rebuild would write into the current
    # folder with exit 0 (issue #46); the core's prepare_out_dir refuses the empty path itself.
    p.add_argument("--out", required=True, help="directory for the tables")
    p.add_argument(
        "--prices",
        type=Path,
        default=None,
        help="JSON {model: {input_per_mtok, output_per_mtok}} for the cost card",
    )
    p.add_argument("--gate-probe", default="agreement")
    p.add_argument(
        "--recode", default=None, help="re-code every response with this coder (e.g. letter-v2)"
    )


@cli.command(
    "rebuild",
    "regenerate every table and figure from a ledger (no model calls)",
    _rebuild_arguments,
)
def _rebuild(args: argparse.Namespace) -> int:
    from debate_ledger.rebuild import rebuild, tree_digest

    summary = rebuild(
        args.ledger, args.out, prices=args.prices, gate_probe=args.gate_probe, recode=args.recode
    )
    digest = tree_digest(args.out)
    moved = ""
    if "recode" in summary:
        rc = summary["recode"]
        moved = f"; re-coded with {rc['coder']}: {rc['rows_changed']} of {rc['rows']} answers moved"
    print(
        f"{PROG}: rebuilt {len(digest)} files in {args.out} from {summary['debates']} debates "
        f"(no model calls){moved}"
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


@cli.command(
    "exact-p",
    "Spearman rho and its two-sided permutation p (exact up to G = 10, Monte Carlo above)",
    _exact_p_arguments,
)
def _exact_p(args: argparse.Namespace) -> int:
    import numpy as np

    from debate_ledger.screen import spearman_p, spearman_rho

    if len(args.x) != len(args.vs):
        raise PaperstackError(f"x has {len(args.x)} values but --vs has {len(args.vs)}")
    x, y = np.array(args.x), np.array(args.vs)
    for name, values in (("x", x), ("--vs", y)):
        if len(values) and np.all(values == values[0]):
            raise PaperstackError(f"{name}: every value is {values[0]:g}; rho is undefined")
    pv = spearman_p(x, y)
    if pv.method == "exact":
        text = f"exact two-sided p = {pv.p:.6f} ({pv.permutations} permutations)"
    else:
        text = (f"Monte-Carlo two-sided p = {pv.p:.6f} ± {pv.se:.6f} ({pv.permutations} "
                "random permutations)")  # fmt: skip
    print(f"rho = {spearman_rho(x, y):.6f}  {text}")
    return 0


# --------------------------------------------------------------------------- demo and bench


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="not supported: the scripted families need questions they know; use `run`",
    )
    p.add_argument(
        "--real",
        action="store_true",
        help="the real-model arm instead: debates of served SmolLM2-135M-Instruct "
        "(PAPERSTACK_SERVED_BASE_URL names a running server; else one is started)",
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

    if run.args.real:
        from debate_ledger.real import run_real

        return run_real(run)
    if run.args.dataset is not None:
        raise PaperstackError(
            f"--dataset {run.args.dataset}: the demo needs questions the scripted families know; "
            "use `debate-ledger run --questions FILE` for your own question set"
        )
    return run_demo(run)


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debates", type=positive_int, default=100_000, help="simulated debates")
    p.add_argument(
        "--repeats", type=positive_int, default=9, help="interleaved timed repeats (>= 6)"
    )


@cli.bench(arguments=_bench_arguments, seeds=1, devices=("cpu",))
def bench(run: Run) -> Report:
    from debate_ledger.bench import run_bench

    return run_bench(run)


main = cli.main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
