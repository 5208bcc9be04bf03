"""``meta-pref``: the command line of meta-pref.

- ``meta-pref demo --out DIR``: the reproduction on the synthetic multilingual world
  (:mod:`meta_pref.demo`): six source languages, a near and a far held-out target, 25/100/1000
  target pairs, meta-learned vs joint vs target-only vs zero-shot initialisations of a reward
  model and a DPO policy, adapted with trl; writes ``DIR/results.json``, ``DIR/report.md`` and
  figures. ``--quick`` is the one-minute smoke version (a few steps: it measures nothing).
  ``--pairs FILE --target CODE``: the reward-model half on your own multilingual JSONL.
- ``meta-pref bench --out DIR``: wall time of one meta (FOMAML) outer step over one joint step
  of the same batch size (a ratio paired per repeat), in ``DIR/bench.json``.
- ``meta-pref tune --out DIR``: the meta-learned and the joint initialisation tuned the same
  way (a 3 x 3 grid each, the same budget, score and edge rule) on the validation language and
  validation seeds 98 and 99 (:func:`meta_pref.tune.tune_grids`).
- ``meta-pref headroom --out DIR``: the premise measured on validation seeds: target-only
  reward accuracy by epoch at 25/100/1000 pairs, and what each candidate adaptation budget
  rule would keep (how the demo's budget rule was chosen).
- ``meta-pref pairs --out FILE``: the world's pairs of some languages as JSONL.
- ``meta-pref train --model M --pairs FILE --target CODE --out DIR``: the method on your own
  model (any causal LM folder, hub id or ``smollm2-135m-instruct``) and pairs: meta- (or joint)
  training of a reward model or DPO policy on the source languages, adaptation on the target's
  pairs with trl, the held-out score before and after; saves the model (:mod:`meta_pref.train`).

The common flags and flow come from :class:`paperstack.contract.ContractCLI`. Heavy imports
stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import functools
import os
import warnings
from pathlib import Path
from typing import Any

from meta_pref import __version__
from paperstack.bench import add_repeats_argument, repeats_for
from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    fraction,
    parse_seeds,
    positive_float,
    positive_int,
    positive_int_list,
    seed_int,
    settled_heap,
)

cli = ContractCLI("meta-pref", "meta-pref", __version__, __doc__)


def _threads() -> None:
    import torch
    import transformers

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    os.environ.setdefault("TQDM_DISABLE", "1")
    # No per-load / per-map progress bars from a user's checkpoint or trl's dataset maps.
    transformers.utils.logging.disable_progress_bar()
    import datasets

    datasets.disable_progress_bars()
    # transformers 5 renames gradient checkpointing; trl 1.16 still uses the old names.
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pairs", type=Path, default=None,
                   help="multilingual preference JSONL (lang, prompt, chosen, rejected) to run "
                   "the reward-model half on instead of the toy world")  # fmt: skip
    p.add_argument(
        "--target",
        default=None,
        help="target language code (with --pairs: required; the rest are sources)",
    )
    p.add_argument("--sources", default=None,
                   help="comma-separated source language codes (with --pairs; default: all "
                   "but the target)")  # fmt: skip
    p.add_argument(
        "--sizes",
        type=positive_int_list,
        default=None,
        help="target-pair budgets (default 25,100,1000)",
    )
    p.add_argument(
        "--algorithm",
        choices=("fomaml", "reptile"),
        default=None,
        help="meta-learning algorithm (default fomaml)",
    )
    p.add_argument("--real", action="store_true",
                   help="the real-model arm: SmolLM2-135M-Instruct as the base of the reward "
                   "model and the policy, 100 near-target pairs, 5 seeds (hours on a CPU; "
                   "--quick: a smoke run of every part)")  # fmt: skip


def d_real(quick: bool) -> Any:
    from meta_pref.demo import REAL, REAL_QUICK

    return REAL_QUICK if quick else REAL


def _configured(run: Run) -> Any:
    import dataclasses

    from meta_pref.demo import FULL, QUICK

    config = d_real(run.quick) if run.args.real else QUICK if run.quick else FULL
    if run.args.sizes is not None:
        sizes = tuple(sorted(set(run.args.sizes)))
        dpo_sizes = tuple(n for n in sizes if n == 100) or (min(sizes),)
        config = dataclasses.replace(config, sizes=sizes, dpo_sizes=dpo_sizes)
    if run.args.algorithm is not None:
        config = dataclasses.replace(
            config,
            meta=dataclasses.replace(config.meta, algorithm=run.args.algorithm),
            dpo_meta=dataclasses.replace(config.dpo_meta, algorithm=run.args.algorithm),
        )
    return config


# 5 seeds (0-4; was 3 until 2026-12-06): the head-to-head claims are judged over training seeds,
# and 3 seeds' t interval (t.975 = 4.30) cannot settle them. One count for the toy and --real.
@cli.demo(arguments=_demo_arguments, seeds=5, quick_seeds=2, model=None, devices=("cpu",))
def demo(run: Run) -> Report:
    """Meta-learned vs joint vs target-only vs zero-shot inits (see :mod:`meta_pref.demo`)."""
    _threads()
    # trl's trainers imported and frozen out of the collector's walk: accelerate collects after
    # every training, 44 times in a --quick run (paperstack.contract.settled_heap)
    with settled_heap("trl.RewardTrainer", "trl.DPOTrainer"):
        return _demo(run)


def _demo(run: Run) -> Report:
    from meta_pref import demo as d
    from meta_pref.errors import MetaPrefError
    from meta_pref.world import default_world

    config = _configured(run)
    if run.args.pairs is not None:
        from meta_pref import userdata

        return userdata.demo(run, config)
    if run.args.sources is not None:
        raise MetaPrefError("--sources needs --pairs (the toy world's sources are fixed)")
    world = default_world()
    if run.args.real and (run.args.target is not None or run.args.sizes is not None):
        raise MetaPrefError("--real runs its declared design: no --target or --sizes")
    if run.args.target is not None:
        world.check_codes([run.args.target])
        config = dataclasses_replace_targets(config, run.args.target)
    per_seed: dict[int, Any] = {}
    with run.progress(d.progress_total(config, len(run.seeds)), "seeds x budgets") as bar:

        def one(seed: int) -> Any:
            return d.run_seed(world, config, seed, log=run.log, advance=bar.advance)

        for seed in run.seeds:
            # A seed's values depend on the seed and the flags only (tested): kept as a
            # resumable part, so a killed run resumes at the next seed and processes can
            # split --seeds over one --parts folder.
            per_seed[seed] = run.resumable(f"seed-{seed}", functools.partial(one, seed))
    rows = d.rows_for(per_seed)
    if run.args.real:
        claims = d.real_claims_for(rows, config)
        intro = d.real_intro(config, run.seeds, run.quick, claims)
        return Report(rows, claims, title="meta-pref: demo --real (SmolLM2)", intro=intro,
                      config=d.config_dict(config))  # fmt: skip
    claims = d.claims_for(rows, config) if run.args.target is None else []
    figures = d.figures(rows, config, run.out)
    intro = d.intro(config, run.seeds, run.quick, claims)
    return Report(rows, claims, title="meta-pref: demo", intro=intro, figures=figures,
                  config=d.config_dict(config))  # fmt: skip


def dataclasses_replace_targets(config: Any, target: str) -> Any:
    import dataclasses

    return dataclasses.replace(config, targets=(target,), dpo_targets=(target,), reduced_targets=())


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    add_repeats_argument(p, default=9, quick=6)
    p.add_argument("--steps", type=positive_int, default=5, help="steps per timed run")


@cli.bench(arguments=_bench_arguments, model=None, devices=("cpu",))
def bench(run: Run) -> Report:
    """Wall time of a meta (FOMAML and Reptile) outer step over a joint step, interleaved."""
    _threads()
    import torch

    from meta_pref.bench import bench_steps
    from paperstack.bench import set_threads

    # One thread unless the user set OMP_NUM_THREADS (what _threads honours); recorded.
    threads = set_threads(torch.get_num_threads())
    repeats = repeats_for(run, default=9, quick=6)
    steps = 2 if run.quick else run.args.steps
    with run.progress(2 * (repeats + 1), "meta runs") as bar:
        rows, claims, summary, config = bench_steps(repeats, steps, run.seed, advance=bar.advance)
    intro = (
        "Joint, FOMAML and Reptile training of the demo's reward model, each from the same "
        f"weights for {steps} steps, warmed up and then timed interleaved (shuffled order) in "
        f"{repeats} rounds; ratios are medians of per-round ratios with order-statistic 95% "
        "intervals. Output check in the same run: each meta-trained model has the joint "
        "model's parameters, all finite, and a Bradley-Terry loss on a fixed probe batch within "
        f"{config['loss_tolerance']} nats of the joint model's. CPU, {threads} torch "
        "thread(s), on a shared 2-core machine loaded by other jobs."
    )
    return Report(rows, claims, summary=summary, intro=intro,
                  config=config | {"threads": threads})  # fmt: skip


def _tune_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="folder for tune-grids.json")
    p.add_argument("--seeds", type=parse_seeds, default=(98, 99),
                   help="validation seeds (default 98,99; never a reported seed)")  # fmt: skip
    p.add_argument(
        "--extensions",
        type=int,
        choices=(0, 1, 2),
        default=1,
        help="rounds of extending an axis whose best value is on its edge",
    )
    p.add_argument(
        "--alpha-only",
        action="store_true",
        help="the 0.2 search instead (inner lr alone, on the first seed)",
    )


@cli.command("tune", "tune the meta-learned and the joint initialisation with the same grid "
             "shape and budget on the validation language and seeds", _tune_arguments)  # fmt: skip
def tune_command(args: argparse.Namespace) -> int:
    _threads()
    import json

    from meta_pref.tune import tune, tune_grids

    if args.alpha_only:
        print(tune(args.out, seed=args.seeds[0]))
        return 0
    report = tune_grids(args.out, seeds=tuple(args.seeds), extensions=args.extensions)
    print(json.dumps({k: report[k]["best"] | {"interior": report[k]["interior"],
                                              "configs": report[k]["configs"]}
                      for k in ("meta", "joint")}))  # fmt: skip
    return 0


def _headroom_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="folder for headroom.json")
    p.add_argument("--seeds", type=parse_seeds, default=(98, 99),
                   help="validation seeds (default 98,99; never a reported seed)")  # fmt: skip
    p.add_argument("--max-epochs", type=positive_int, default=24,
                   help="epochs recorded per run (default 24)")  # fmt: skip


@cli.command("headroom", "the premise on validation seeds: target-only accuracy by epoch and "
             "pairs, and what each candidate budget rule keeps", _headroom_arguments)  # fmt: skip
def headroom_command(args: argparse.Namespace) -> int:
    _threads()
    import json

    from meta_pref.tune import headroom

    report = headroom(args.out, seeds=tuple(args.seeds), max_epochs=args.max_epochs)
    print(json.dumps(report["rules"]))
    return 0


def _pairs_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    p.add_argument("--languages", default="s1,s2,s3,s4,s5,s6,near,far",
                   help="comma-separated language codes of the toy world")  # fmt: skip
    p.add_argument("-n", type=positive_int, default=200, help="pairs per language (default 200)")
    p.add_argument("--seed", type=int, default=0, help="draw seed (default 0)")


@cli.command("pairs", "write the toy world's preference pairs as JSONL", _pairs_arguments)
def pairs_command(args: argparse.Namespace) -> int:
    from meta_pref.data import write_pairs
    from meta_pref.world import default_world

    world = default_world()
    codes = [c.strip() for c in args.languages.split(",") if c.strip()]
    world.check_codes(codes)
    pairs = [p for c in codes for p in world.pairs(c, args.n, seed=args.seed)]
    print(write_pairs(args.out, pairs))
    return 0


def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True,
                   help="model folder, hub id or preset (smollm2-135m-instruct): any causal LM; "
                   "the reward model is its body with a new one-output head")  # fmt: skip
    p.add_argument("--pairs", type=Path, required=True,
                   help='JSONL: {"lang", "prompt", "chosen", "rejected"} a line')  # fmt: skip
    p.add_argument("--target", required=True, help="the target language code (held out)")
    p.add_argument("--sources", default=None,
                   help="comma-separated source codes (default: all but the target)")  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="folder for model/ and train.json")
    p.add_argument("--objective", choices=("reward", "dpo"), default="reward",
                   help="reward: a Bradley-Terry reward model; dpo: a DPO policy")  # fmt: skip
    p.add_argument("--init", choices=("meta", "joint"), default="meta",
                   help="meta-learned (default) or joint on as many pairs")  # fmt: skip
    p.add_argument("--algorithm", choices=("fomaml", "reptile"), default="fomaml")
    p.add_argument("--outer-steps", type=positive_int, default=20, help="meta outer steps")
    p.add_argument("--meta-batch", type=positive_int, default=3, help="languages per outer step")
    p.add_argument("--inner-steps", type=positive_int, default=3, help="inner SGD steps")
    p.add_argument("--inner-lr", type=positive_float, default=1e-4, help="inner SGD lr α")
    p.add_argument("--outer-lr", type=positive_float, default=1e-5,
                   help="outer Adam lr (FOMAML) and the joint baseline's lr")  # fmt: skip
    p.add_argument("--support", type=positive_int, default=8, help="support pairs per task")
    p.add_argument("--query", type=positive_int, default=8, help="query pairs per task")
    p.add_argument("--adapt-epochs", type=positive_int, default=4, help="adaptation epochs")
    p.add_argument("--adapt-max-steps", type=positive_int, default=None,
                   help="cap on adaptation steps (smoke runs)")  # fmt: skip
    p.add_argument("--adapt-lr", type=positive_float, default=1e-5, help="adaptation lr")
    p.add_argument("--batch-size", type=positive_int, default=8, help="adaptation batch")
    p.add_argument("--beta", type=positive_float, default=0.1, help="DPO β")
    p.add_argument("--eval-fraction", type=fraction, default=0.3,
                   help="share of the target's pairs held out for scoring")  # fmt: skip
    p.add_argument("--max-length", type=positive_int, default=512,
                   help="most tokens of prompt + response (and the model's context)")  # fmt: skip
    p.add_argument("--seed", type=seed_int, default=0, help="training seed")


@cli.command("train", "meta-learn a reward model or DPO policy from your model on your pairs "
             "and adapt it to the target language; saves the model", _train_arguments)  # fmt: skip
def train_command(args: argparse.Namespace) -> int:
    """Every input checked before the model loads (:mod:`meta_pref.train`)."""
    _threads()
    from meta_pref.train import command

    return command(args)


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
