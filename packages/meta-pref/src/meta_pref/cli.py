"""``meta-pref``: the command line of meta-pref.

- ``meta-pref demo --out DIR``: the reproduction on the synthetic multilingual world
  (:mod:`meta_pref.demo`): six source languages, a near and a far held-out target, 25/100/1000
  target pairs, meta-learned vs joint vs target-only vs zero-shot initialisations of a reward
  model and a DPO policy, adapted with trl; writes ``DIR/results.json``, ``DIR/report.md`` and
  figures. ``--quick`` is the one-minute smoke version (a few steps: it measures nothing).
  ``--pairs FILE --target CODE``: the reward-model half on your own multilingual JSONL.
- ``meta-pref bench --out DIR``: wall time of one meta (FOMAML) outer step over one joint step
  of the same batch size (a ratio paired per repeat), in ``DIR/bench.json``.
- ``meta-pref tune --out DIR``: the validation-seed search of the inner learning rate and
  steps on the validation language (how the demo's defaults were chosen).
- ``meta-pref headroom --out DIR``: the premise measured on validation seeds: target-only
  reward accuracy by epoch at 25/100/1000 pairs, and what each candidate adaptation budget
  rule would keep (how the demo's budget rule was chosen).
- ``meta-pref pairs --out FILE``: the world's pairs of some languages as JSONL.

The common flags and flow come from :class:`paperstack.contract.ContractCLI`. Heavy imports
stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
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
    parse_seeds,
    positive_int,
    positive_int_list,
)

cli = ContractCLI("meta-pref", "meta-pref", __version__, __doc__)


def _threads() -> None:
    import torch
    import transformers

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    os.environ.setdefault("TQDM_DISABLE", "1")
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


def _configured(run: Run) -> Any:
    import dataclasses

    from meta_pref.demo import FULL, QUICK

    config = QUICK if run.quick else FULL
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


@cli.demo(arguments=_demo_arguments, seeds=3, quick_seeds=2, model=None, devices=("cpu",))
def demo(run: Run) -> Report:
    """Meta-learned vs joint vs target-only vs zero-shot inits (see :mod:`meta_pref.demo`)."""
    _threads()
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
    if run.args.target is not None:
        world.check_codes([run.args.target])
        config = dataclasses_replace_targets(config, run.args.target)
    per_seed: dict[int, Any] = {}
    with run.progress(d.progress_total(config, len(run.seeds)), "seeds x budgets") as bar:
        for seed in run.seeds:
            per_seed[seed] = d.run_seed(world, config, seed, log=run.log, advance=bar.advance)
    rows = d.rows_for(per_seed)
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
    p.add_argument("--out", type=Path, required=True, help="folder for tune.json")
    p.add_argument("--seed", type=int, default=99, help="the validation seed (default 99)")


@cli.command("tune", "choose the inner lr and steps on the validation language and seed",
             _tune_arguments)  # fmt: skip
def tune_command(args: argparse.Namespace) -> int:
    _threads()
    from meta_pref.tune import tune

    print(tune(args.out, seed=args.seed))
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


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
