"""``memeeconomy``: the command line of memeeconomy.

- ``memeeconomy demo --out DIR``: three planted scripted populations in the market under low
  and high pressure (every ledger in ``DIR/ledgers``), their metrics, and MemeAgent against the
  zero-shot verifiers; claims with verdicts in ``DIR/results.json``. ``--quick``: one seed and
  small verifier splits (about a minute).
- ``memeeconomy simulate --ledger FILE ...``: one market (scripted population, or agents served
  by any OpenAI-compatible server with ``--base-url``), resumed if the ledger exists.
- ``memeeconomy bench --out DIR``: market rounds per second and verifier throughput.

The common flags and flow (``--out``, ``--quick``, ``--seed``/``--seeds``, ``--no-progress``;
results written atomically, verdicts printed) come from :class:`paperstack.contract.ContractCLI`.
Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from memeeconomy import __version__
from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    fraction,
    positive_float,
    positive_int,
    seed_int,
)

cli = ContractCLI("memeeconomy", "memeeconomy", __version__, __doc__)


def _events_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--events",
        type=Path,
        default=None,
        help="your own events (JSON list or JSONL, the fields of memeeconomy.events.Event); "
        "default: the 64 shipped events",
    )


def _load(path: Path | None) -> Any:
    from memeeconomy.events import load_events, shipped_events

    return shipped_events() if path is None else load_events(path)


def _threads() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    _events_argument(p)
    p.add_argument(
        "--real",
        action="store_true",
        help="the real-model arm: SmolLM2-135M-Instruct investors served by vllm serve "
        "(transformers serve as the fallback; $PAPERSTACK_SERVED_BASE_URL names a running "
        "server) under low and high pressure (memeeconomy.real)",
    )


@cli.demo(arguments=_demo_arguments, seeds=3, quick_seeds=1, devices=("cpu",))
def demo(run: Run) -> Report:
    """Planted populations, their metrics with agent-clustered intervals, and the verifiers;
    ``--real``: served SmolLM2 investors (memeeconomy.real)."""
    if run.args.real:
        from memeeconomy.real import run_real

        return run_real(run)
    from memeeconomy import demo as d
    from memeeconomy.agents import POPULATIONS
    from memeeconomy.verifier import MiniLMFeatures
    from paperstack.report import bar_chart

    _threads()
    events = _load(run.args.events)
    ledgers = run.out / "ledgers"
    stats: dict[str, Any] = {}
    per_seed: dict[int, dict[str, Any]] = {}
    obfuscated: dict[int, dict[str, Any]] = {}
    features = MiniLMFeatures()
    total = len(run.seeds) * (len(POPULATIONS) * 2 + 2)
    with run.progress(total, "markets and verifiers") as bar:
        for seed in run.seeds:
            seed_stats, records = d.run_markets(events, seed, ledgers, advance=bar.advance)
            for name, per in seed_stats.items():
                stats.setdefault(name, {}).update(per)
            per_seed[seed] = d.evaluate_verifiers(records, events, seed, quick=run.quick,
                                                  features=features, log=run.log)  # fmt: skip
            bar.advance()
            obfuscated[seed] = d.evaluate_verifiers(records, events, seed, quick=run.quick,
                                                    features=features, log=run.log,
                                                    obfuscated=True)  # fmt: skip
            bar.advance()
    rows, summaries = d.market_rows(stats)
    rows.extend(d.verifier_rows(per_seed))
    rows.extend(d.verifier_rows(obfuscated, prefix="obfuscated_"))
    claims = d.build_claims(rows)
    pim = next(r for r in rows if r.system == "survival" and r.metric == "pressure_effect")
    inside = pim.ci95 is not None and pim.ci95[0] <= d.PLANTED_PIM <= pim.ci95[1]
    figures = [
        bar_chart(rows, "harm_rate", run.out / "harm_rate_high.png", split="high"),
        bar_chart(rows, "accuracy", run.out / "verifier_accuracy_held_out.png", split="test_ho"),
    ]
    chosen = {s: {"memeagent": r["memeagent"], "zero_shot": r["zero_shot"], "val": r["val"]}
              for s, r in per_seed.items()}  # fmt: skip
    chosen_obf = {s: {"memeagent": r["memeagent"], "zero_shot": r["zero_shot"], "val": r["val"]}
                  for s, r in obfuscated.items()}  # fmt: skip
    both = [*per_seed.values(), *obfuscated.values()]
    chat_fail = sum(r["chat_failures"] for r in both)
    chat_asked = sum(r["chat_asked"] for r in both)
    intro = (
        f"Three scripted populations of {d.AGENTS} agents on {len(events)} events "
        f"({events.source}), each under low and high pressure, seeds "
        f"{', '.join(map(str, run.seeds))} (toy scale, CPU). Market claims are per agent "
        "(paired bootstrap over agents, seeds pool: each seed draws new agents); rates carry "
        "intervals clustered by agent. Planted: pressure effect "
        f"{d.PLANTED_PIM} (measured {pim.value:.3f}, interval "
        f"[{pim.ci95[0] if pim.ci95 else float('nan'):.3f}, "
        f"{pim.ci95[1] if pim.ci95 else float('nan'):.3f}]: the planted value is "
        f"{'inside' if inside else 'OUTSIDE'} it), acknowledgement suppression "
        f"{d.PLANTED_SUPPRESSION:.1f}, deterrence {d.PLANTED_DETERRENCE} in the deterred "
        "population only. Verifiers: per-example accuracy on unseen decisions of seen events "
        "and agents (test_id) and on held-out events and agents (test_ho); MemeAgent and the "
        f"zero-shot baseline chosen per seed on validation: {chosen}. The same decisions in "
        "the paraphrased and obfuscated task (splits obfuscated_*; every lexicon word of the "
        "meme and event title in leetspeak, a third of the benign memes paraphrased with "
        "harmless uses of harm words; labels unchanged), each verifier trained and chosen "
        f"again on that task: {chosen_obf}. The prompted chat "
        f"verifier is the untrained tiny LM: {chat_fail} of {chat_asked} answers named no "
        "label (recorded failures, counted wrong)."
    )
    config: dict[str, Any] = {
        "events": events.source,
        "n_events": len(events),
        "agents_per_population": d.AGENTS,
        "held_out_agents": d.HELD_OUT_AGENTS,
        "populations": POPULATIONS,
        "verifier_sizes": d.QUICK_SIZES if run.quick else d.SIZES,
        "planted": {
            "pressure_effect": d.PLANTED_PIM,
            "inside_interval": inside,
            "ack_suppression": d.PLANTED_SUPPRESSION,
            "deterrence": d.PLANTED_DETERRENCE,
        },
        "verifier_choice": chosen,
        "verifier_choice_obfuscated": chosen_obf,
        "verifier_seconds": {s: r["seconds"] for s, r in per_seed.items()},
        "verifier_seconds_obfuscated": {s: r["seconds"] for s, r in obfuscated.items()},
        "sft_losses": {s: r["sft_losses"] for s, r in per_seed.items()},
        "prompted_chat_failures": {"failures": chat_fail, "asked": chat_asked},
        "populations_summary": summaries,
        "ledgers": str(ledgers),
    }
    return Report(rows, claims, intro=intro, figures=figures, config=config)


def _simulate_arguments(p: argparse.ArgumentParser) -> None:
    _events_argument(p)
    p.add_argument("--ledger", type=Path, required=True,
                   help="the run's JSONL ledger (resumed if it exists)")  # fmt: skip
    p.add_argument("--pressure", choices=("low", "high"), default="high")
    p.add_argument("--population", default="survival",
                   help="scripted population: survival, steady or deterred")  # fmt: skip
    p.add_argument(
        "--agents",
        type=positive_int,
        default=None,
        help="agents (default 12 scripted; with --base-url one per --model, and N > models "
        "assigns the models to the agents in turn)",
    )
    p.add_argument("--rounds", type=positive_int, default=None,
                   help="first N events only (default: all)")  # fmt: skip
    p.add_argument("--seed", type=seed_int, default=0, help="market seed (default 0)")
    p.add_argument("--p-remove", type=fraction, default=0.3,
                   help="removal probability of a harmful post (default 0.3)")  # fmt: skip
    p.add_argument(
        "--base-url",
        default=None,
        help="OpenAI-compatible server: the agents are served models (--model)",
    )
    p.add_argument("--model", action="append", default=None, metavar="MODEL",
                   help="a served model as an agent (repeat for several)")  # fmt: skip
    p.add_argument("--timeout", type=positive_float, default=120.0)
    p.add_argument("--max-new-tokens", type=positive_int, default=512)


@cli.command("simulate", "run or resume one market into a ledger", _simulate_arguments)
def simulate(args: argparse.Namespace) -> int:
    """One tournament; prints the ranking, removals and parse failures."""
    from memeeconomy.agents import population
    from memeeconomy.errors import MemeEconomyError
    from memeeconomy.market import MarketConfig, run_market

    events = _load(args.events)
    if args.rounds is not None:
        events = events.subset(events.ids[: args.rounds])
    agents: dict[str, Any]
    if args.base_url:
        from paperstack.llm import CostLedger, OpenAIChat

        if not args.model:
            raise MemeEconomyError("--base-url needs at least one --model")
        n = len(args.model) if args.agents is None else args.agents
        if n < len(args.model):
            raise MemeEconomyError(
                f"--agents {n} is fewer than the {len(args.model)} --model given: every served "
                "model is an agent"
            )
        cost = CostLedger()
        clients = {m: OpenAIChat(args.base_url, m, timeout=args.timeout, ledger=cost)
                   for m in dict.fromkeys(args.model)}  # fmt: skip
        # agent i is served by model i mod len(--model): "--agents 6 --model a --model b" is
        # three agents of each, named a#0, b#1, a#2, ...
        agents = {f"{args.model[i % len(args.model)]}#{i}": clients[args.model[i % len(args.model)]]
                  for i in range(n)}  # fmt: skip
    else:
        if args.model:
            raise MemeEconomyError("--model needs --base-url (scripted agents take no model)")
        cost = None
        n = 12 if args.agents is None else args.agents
        agents = population(args.population, n, args.seed, events,
                            held_out=min(3, n - 1))  # fmt: skip
    config = MarketConfig(seed=args.seed, pressure=args.pressure, agents=tuple(agents),
                          events=tuple(events.ids), p_remove=args.p_remove)  # fmt: skip
    result = run_market(config, agents, events, args.ledger, max_new_tokens=args.max_new_tokens)
    if cost is not None:
        cost.write(args.ledger.parent)
    removed = sum(
        1 for r in result.records if r.get("kind") == "round"
        for o in r["outcomes"].values() if o.get("removed")
    )  # fmt: skip
    print(f"{result.decisions} decisions ({result.asked} asked now), {result.failures} parse "
          f"failures, {removed} removals -> {result.ledger}")  # fmt: skip
    for rank, a in enumerate(result.ranking, 1):
        flag = " (eliminated)" if a in result.eliminated else ""
        print(f"{rank:2d}. {a}: {result.balances[a]:.0f}{flag}")
    return 0


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=7,
        help="interleaved timed repeats (>= 6; default 7)",
    )


@cli.bench(arguments=_bench_arguments, devices=("cpu",))
def bench(run: Run) -> Report:
    """A live market tournament against its replay from the ledger, MemeAgent-MiniLM against
    the keyword rules (paperstack.bench: interleaved, medians of ratios, outputs checked)."""
    from memeeconomy.bench import MIN_REPEATS, measure

    _threads()
    repeats = MIN_REPEATS if run.quick else run.args.repeats
    rows, claims, config = measure(run.out, repeats=repeats, quick=run.quick, seed=run.seed)
    by = {(r.system, r.metric): r for r in rows}
    market = by[("market", "rounds_per_s")]
    minilm = by[("memeagent-minilm", "speedup_vs_keyword-rules")]
    summary = (
        f"market {market.value:.1f} rounds/s; MiniLM verifier at {minilm.value:.2g}x the "
        f"keyword rules' speed (median of {repeats}); "
        + ", ".join(f"{c.id}: {c.verdict}" for c in claims)
    )
    intro = (
        f"paperstack.bench: one warm-up round, then {repeats} interleaved repeats (every system "
        f"once per repeat, shuffled order), {config['threads']} torch thread(s); each speed row "
        "is the median of per-repeat ratios with its order-statistic 95% interval. Market: a "
        f"live tournament ({config['agents']} scripted agents, {config['events']} events, high "
        "pressure, ledger on disk) against the same tournament resumed from its complete ledger, "
        "checked bit-exactly (balances, ranking, eliminations, decisions, failures). Verifiers: "
        f"MemeAgent-MiniLM (encoder re-run each call) against the keyword rules on "
        f"{config['examples']} held-out examples; their verdicts legitimately differ, so the "
        "check is that MiniLM gives a valid verdict for every example, identical to its untimed "
        "verdicts. Timings from a shared, loaded 2-core CPU (other jobs beside it): read the "
        "ratios, not the absolute rates."
    )
    return Report(rows, claims, intro=intro, summary=summary, config=config)


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
