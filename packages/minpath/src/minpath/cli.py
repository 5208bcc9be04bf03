"""``minpath``: the command line of minpath.

- ``minpath demo --out DIR``: the reproduction (:mod:`minpath.demo`): graph extraction against
  gold, then a tiny model fine-tuned (trl ``SFTTrainer``) on MinPath traces vs raw traces vs
  each compression baseline at the matched token ratio, per seed; writes ``DIR/results.json``,
  ``DIR/report.md`` and figures. ``--quick`` is the one-minute smoke version (micro model, a
  few steps: it measures nothing).
- ``minpath bench --out DIR``: graph extraction throughput (CoTs/s), and generated tokens and
  generation time of the MinPath model over the raw model (ratios, paired per repeat).
- ``minpath compress --input FILE --out FILE``: MinPath of your own ``{"question", "cot",
  "answer"}`` JSONL; each line records whether it was compressed or why it fell back.
- ``minpath traces --out FILE``: write the toy world's verbose CoTs as that JSONL.

The common flags and flow (``--out``, ``--quick``, ``--seed``/``--seeds``, ``--device``,
``--model``, ``--no-progress``; results written atomically, verdicts printed) come from
:class:`paperstack.contract.ContractCLI`. Heavy imports stay inside the commands so that
``--help`` is instant.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from minpath import __version__
from paperstack.bench import add_repeats_argument
from paperstack.contract import ContractCLI, Report, Run, positive_int, seed_int

cli = ContractCLI("minpath", "minpath", __version__, __doc__)

MODEL_HELP = (
    "a local model folder or hub id to fine-tune instead of the toy world's tiny arithmetic "
    "model (it needs a chat template; the task stays the toy world's arithmetic)"
)


def _threads() -> None:
    """One torch thread (the machines this runs on are shared) unless OMP_NUM_THREADS says."""
    import torch

    wanted = os.environ.get("OMP_NUM_THREADS", "")
    torch.set_num_threads(int(wanted) if wanted.isdigit() and int(wanted) > 0 else 1)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=positive_int, default=None, help="SFT steps per system")
    p.add_argument("--train", type=positive_int, default=None, help="training CoTs per seed")
    p.add_argument("--test", type=positive_int, default=None, help="held-out problems")


def _configured(run: Run) -> Any:
    from minpath.demo import QUICK, DemoConfig

    config = QUICK if run.quick else DemoConfig()
    changes = {k: getattr(run.args, k) for k in ("steps", "train", "test")}
    return dataclasses.replace(config, **{k: v for k, v in changes.items() if v is not None})


@cli.demo(arguments=_demo_arguments, seeds=5, quick_seeds=3, model=MODEL_HELP, devices=("cpu",))
def demo(run: Run) -> Report:
    """MinPath against raw-trace SFT and five compression baselines (see :mod:`minpath.demo`)."""
    _threads()
    from minpath import demo as d
    from paperstack.report import bar_chart

    config = _configured(run)
    per_seed: dict[int, dict[str, Any]] = {}
    with run.progress(1 + len(run.seeds), "base + seeds") as bar:
        start = time.perf_counter()
        base = d.base_path(config, run.model)
        run.log(f"base model ready in {time.perf_counter() - start:.0f} s")
        bar.advance()
        for seed in run.seeds:
            per_seed[seed] = d.run_seed(config, seed, base, run.device, run.log)
            bar.advance()
    rows = d.rows_for(per_seed)
    claims = d.claims_for(rows)
    figures = [
        bar_chart(rows, "accuracy", run.out / "accuracy.png", split="seeds",
                  title="held-out accuracy"),
        bar_chart(rows, "gen_tokens", run.out / "gen_tokens.png", split="seeds",
                  title="generated tokens per answer"),
    ]  # fmt: skip
    ratios = ", ".join(f"{per_seed[s]['ratio']:.2f}" for s in run.seeds)
    intro = (
        ("**--quick smoke run: the micro model after a few steps; nothing is measured here, "
         "read the full demo's report.** " if run.quick else "")
        + "Base model: "
        + (run.model or f"{config.preset} preset trained on the core arithmetic, then made a "
           f"verbose reasoner by {config.reasoner_steps} SFT steps on verbose CoTs")
        + f" ({config.min_ops}-{config.max_ops} operations). Per seed "
        f"({', '.join(map(str, run.seeds))}): {config.train} verbose CoTs that restate the "
        "expression above each reduction, with distractors, redundant checks and "
        "backtracking; MinPath compresses them (rule typer, derivability "
        "checked by the task's step verifier, fallback to the original counted); the baselines "
        f"compress to the same token ratio (per seed: {ratios}). Each trained system is trl "
        f"SFT from the same base for {config.steps} steps of {config.batch_size} "
        f"(lr per system, chosen on validation seed 99: "
        f"{', '.join(f'{k} {v:g}' for k, v in config.learning_rates)}); length-budget "
        "decodes the raw model within the "
        f"matched budget. Evaluation: {config.test} held-out problems, greedy. Rows of split "
        "`seeds` are per seed (paired by seed); tokens are the toy tokenizer's (one per "
        "character). Toy scale on a shared 2-core CPU. " + d.premise_note(claims)
    )  # fmt: skip
    fallbacks = {s: per_seed[s]["fallbacks"] for s in run.seeds}
    samples = {name: per_seed[run.seeds[0]]["systems"][name]["sample"] for name in d.SYSTEMS}
    config_out = d.config_dict(config) | {"fallbacks": fallbacks, "sample_outputs": samples,
                                          "matched_ratio": {s: per_seed[s]["ratio"]
                                                            for s in run.seeds}}  # fmt: skip
    return Report(rows, claims, title="minpath: demo", intro=intro, figures=figures,
                  config=config_out)  # fmt: skip


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cots", type=positive_int, default=500, help="CoTs per extraction repeat")
    add_repeats_argument(p, default=7, quick=6, what="repeats")


@cli.bench(arguments=_bench_arguments, model=MODEL_HELP, devices=None)
def bench(run: Run) -> Report:
    """Extraction and generation time of MinPath against its references, interleaved."""
    _threads()
    import torch

    from minpath.bench import run_bench
    from paperstack.bench import set_threads

    return run_bench(run, threads=set_threads(torch.get_num_threads()))


def _compress_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, required=True,
                   help='JSONL of {"question", "cot", "answer"[, "edges"]} lines')  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="the JSONL file to write")


@cli.command("compress", "MinPath of your own CoTs (JSONL in, JSONL out)", _compress_arguments)
def compress_command(args: argparse.Namespace) -> int:
    from minpath.errors import MinPathError
    from minpath.graph import compress
    from minpath.traces import load_jsonl
    from paperstack.records import atomic_write

    records = load_jsonl(args.input)
    if args.out.is_dir():
        raise MinPathError(f"--out {args.out}: is a directory, expected a file")
    lines = []
    fallbacks = 0
    before = after = 0
    for r in records:
        try:
            answer = int(r.answer.strip())
        except ValueError:
            answer = None
        try:
            c = compress(r.question, r.cot, gold_answer=answer, extra_edges=r.edges)
        except MinPathError as exc:
            raise MinPathError(f"{r.where}: {exc}") from None
        fallbacks += not c.compressed
        before, after = before + len(r.cot), after + len(c.text)
        lines.append(json.dumps({"question": r.question, "answer": r.answer} | c.to_dict()))
    atomic_write(args.out, "\n".join(lines) + "\n")
    print(
        f"{args.out}: {len(records)} CoTs, {len(records) - fallbacks} compressed, "
        f"{fallbacks} kept as they were; {after / max(1, before):.2f} of the characters"
    )
    return 0


def _traces_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    p.add_argument("-n", type=positive_int, default=100, help="how many CoTs (default 100)")
    p.add_argument("--seed", type=seed_int, default=0, help="draw seed (default 0)")


@cli.command("traces", "write the toy world's verbose CoTs as JSONL", _traces_arguments)
def traces_command(args: argparse.Namespace) -> int:
    from minpath.errors import MinPathError
    from minpath.traces import verbose_traces, write_jsonl

    if args.out.is_dir():
        raise MinPathError(f"--out {args.out}: is a directory, expected a file")
    print(write_jsonl(args.out, verbose_traces(args.n, seed=args.seed)))
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
