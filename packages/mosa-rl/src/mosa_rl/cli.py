"""``mosa``: the command line of mosa-rl.

- ``mosa demo --out DIR``: GRPO on Countdown without KL, with token-level KL and with MOSA
  (reverse and forward KL), betas matched by KL to the base on a validation seed, 5 seeds;
  the premise (GRPO raises pass@1 and collapses pass@64 here) first, then MOSA's claims.
  Writes ``DIR/results.json``, ``DIR/report.md``, figures and ``DIR/runs.jsonl`` (one line per
  run; a rerun resumes from it). ``--quick`` is the one-minute smoke version.
- ``mosa train --model M --dataset FILE.jsonl --out DIR``: GRPO with MOSA (``--kl mosa``),
  token-level KL (``--kl token``) or none on a user's own prompts with a verifiable answer
  (:mod:`mosa_rl.train`); saves a model ``from_pretrained`` loads.
- ``mosa bench --out DIR``: per-step time and saved-activation memory of MOSA against token-KL
  GRPO in one run, and the profile term's cost against K, as medians of interleaved per-round
  ratios with output checks, in ``DIR/bench.json`` (:mod:`mosa_rl.bench`).

The common flags and flow come from :class:`paperstack.contract.ContractCLI`. Heavy imports
stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from mosa_rl import __version__
from mosa_rl.errors import MosaError
from paperstack.bench import add_repeats_argument
from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    non_negative_float,
    positive_float,
    positive_int,
    settled_heap,
)

cli = ContractCLI("mosa", "mosa-rl", __version__, __doc__)

#: Seeds of `demo --real` unless `--seeds` names them: each run trains a 135M model, so three
#: (the evidence rules' minimum) rather than the toy demo's five.
REAL_SEEDS = 3


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help='JSONL of held-out Countdown problems, one {"numbers": [...], "target": N} a line',
    )
    p.add_argument("--steps", type=positive_int, default=None, help="GRPO steps per run")
    p.add_argument(
        "--token-kl-beta",
        type=positive_float,
        default=None,
        help="token-level KL beta (default: matched KL on the validation seed)",
    )
    p.add_argument(
        "--mosa-beta",
        type=positive_float,
        default=None,
        help="MOSA weight beta_M, reverse KL (default: matched KL on the validation seed)",
    )
    p.add_argument(
        "--mosa-forward-beta",
        type=positive_float,
        default=None,
        help="MOSA weight beta_M, forward KL (default: matched KL on the validation seed)",
    )
    p.add_argument(
        "--top-k", type=positive_int, default=None, help="MOSA ranks K (plus a tail bucket)"
    )
    p.add_argument(
        "--workers", type=positive_int, default=None, help="parallel runs (default: cores)"
    )
    p.add_argument(
        "--restart", action="store_true", help="ignore DIR/runs.jsonl instead of resuming from it"
    )
    p.add_argument(
        "--real",
        action="store_true",
        help="the real-model arm: SmolLM2-135M-Instruct (or --model) with LoRA on Countdown, "
        "base / no-KL GRPO / token-KL / MOSA, 3 seeds (a GPU or a free multi-core CPU)",
    )
    p.add_argument("--bf16", action="store_true", help="bf16 mixed precision in trl (GPU)")


@cli.demo(
    arguments=_demo_arguments,
    seeds=5,  # the toy demo's 0-4; `--real` runs 3 seeds (0-2) unless --seeds says otherwise
    quick_seeds=1,
    model="base model id, path or preset instead of the tiny SFT model (without a chat "
    "template, the core's fallback transcript format)",
    devices=("cpu", "cuda"),
)
def demo(run: Run) -> Report:
    """The reproduction (see :mod:`mosa_rl.demo`)."""
    # trl's trainer imported and frozen out of the collector's walk: accelerate collects after
    # every training (paperstack.contract.settled_heap)
    with settled_heap("trl.GRPOTrainer"):
        return _demo(run)


def _demo(run: Run) -> Report:
    from mosa_rl import demo as demo_module
    from mosa_rl.demo import NOKL, run_demo

    args = run.args
    if args.real:
        # --quick --real: the real arm's pipeline on a budget of seconds (its numbers mean
        # nothing); the tests shrink it further the same way.
        config = demo_module.REAL_QUICK if run.quick else demo_module.REAL
    else:
        config = demo_module.QUICK if run.quick else demo_module.FULL
    changes: dict[str, object] = {}
    if args.bf16:
        changes["bf16"] = True
    if args.steps is not None:
        changes["grpo_steps"] = args.steps
    if args.top_k is not None:
        changes["mosa_top_k"] = args.top_k
    for flag in ("token_kl_beta", "mosa_beta", "mosa_forward_beta"):
        if getattr(args, flag) is not None:
            changes[flag] = getattr(args, flag)
    config = dataclasses.replace(config, **changes)  # type: ignore[arg-type]
    if args.dataset is not None and args.dataset.is_dir():
        raise MosaError(f"--dataset {args.dataset}: is a directory; name a JSONL file")
    if args.dataset is not None and not args.dataset.exists():
        raise MosaError(f"--dataset {args.dataset}: no such file")
    workers = args.workers if args.workers is not None else (1 if run.quick else None)
    seeds = run.seeds
    if args.real and not run.quick and args.seeds is None:
        seeds = tuple(run.seed + i for i in range(REAL_SEEDS))
    out = run_demo(
        config,
        run.out,
        seeds,
        model=run.model,
        dataset=args.dataset,
        device=run.device,
        workers=workers,
        progress=run.progress if run.show_progress else None,
        log=run.log,
        restart=args.restart,
    )
    premise = [c for c in out.claims if c.id.startswith("premise_")]
    absent = [c.id for c in premise if c.verdict != "held"]
    kmax = max(k for k in config.ks if k <= config.eval_samples)
    base = (
        f"{config.model or run.model} with LoRA (r = {config.lora_r}), "
        f"{config.prompt_style} prompts"
        if config.lora
        else f"{run.model}"
        if run.model
        else f"a diverse SFT base ({config.preset} preset)"
    )
    intro = (
        f"GRPO on Countdown from {base}: "
        f"{config.grpo_steps} steps x {config.prompts_per_step} prompts x "
        f"{config.num_generations} samples per system and seed, learning rate "
        f"{config.learning_rate:g}, K = {config.mosa_top_k}; seeds "
        f"{', '.join(map(str, seeds))}; every model sampled {config.eval_samples} times "
        f"per problem at temperature {config.temperature:g} on the same held-out problems. "
        f"Rows carry per-seed values (claims: paired Student-t over seeds); the "
        f"`*-by-problem` rows average seeds per problem. Betas: "
        + ", ".join(f"{k} {v:g}" for k, v in out.choice.get("betas", {}).items())
        + (
            f", matched on validation seed {config.validation_seed} to "
            f"{config.kl_fraction:g}x the no-KL run's token KL to the base "
            f"({out.choice['nokl_kl']:.4g} nats; target {out.choice['target_kl']:.4g}); "
            "the grid is in the `validation` rows, never a result."
            if "target_kl" in out.choice
            else " (fixed, no validation grid)."
        )
        + f" Wall time {out.seconds:.0f} s on {run.device}."
    )
    if absent:
        intro += (
            f"\n\n**The premise did not hold** ({', '.join(absent)}): on this run GRPO without "
            f"KL did not both raise pass@1 and lower pass@{kmax} against the base over the "
            "seeds, so there is no collapse for a regulariser to prevent and MOSA's claims "
            "below cannot show the paper's effect, whatever their verdicts."
        )
    if run.quick:
        what = "the real arm's pipeline" if args.real else "micro model"
        intro += f"\n\nQuick mode: {what}, two steps, one seed: the numbers mean nothing."
    config_out = dataclasses.asdict(config)
    config_out.update(choice=out.choice, control=NOKL, seeds=list(seeds))
    return Report(
        out.rows,
        out.claims,
        title=f"mosa-rl {__version__}: demo",
        intro=intro,
        figures=out.figures,
        config=config_out,
    )


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=positive_int, default=4, help="GRPO steps per timed call")
    add_repeats_argument(p, default=9, quick=6)
    p.add_argument(
        "--budget-s", type=positive_float, default=None, metavar="S",
        help="stop each comparison's timed rounds after the round that crosses S seconds "
        "(never before 6 rounds; default 300 on the full CPU bench, none otherwise)",
    )  # fmt: skip
    p.add_argument(
        "--shape",
        default=None,
        help="model for the step timing: a tiny preset (default tiny; micro with --quick) or "
        "qwen2.5-0.5b (random weights, bf16, 151,936-token vocabulary: for a GPU)",
    )


@cli.bench(arguments=_bench_arguments, devices=("cpu", "cuda"))
def bench(run: Run) -> Report:
    """MOSA against token-KL GRPO: step time, saved activations, the profile term vs K."""
    from mosa_rl.bench import run_bench

    rows, claims, summary, config = run_bench(
        seed=run.seed, steps=run.args.steps, device=run.device, quick=run.quick,
        shape=run.args.shape, repeats=run.args.repeats, budget_s=run.args.budget_s,
    )  # fmt: skip
    intro = (
        "MOSA against token-KL GRPO: each system warmed up, then timed interleaved (shuffled "
        f"order) in {config['timing']['step']['repeats']} rounds (steps) and "
        f"{config['timing']['head']['repeats']} (heads) of at most {config['repeats']}"
        + (f", each comparison stopped after the round crossing {config['budget_s']:g} s"
           if config["budget_s"] else "")
        + "; ratios are medians of per-round ratios with "
        "order-statistic 95% intervals. Output checks in the same run: equal optimiser steps "
        "and finite losses for the training steps; for the head, the log-probabilities "
        "bit-identical to the baseline's and the profile equal to its unfused definition "
        f"within {config['profile_tolerance']:g}."
        + (f" CPU, {config['threads']} torch thread, on a shared 2-core machine loaded by "
           "other jobs." if run.device == "cpu" else "")
    )  # fmt: skip
    return Report(rows, claims, summary=summary, config=config, intro=intro,
                  title=f"mosa-rl {__version__}: bench")  # fmt: skip


def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="model id, path or preset (smollm2-135m-instruct)"
    )
    p.add_argument(
        "--dataset",
        type=Path,
        required=True,
        help='JSONL, one {"numbers": [...], "target": N} or {"prompt": ..., "answer": ...} a line',
    )
    p.add_argument("--out", type=Path, required=True, help="folder for the trained model")
    p.add_argument(
        "--kl", choices=("none", "token", "mosa"), default="mosa",
        help="regulariser: none (plain GRPO), token (trl's k3 token KL), mosa (profile KL)",
    )  # fmt: skip
    p.add_argument(
        "--beta", type=non_negative_float, default=None,
        help="weight of the regulariser (default 0.04 for token, 0.1 for mosa)",
    )  # fmt: skip
    p.add_argument("--top-k", type=positive_int, default=None, help="MOSA ranks K (default 16)")
    p.add_argument("--steps", type=positive_int, default=100, help="optimiser steps")
    p.add_argument("--learning-rate", type=positive_float, default=None,
                   help="default 1e-5, or 1e-4 with --lora")  # fmt: skip
    p.add_argument(
        "--prompts-per-step", type=positive_int, default=2,
        help="prompts per device batch (each sampled --num-generations times)",
    )  # fmt: skip
    p.add_argument("--num-generations", type=positive_int, default=8, help="samples per prompt")
    p.add_argument("--max-completion-length", type=positive_int, default=128)
    p.add_argument("--temperature", type=positive_float, default=1.0)
    p.add_argument(
        "--grad-accum", type=positive_int, default=1,
        help="gradient accumulation steps (trl's gradient_accumulation_steps)",
    )  # fmt: skip
    p.add_argument("--bf16", action="store_true", help="bf16 mixed precision (trl's bf16)")
    p.add_argument(
        "--lora", action="store_true", help="train a LoRA adapter (peft), merged at save"
    )
    p.add_argument("--lora-r", type=positive_int, default=16)
    p.add_argument("--lora-alpha", type=positive_int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")


@cli.command("train", "GRPO with MOSA, token KL or none on your own model and prompts",
             _train_arguments)  # fmt: skip
def train_command(args: argparse.Namespace) -> int:
    """Check every input before loading anything, then train and save (see :mod:`mosa_rl.train`)."""
    from mosa_rl.demo import _quiet_warnings
    from mosa_rl.train import TrainOptions, load_dataset, train
    from paperstack.contract import check_device, check_model
    from paperstack.progress import quiet_libraries
    from paperstack.records import output_dir

    quiet_libraries()
    _quiet_warnings()
    model = check_model(args.model)
    device = check_device(args.device)
    prompts = load_dataset(args.dataset)
    options = TrainOptions(
        kl=args.kl, beta=args.beta, top_k=args.top_k, steps=args.steps,
        learning_rate=args.learning_rate, prompts_per_step=args.prompts_per_step,
        num_generations=args.num_generations, max_completion_length=args.max_completion_length,
        temperature=args.temperature, grad_accum=args.grad_accum, bf16=args.bf16,
        lora=args.lora, lora_r=args.lora_r, lora_alpha=args.lora_alpha, seed=args.seed,
        device=device,
    )  # fmt: skip
    with output_dir(args.out) as out:
        train(str(model), prompts, out, options)
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
