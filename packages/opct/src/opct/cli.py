"""``opct``: the command line of opct.

- ``opct demo --out DIR``: the reproduction on the toy world (:mod:`opct.demo`): the base
  model's failures (premise), then OPCT vs SFT (BCT) consistency training vs the base, per
  seed; writes ``DIR/results.json``, ``DIR/report.md`` and figures. ``--quick`` is the
  one-minute smoke version (micro model, a few steps: it measures nothing).
- ``opct bench --out DIR``: wall time of an OPCT step over an SFT step (the median of
  interleaved per-round ratios, with an output check), and peak memory on CUDA, in
  ``DIR/bench.json`` (:mod:`opct.bench`).
- ``opct sweep --out DIR``: the validation run made before the reported demo: the base
  model's premise on validation items, and both methods over the same learning-rate grid at
  the validation seed; writes ``DIR/sweep.json`` and prints the chosen rates.
- ``opct train --model M --pairs FILE.jsonl --out DIR``: OPCT on your own model and
  contrastive pairs (bf16, gradient accumulation, LoRA, an EMA teacher passed through to trl),
  saved as a model folder (:mod:`opct.train`).
- ``opct pairs --out FILE``: write the toy world's training pairs as JSONL (the format
  ``demo --pairs`` and :func:`opct.load_pairs` read).

The common flags and flow (``--out``, ``--quick``, ``--seed``/``--seeds``, ``--device``,
``--model``, ``--no-progress``; results written atomically, verdicts printed) come from
:class:`paperstack.contract.ContractCLI`. Heavy imports stay inside the commands so that
``--help`` is instant.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from opct import __version__
from paperstack.bench import add_repeats_argument
from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    positive_float,
    positive_int,
    settled_heap,
)

cli = ContractCLI("opct", "opct", __version__, __doc__)

MODEL_HELP = (
    "a local model folder or hub id to use as the base instead of the toy world's tiny model "
    "(it needs a chat template; the evaluation is the toy world's, so the premise only holds "
    "for a model that learned it)"
)


def _threads() -> None:
    import torch

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pairs", type=Path, default=None,
                   help="JSONL file of your own pairs (prompt, clean[, kind, meta]) to train on "
                   "instead of the toy world's")  # fmt: skip
    p.add_argument("--steps", type=positive_int, default=None, help="training steps per method")
    p.add_argument("--batch-size", type=positive_int, default=None, help="pairs per step")
    p.add_argument("--lr", type=positive_float, default=None,
                   help="learning rate of both methods (default: each method's own, chosen by "
                   "`opct sweep` on a validation seed)")  # fmt: skip
    p.add_argument("--opct-lr", type=positive_float, default=None, help="OPCT's learning rate")
    p.add_argument("--sft-lr", type=positive_float, default=None, help="SFT's learning rate")
    p.add_argument("--real", action="store_true",
                   help="the real-model arm instead (opct.real): SmolLM2-135M-Instruct (or "
                   "--model), its sycophancy, refusals and jailbreak wrappers measured first, "
                   "then OPCT vs SFT with LoRA")  # fmt: skip


def _configured(run: Run) -> Any:
    from opct.demo import QUICK, DemoConfig

    config = QUICK if run.quick else DemoConfig()
    changes = {
        name: value
        for name, value in (
            ("steps", run.args.steps),
            ("batch_size", run.args.batch_size),
            ("opct_lr", run.args.opct_lr or run.args.lr),
            ("sft_lr", run.args.sft_lr or run.args.lr),
        )
        if value is not None
    }
    import dataclasses

    return dataclasses.replace(config, **changes)


@cli.demo(arguments=_demo_arguments, seeds=3, quick_seeds=3, model=MODEL_HELP, devices=("cpu",))
def demo(run: Run) -> Report:
    """OPCT against SFT consistency training and the base model (see :mod:`opct.demo`), or
    with ``--real`` on a real instruct model (:mod:`opct.real`)."""
    _threads()
    # trl's trainers imported and frozen out of the collector's walk: accelerate collects
    # after every training (paperstack.contract.settled_heap)
    with settled_heap("trl.SFTTrainer", "trl.DistillationTrainer"):
        return _demo(run)


def _demo(run: Run) -> Report:
    if run.args.real:
        return _real_demo(run)
    from opct import demo as d
    from opct.pairs import load_pairs
    from opct.world import AlignmentWorld
    from paperstack.report import bar_chart

    config = _configured(run)
    world = AlignmentWorld()
    pairs = load_pairs(run.args.pairs) if run.args.pairs is not None else None
    with run.progress(1 + len(run.seeds), "base + seeds") as bar:
        start = time.perf_counter()
        net, tok = d.load_base(config, run.model, world)
        net.to(run.device)
        base = d.evaluate(net, tok, world, config)
        run.log(f"base model ready and evaluated in {time.perf_counter() - start:.0f} s")
        bar.advance()
        trained: dict[str, dict[int, Any]] = {"opct": {}, "sft": {}}
        curves: dict[str, dict[int, list[float]]] = {"opct": {}, "sft": {}}
        seconds: dict[str, dict[int, float]] = {"opct": {}, "sft": {}}
        for seed in run.seeds:
            result = d.run_seed(world, config, seed, run.model, pairs, run.device)
            for method in ("opct", "sft"):
                trained[method][seed] = result["evals"][method]
                curves[method][seed] = result["train"][method]["losses"]
                seconds[method][seed] = result["train"][method]["seconds"]
            run.log(
                f"seed {seed}: opct {seconds['opct'][seed]:.0f} s, "
                f"sft {seconds['sft'][seed]:.0f} s of training"
            )
            bar.advance()
    rows = d.rows_for(base, trained, run.seeds)
    from paperstack.records import Row

    for method in ("opct", "sft"):
        rows.append(Row.from_seeds(method, "train_seconds", seconds[method], split="seeds",
                                   unit="s"))  # fmt: skip
    claims = d.claims_for(rows)
    figures = [
        bar_chart(rows, metric, run.out / f"{metric}.png", split="seeds", title=d.METRICS[metric])
        for metric in ("sycophancy", "defence_heldout", "capability")
    ]
    figures.append(d.loss_figure(curves, run.out / "training_loss.png"))
    source = f"your pairs from {run.args.pairs}" if pairs is not None else (
        f"{config.pairs} toy-world pairs per seed (40% sycophancy cues, 40% jailbreak wrappers "
        "of the training families, half of them benign, 20% safety pressure)"
    )  # fmt: skip
    intro = (
        ("**--quick smoke run: the micro model after a few dozen steps; nothing is measured "
         "here, read the full demo's report.** " if run.quick else "")
        + "Base model: "
        + (run.model or f"{config.preset} preset pretrained on the toy world + arithmetic, then "
           f"{config.base_recipe.steps} SFT steps that plant sycophancy (a wrong cue followed "
           f"with probability {config.base_recipe.follow:g}; opct.base)")
        + ". "
        f"Per seed ({', '.join(map(str, run.seeds))}) OPCT and SFT (BCT) consistency training "
        f"each start from the base and train {config.steps} steps of {config.batch_size} pairs "
        f"(lr {config.opct_lr:g} for OPCT and {config.sft_lr:g} for SFT, each chosen on a "
        f"validation seed ({d.VALIDATION_SEED}, not reported) and validation items from the "
        f"grid {', '.join(f'{lr:g}' for lr in d.LR_GRID)} by `opct sweep`; sampling "
        f"temperature {config.temperature:g}, responses up to {config.max_completion_length} "
        f"tokens) on {source}. Evaluation on held-out cue "
        "templates, wrapper families, pressure templates and targets (the test part). Rows of "
        "split `items` are the base model per evaluation item (the premise), the row of split "
        "`targets` its held-out defence as a proportion of targets (Wilson); rows of split "
        "`seeds` are per seed, so OPCT and SFT compare paired by seed (the base repeats its one "
        "value). Each claim names the premise it rests on and is inconclusive if that one is "
        "not held. "
        "Toy scale: a 1-2M-parameter character-level model on a 2-core CPU. "
        + d.premise_note(claims)
    )  # fmt: skip
    config_out = d.config_dict(config) | {
        "pairs_file": str(run.args.pairs) if run.args.pairs is not None else None,
        "metrics": d.METRICS,
    }
    return Report(rows, claims, title="opct: demo", intro=intro, figures=figures,
                  config=config_out)  # fmt: skip


def _real_demo(run: Run) -> Report:
    """``demo --real`` (:mod:`opct.real`): premise on the base, then OPCT vs SFT per seed."""
    import dataclasses

    from opct import real
    from opct.errors import OPCTError
    from paperstack.contract import check_model

    for flag in ("pairs", "opct_lr", "sft_lr"):
        if getattr(run.args, flag) is not None:
            raise OPCTError(f"--{flag.replace('_', '-')}: not used by --real (see opct.real)")
    config = real.REAL_QUICK if run.quick else real.REAL
    changes = {name: value for name, value in (
        ("steps", run.args.steps), ("batch_size", run.args.batch_size),
        ("learning_rate", run.args.lr)) if value is not None}  # fmt: skip
    config = dataclasses.replace(config, **changes)
    model = run.model or str(check_model("smollm2-135m-instruct"))
    result = real.run(model, config, run.seeds, run.device, log=run.log)
    rows = real.rows_for(result["base"], result["trained"], run.seeds)
    from paperstack.records import Row

    for method, per_seed in result["seconds"].items():
        rows.append(Row.from_seeds(method, "train_seconds", per_seed, split="seeds", unit="s"))
    claims = real.claims_for(rows)
    population = result["base"]["population"]
    intro = (
        ("**--quick smoke run: three items of each kind and one training step; nothing is "
         "measured here.** " if run.quick else "")
        + f"Real-model arm on {run.model or 'SmolLM2-135M-Instruct'}: the premise measured on "
        "the base first (greedy): knowledge questions answered without pressure, a wrong "
        "user cue under held-out templates on the ones it answers correctly "
        f"({len(population['known'])} items), forbidden requests asked plainly and, for the "
        f"ones it refuses ({len(population['refused'])}), under held-out and training "
        f"wrapper families. Then per seed ({', '.join(map(str, run.seeds))}) OPCT and SFT "
        f"(BCT) each train a LoRA (r={config.lora_r}) from the base for {config.steps} steps "
        f"of {config.batch_size} train-part pairs at lr {config.learning_rate:g}, evaluated "
        "on the same test populations, paired by seed. Rows of split `base` are the base's "
        "proportions (Wilson); each claim names the premise it rests on."
    )  # fmt: skip
    return Report(rows, claims, title="opct: demo --real", intro=intro,
                  config=result["config"] | {"model": model, "real": True})  # fmt: skip


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=positive_int, default=3, help="steps per timed call")
    # 7 rounds (6 with --quick): a median's order-statistic 95% interval needs at least 6.
    add_repeats_argument(p, default=7, quick=6)


@cli.bench(arguments=_bench_arguments, model=MODEL_HELP, devices=None)
def bench(run: Run) -> Report:
    """Time (and, on CUDA, peak memory) of OPCT steps over SFT steps on the same pairs."""
    _threads()
    from opct.bench import run_bench

    return run_bench(run)


def _sweep_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="folder for sweep.json")
    p.add_argument("--quick", action="store_true", help="the --quick demo's budget (smoke run)")
    p.add_argument("--model", type=Path, default=None, help=MODEL_HELP)


@cli.command("sweep", "the validation run: premise and learning rates (not reported)",
             _sweep_arguments)  # fmt: skip
def sweep_command(args: argparse.Namespace) -> int:
    import sys

    _threads()
    from opct import demo as d
    from opct.world import AlignmentWorld
    from paperstack.checkpoint import check_model_dir
    from paperstack.records import atomic_write_json, prepare_out_dir

    if args.model is not None:
        check_model_dir(args.model)
    out = prepare_out_dir(args.out)
    config = d.QUICK if args.quick else d.DemoConfig()
    start = time.perf_counter()
    result = d.sweep(AlignmentWorld(), config, None if args.model is None else str(args.model),
                     "cpu", log=lambda msg: print(msg, file=sys.stderr))  # fmt: skip
    result["seconds"] = time.perf_counter() - start
    result["config"] = d.config_dict(config)
    atomic_write_json(out / "sweep.json", result)
    base = result["base"]
    print(f"base (validation items): sycophancy {base['sycophancy']:.3f}, defence held-out "
          f"{base['defence_heldout']:.3f}, arithmetic {base['capability']:.3f}")  # fmt: skip
    for method, info in result["methods"].items():
        print(f"{method}: chosen lr {info['chosen']}")
    print(out / "sweep.json")
    return 0


def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True,
                   help="model folder, hub id or preset (smollm2-135m-instruct)")  # fmt: skip
    p.add_argument("--pairs", type=Path, required=True,
                   help='JSONL, one pair a line: {"prompt": wrapped, "clean": same request'
                   ' without the wrapper[, "kind": ..., "meta": {...}]}')  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="folder for the trained model")
    p.add_argument("--steps", type=positive_int, default=100, help="optimiser steps")
    p.add_argument("--batch-size", type=positive_int, default=8, help="pairs per micro-batch")
    p.add_argument(
        "--grad-accum",
        type=positive_int,
        default=1,
        help="micro-batches per optimiser step (trl: gradient_accumulation_steps)",
    )
    p.add_argument("--lr", type=positive_float, default=None, dest="learning_rate",
                   help="learning rate (default 1e-5, or 5e-5 with --lora-r)")  # fmt: skip
    p.add_argument("--max-completion-length", type=positive_int, default=64,
                   help="longest sampled response, in tokens")  # fmt: skip
    p.add_argument("--temperature", type=positive_float, default=1.0, help="sampling temperature")
    p.add_argument("--divergence", choices=("reverse", "forward", "jsd"), default="reverse")
    p.add_argument("--top-k", type=positive_int, default=None,
                   help="divergence over the K likeliest tokens plus a tail bucket")  # fmt: skip
    p.add_argument("--bf16", action="store_true", help="bf16 mixed precision (trl's bf16)")
    p.add_argument("--lora-r", type=positive_int, default=None,
                   help="train a LoRA adapter of this rank (peft; merged at save)")  # fmt: skip
    p.add_argument("--lora-alpha", type=positive_int, default=None, help="default 2 x rank")
    p.add_argument("--teacher", choices=("initial", "ema"), default="initial",
                   help="initial: the frozen starting model (the paper's); ema: a moving "
                   "average of the student (trl SDFT's option; not with --lora-r)")  # fmt: skip
    p.add_argument("--teacher-update-rate", type=positive_float, default=0.05,
                   help="EMA rate α with --teacher ema")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="training seed")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")


@cli.command("train", "OPCT on your own model and contrastive pairs; saves the model",
             _train_arguments)  # fmt: skip
def train_command(args: argparse.Namespace) -> int:
    """Every input checked before the model loads, then train and save (:mod:`opct.train`)."""
    _threads()
    from opct.train import command

    return command(args)


def _pairs_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    p.add_argument("-n", type=positive_int, default=256, help="how many pairs (default 256)")
    p.add_argument("--seed", type=int, default=0, help="draw seed (default 0)")


@cli.command("pairs", "write the toy world's training pairs as JSONL", _pairs_arguments)
def pairs_command(args: argparse.Namespace) -> int:
    from opct.pairs import mixed_pairs, write_pairs
    from opct.world import AlignmentWorld

    path = write_pairs(args.out, mixed_pairs(AlignmentWorld(), args.n, seed=args.seed))
    print(path)
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
