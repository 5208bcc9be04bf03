"""``minpath``: the command line of minpath.

- ``minpath demo --out DIR``: the reproduction (:mod:`minpath.demo`): graph extraction against
  gold, then a tiny model fine-tuned (trl ``SFTTrainer``) on MinPath traces vs raw traces vs
  each compression baseline at the matched token ratio, per seed; writes ``DIR/results.json``,
  ``DIR/report.md`` and figures. ``--quick`` is the one-minute smoke version (micro model, a
  few steps: it measures nothing).
- ``minpath bench --out DIR``: graph extraction throughput (CoTs/s), and generated tokens and
  generation time of the MinPath model over the raw model (ratios, paired per repeat).
- ``minpath compress --data FILE --out DIR``: MinPath of your own ``{"question", "cot",
  "answer"}`` JSONL into ``DIR/compressed.jsonl`` (each row's ``status``: compressed, or kept
  and why) and ``DIR/summary.json``.
- ``minpath train --model M --data FILE --out DIR``: trl SFT of any causal LM on the MinPath
  traces of that JSONL (bf16, gradient accumulation, LoRA flags passed through).
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
from paperstack.contract import ContractCLI, Report, Run, positive_int, seed_int, settled_heap

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
    p.add_argument(
        "--real",
        action="store_true",
        help="the real-model arm: SmolLM2-135M-Instruct (LoRA, peft) fine-tuned on MinPath vs "
        "raw traces vs the best baseline (chosen on a validation seed) of the toy arithmetic; "
        "hours on a CPU (--quick: every part on a tiny budget)",
    )


def _configured(run: Run) -> Any:
    from minpath.demo import QUICK, DemoConfig

    config = QUICK if run.quick else DemoConfig()
    changes = {k: getattr(run.args, k) for k in ("steps", "train", "test")}
    return dataclasses.replace(config, **{k: v for k, v in changes.items() if v is not None})


def one_cuda_device(device: str) -> None:
    """Refuse, in one line, a CUDA device the demo's fine-tunes would not run on as asked.

    The core has checked that ``device`` exists. trl's trainer (transformers ``Trainer``) then
    trains on ``cuda:0`` whatever index was given, and with several visible GPUs it wraps the
    model in ``DataParallel``, which splits each batch across them: the per-device batch the
    design fixes would become a batch of that many times 8. So the demo takes ``cuda`` (or
    ``cuda:0``) with one visible GPU; ``CUDA_VISIBLE_DEVICES`` picks which one."""
    if not device.startswith("cuda"):
        return
    import torch

    from minpath.errors import MinPathError

    count = torch.cuda.device_count()
    if device not in ("cuda", "cuda:0") or count > 1:
        raise MinPathError(
            f"--device {device}: the demo trains on one GPU and {count} are visible (trl would "
            "train on cuda:0, splitting each batch across all of them); choose one with "
            "CUDA_VISIBLE_DEVICES=N and pass --device cuda"
        )


@cli.demo(arguments=_demo_arguments, seeds=5, quick_seeds=3, model=MODEL_HELP,
          devices=("cpu", "cuda"))  # fmt: skip
def demo(run: Run) -> Report:
    """MinPath against raw-trace SFT and five compression baselines (see :mod:`minpath.demo`);
    ``--real``: SmolLM2 fine-tuned on the same traces (:mod:`minpath.real`). ``--device cuda``
    trains and generates on the GPU (the cached base is built on the CPU either way)."""
    one_cuda_device(run.device)
    _threads()
    # trl's trainer imported and frozen out of the collector's walk: accelerate collects after
    # every training, 24 times in a --quick run (paperstack.contract.settled_heap)
    with settled_heap("trl.SFTTrainer"):
        if run.args.real:
            from minpath.real import run_real

            return run_real(run)
        return _toy_demo(run)


def _toy_demo(run: Run) -> Report:
    """The toy reproduction (``demo`` without ``--real``)."""
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
        "character). Each token-budget baseline is also trained (length-budget: decoded) at "
        f"token ratios {', '.join(f'{r:g}' for r in config.curve_ratios)}, its "
        "accuracy-vs-ratio curve; MinPath is claimed to beat each at "
        f"{' and '.join(f'{r:g}' for r in d.CLAIM_RATIOS)}. "
        + d.curve_summary(rows, config.curve_ratios)
        + (" Toy scale on a shared 2-core CPU. " if run.device == "cpu"
           else f" Toy scale, trained and decoded on {run.device}. ")
        + d.premise_note(claims)
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
    p.add_argument("--data", "--input", dest="data", type=Path, required=True,
                   help='JSONL of {"question", "cot", "answer"[, "edges"]} lines '
                        "(--input is the 0.2 spelling)")  # fmt: skip
    p.add_argument("--out", type=Path, required=True,
                   help="a directory for compressed.jsonl and summary.json (a path ending in "
                        ".jsonl writes that one file, as in 0.2)")  # fmt: skip


def compress_rows(records: list[Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """MinPath of each of a user's records: one output row each (the text to train on, the
    kept steps, and ``status``: ``compressed`` or ``kept: <why>``), and a summary. A record's
    error (a dependency cycle, a number beyond the limit) is one :class:`MinPathError` naming
    its file, line and field."""
    from minpath.errors import MinPathError
    from minpath.graph import compress, parse_number

    rows = []
    before = after = 0
    for r in records:
        try:
            answer = parse_number(r.answer)
        except MinPathError as exc:
            raise MinPathError(f"{r.where}: field 'answer': {exc}") from None
        try:
            c = compress(r.question, r.cot, gold_answer=answer, extra_edges=r.edges)
        except MinPathError as exc:
            field = "edges" if "cycle" in str(exc) or "edge (" in str(exc) else "cot"
            raise MinPathError(f"{r.where}: field {field!r}: {exc}") from None
        before, after = before + len(r.cot), after + len(c.text)
        status = "compressed" if c.compressed else f"kept: {c.fallback}"
        if answer is None and c.compressed:
            status += " (the answer is not a number: not checked against it)"
        rows.append({"question": r.question, "answer": r.answer, "status": status} | c.to_dict())
    done = sum(row["fallback"] is None for row in rows)
    summary = {"rows": len(rows), "compressed": done, "kept": len(rows) - done,
               "char_ratio": after / max(1, before)}  # fmt: skip
    return rows, summary


@cli.command("compress", "MinPath of your own CoTs (JSONL in, JSONL out)", _compress_arguments)
def compress_command(args: argparse.Namespace) -> int:
    from minpath.errors import MinPathError
    from minpath.traces import load_jsonl
    from paperstack.records import atomic_write

    if args.out.suffix != ".jsonl" and args.out.exists() and not args.out.is_dir():
        raise MinPathError(f"--out {args.out}: is a file, expected a directory (or a .jsonl path)")
    if args.out.suffix == ".jsonl" and args.out.is_dir():
        raise MinPathError(f"--out {args.out}: is a directory, expected a file")
    if args.out.resolve() == args.data.resolve():
        raise MinPathError(f"--out {args.out}: is the input file (it would be overwritten)")
    records = load_jsonl(args.data)
    rows, summary = compress_rows(records)
    text = "\n".join(json.dumps(row) for row in rows) + "\n"
    if args.out.suffix == ".jsonl":
        target = args.out
        atomic_write(target, text)
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        target = args.out / "compressed.jsonl"
        atomic_write(target, text)
        atomic_write(args.out / "summary.json", json.dumps(summary, indent=2) + "\n")
    done = f"{summary['compressed']} compressed, {summary['kept']} kept as they were"
    print(
        f"{target}: {summary['rows']} CoTs, {done}; {summary['char_ratio']:.2f} of the characters"
    )
    return 0


def _train_arguments(p: argparse.ArgumentParser) -> None:
    from paperstack.contract import check_model, positive_float

    flags: dict[str, dict[str, Any]] = {
        "--model": {"type": check_model, "required": True,
                    "help": "a local model folder, hub id or paperstack preset (any causal LM; "
                            "without a chat template the core's fallback template is used)"},
        "--data": {"type": Path, "required": True,
                   "help": 'JSONL of {"question", "cot", "answer"} lines'},
        "--out": {"type": Path, "required": True,
                  "help": "directory for the fine-tuned model, compressed.jsonl, train.json"},
        "--steps": {"type": positive_int, "default": 100, "help": "optimizer steps (100)"},
        "--batch-size": {"type": positive_int, "default": 4, "help": "rows per step (4)"},
        "--grad-accum": {"type": positive_int, "default": 1,
                         "help": "gradient accumulation steps (1)"},
        "--lr": {"type": positive_float, "default": 2e-5, "help": "learning rate (2e-5)"},
        "--max-length": {"type": positive_int, "default": None,
                         "help": "truncate rows to this many tokens (default: the context)"},
        "--bf16": {"action": "store_true", "help": "bf16 mixed precision"},
        "--lora-r": {"type": positive_int, "default": None,
                     "help": "train a LoRA adapter of this rank (minpath[peft]), merged on save"},
        "--lora-alpha": {"type": positive_int, "default": None, "help": "default 2 * rank"},
        "--lora-dropout": {"type": float, "default": 0.0, "help": "default 0"},
        "--lora-targets": {"default": "all-linear",
                           "help": "comma-separated module names, or all-linear (default)"},
        "--raw": {"action": "store_true",
                  "help": "train on the uncompressed CoTs (the raw-trace baseline)"},
        "--seed": {"type": seed_int, "default": 0, "help": "training seed (0)"},
        "--device": {"default": "cpu", "help": "cpu (default), cuda, cuda:N"},
    }  # fmt: skip
    for flag, options in flags.items():
        p.add_argument(flag, **options)


@cli.command("train", "fine-tune a model (trl SFT) on the MinPath traces of your JSONL",
             _train_arguments)  # fmt: skip
def train_command(args: argparse.Namespace) -> int:
    """Compress a user's CoTs, then trl SFT of ``--model`` on (question, MinPath CoT); rows that
    cannot be compressed train on their original CoT (counted in train.json)."""
    from minpath.errors import MinPathError
    from minpath.traces import load_jsonl
    from paperstack.contract import check_device

    if args.out.exists() and not args.out.is_dir():
        raise MinPathError(f"--out {args.out}: is a file, expected a directory")
    if args.out.is_dir() and not os.access(args.out, os.W_OK | os.X_OK):
        raise MinPathError(f"--out {args.out}: the folder is not writable")
    device = check_device(args.device)
    records = load_jsonl(args.data)  # a bad row is refused before the heavy imports
    rows, summary = compress_rows(records)
    _threads()
    from minpath.finetune import SFTSettings, prepare, sft
    from paperstack import tiny
    from paperstack.records import atomic_write

    pairs = [(r.question, r.cot if args.raw else row["text"])
             for r, row in zip(records, rows, strict=True)]  # fmt: skip
    peft_config = None
    if args.lora_r is not None:
        try:
            from peft import LoraConfig
        except ImportError:
            raise MinPathError("--lora-r needs peft: pip install 'minpath[peft]'") from None
        targets = args.lora_targets
        peft_config = LoraConfig(
            r=args.lora_r, lora_alpha=args.lora_alpha or 2 * args.lora_r,
            lora_dropout=args.lora_dropout, task_type="CAUSAL_LM",
            target_modules=targets if targets == "all-linear" else targets.split(","),
        )  # fmt: skip
    model, tok = tiny.load(args.model)
    model.to(device)  # type: ignore[arg-type]
    fallback = prepare(tok, str(args.model))
    settings = SFTSettings(steps=args.steps, batch_size=args.batch_size, learning_rate=args.lr,
                           seed=args.seed, device="cpu" if device == "cpu" else device,
                           logging_steps=max(1, min(10, args.steps)))  # fmt: skip
    extra: dict[str, Any] = {"gradient_accumulation_steps": args.grad_accum, "bf16": args.bf16}
    if args.max_length is not None:
        extra["max_length"] = args.max_length
    result = sft(model, tok, pairs, settings, peft_config=peft_config, **extra)
    trained = result.extra["trainer"].model
    if peft_config is not None:
        trained = trained.merge_and_unload()
    args.out.mkdir(parents=True, exist_ok=True)
    trained.save_pretrained(args.out / "model")
    tok.save_pretrained(args.out / "model")
    atomic_write(args.out / "compressed.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    report = {
        "model": str(args.model), "rows": len(pairs), "trained_on": "raw" if args.raw else
        "minpath", "compression": summary, "fallback_chat_template": fallback,
        "steps": result.steps, "losses": result.losses, "seconds": result.seconds,
        "settings": dataclasses.asdict(settings) | extra | {
            "lora": None if args.lora_r is None else {"r": args.lora_r,
            "alpha": args.lora_alpha or 2 * args.lora_r, "dropout": args.lora_dropout,
            "targets": args.lora_targets}},
    }  # fmt: skip
    atomic_write(args.out / "train.json", json.dumps(report, indent=2) + "\n")
    print(
        f"{args.out / 'model'}: {result.steps} steps on {len(pairs)} rows "
        f"({summary['compressed']} compressed by MinPath, {summary['kept']} kept), "
        f"loss {result.losses[0] if result.losses else float('nan'):.3f} -> "
        f"{result.losses[-1] if result.losses else float('nan'):.3f}, {result.seconds:.0f} s"
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
