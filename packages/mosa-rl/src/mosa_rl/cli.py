"""``mosa``: the command line of mosa-rl.

- ``mosa demo --out DIR``: GRPO on Countdown without KL, with token-level KL and with MOSA
  (reverse and forward KL), betas matched by KL to the base on a validation seed, 5 seeds;
  the premise (GRPO raises pass@1 and collapses pass@64 here) first, then MOSA's claims.
  Writes ``DIR/results.json``, ``DIR/report.md``, figures and ``DIR/runs.jsonl`` (one line per
  run; a rerun resumes from it). ``--quick`` is the one-minute smoke version.
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
from paperstack.contract import ContractCLI, Report, Run, positive_float, positive_int

cli = ContractCLI("mosa", "mosa-rl", __version__, __doc__)


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


@cli.demo(
    arguments=_demo_arguments,
    seeds=5,
    quick_seeds=1,
    model="base model id or path instead of the tiny SFT model (it needs a chat template)",
    devices=("cpu", "cuda"),
)
def demo(run: Run) -> Report:
    """The reproduction (see :mod:`mosa_rl.demo`)."""
    from mosa_rl.demo import FULL, NOKL, QUICK, run_demo

    args = run.args
    config = QUICK if run.quick else FULL
    changes: dict[str, object] = {}
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
    out = run_demo(
        config,
        run.out,
        run.seeds,
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
    intro = (
        f"GRPO on Countdown from a diverse SFT base ({config.preset} preset): "
        f"{config.grpo_steps} steps x {config.prompts_per_step} prompts x "
        f"{config.num_generations} samples per system and seed, learning rate "
        f"{config.learning_rate:g}, K = {config.mosa_top_k}; seeds "
        f"{', '.join(map(str, run.seeds))}; every model sampled {config.eval_samples} times "
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
        intro += "\n\nQuick mode: micro model, two steps, one seed: the numbers mean nothing."
    config_out = dataclasses.asdict(config)
    config_out.update(choice=out.choice, control=NOKL)
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
        shape=run.args.shape, repeats=run.args.repeats,
    )  # fmt: skip
    intro = (
        "MOSA against token-KL GRPO: each system warmed up, then timed interleaved (shuffled "
        f"order) in {config['repeats']} rounds; ratios are medians of per-round ratios with "
        "order-statistic 95% intervals. Output checks in the same run: equal optimiser steps "
        "and finite losses for the training steps; for the head, the log-probabilities "
        "bit-identical to the baseline's and the profile equal to its unfused definition "
        f"within {config['profile_tolerance']:g}."
        + (f" CPU, {config['threads']} torch thread, on a shared 2-core machine loaded by "
           "other jobs." if run.device == "cpu" else "")
    )  # fmt: skip
    return Report(rows, claims, summary=summary, config=config, intro=intro,
                  title=f"mosa-rl {__version__}: bench")  # fmt: skip


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
