"""``ra2``: the command line of ra2-unlearn.

- ``ra2 demo --out DIR``: RA^2 and its baselines (GA, GradDiff, NPO, SimNPO, RMU) unlearn one
  domain of the fact world over several seeds; writes ``DIR/results.json``, ``DIR/report.md``
  and figures. ``--quick``: one seed, a small world, a model trained in the demo.
  ``--real``: the same comparison on SmolLM2-135M-Instruct, forgetting capitals it knows
  (:mod:`ra2_unlearn.real`).
- ``ra2 bench --out DIR``: time and peak memory per unlearning step, RA^2 vs RMU, as ratios,
  in ``DIR/bench.json``.
- ``ra2 unlearn``: unlearn a model (id or path) from forget/retain data (multiple-choice JSONL
  or a WMDP-style raw-text corpus) and save it.

The common flags and flow (``--out``, ``--quick``, ``--seed``/``--seeds``, ``--device``,
``--model``, ``--no-progress``; results written atomically, verdicts printed) come from
:class:`paperstack.contract.ContractCLI`. Heavy imports stay inside the commands so that
``--help`` is instant.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from paperstack.bench import add_repeats_argument
from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    non_negative_float,
    positive_float,
    positive_int,
)
from paperstack.errors import PaperstackError
from ra2_unlearn import __version__
from ra2_unlearn.config import METHODS

cli = ContractCLI("ra2", "ra2-unlearn", __version__, __doc__)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=positive_int, default=None, help="unlearning steps per run")
    p.add_argument(
        "--methods",
        default=None,
        help="comma-separated subset of the systems (default: all; see the README)",
    )
    p.add_argument(
        "--adjacency",
        choices=("relation", "entity"),
        default=None,
        help="what the toy's forget-adjacent set is: relation (default: the forgotten domain "
        "asked of entities never unlearned) or entity (0.3's first design: the forget "
        "entities' other domains); not used by --real",
    )
    p.add_argument(
        "--real",
        action="store_true",
        help="the real-model arm: SmolLM2-135M-Instruct forgets the capitals of countries it "
        "knows (measured first), adjacent = their continent and language, every method "
        "calibrated to one forget level (about an hour of one CPU core; --quick: a smoke run of "
        "every part)",
    )


@cli.demo(
    arguments=_demo_arguments,
    seeds=3,
    quick_seeds=1,
    model="a causal LM (id or folder) that already knows the fact world (default: the cached "
    "tiny model, trained on first use)",
    devices=("cpu", "cuda"),
)
def demo(run: Run) -> Report:
    """The reproduction on the fact world (see :mod:`ra2_unlearn.demo`)."""
    if run.args.real:
        if run.args.methods is not None:
            raise PaperstackError("--real runs its declared design: no --methods")
        if run.args.adjacency is not None:
            raise PaperstackError(
                "--adjacency: the toy's option; --real's adjacent set is the "
                "forgotten countries' continent and language"
            )
        from ra2_unlearn.real import run_real

        return run_real(run)
    from ra2_unlearn.demo import run_demo

    return run_demo(run)


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=positive_int, default=20, help="steps per timed call")
    add_repeats_argument(p, default=7, quick=6, what="rounds per seed")
    p.add_argument("--preset", default="tiny", help="tiny-model preset (default tiny)")


@cli.bench(arguments=_bench_arguments, devices=("cpu", "cuda"))
def bench(run: Run) -> Report:
    """Per-step time and peak memory of RA^2 against RMU (see :mod:`ra2_unlearn.bench`)."""
    from ra2_unlearn.bench import run_bench

    return run_bench(run)


def _unlearn_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model id or local folder (from_pretrained)")
    p.add_argument("--forget", type=Path, required=True, help="forget set: MC JSONL or corpus")
    p.add_argument("--retain", type=Path, required=True, help="retain set: MC JSONL or corpus")
    p.add_argument(
        "--format",
        choices=("mc", "corpus"),
        default="mc",
        help="mc: question/choices/answer JSONL (trains on the questions); corpus: WMDP-style "
        "raw text ({'text': ...} JSONL, or .txt passages split at blank lines)",
    )
    p.add_argument("--out", type=Path, required=True, help="directory for the unlearned model")
    p.add_argument("--method", default="ra2", choices=METHODS)
    p.add_argument(
        "--layer",
        type=int,
        default=None,
        help="hooked layer l, 0-based (default: the model's middle layer, n_layers // 2; the "
        "WMDP RMU code used 7 of 32). Used by rmu and ra2, and by --trainable mlp/layers "
        "without a range (they train l-2..l); checked only where it is used",
    )
    p.add_argument(
        "--trainable",
        default="auto",
        help="which parameters train: auto (rmu/ra2: MLP output projections of layers l-2..l, "
        "as in the WMDP code; ga/graddiff/npo/simnpo: all), all, mlp (MLP output projections: "
        "Llama/Qwen/Mistral mlp.down_proj, GPT-2 mlp.c_proj, ...), layers (every parameter of "
        "the layers), or mlp:A-B / layers:A-B for explicit layers",
    )
    p.add_argument("--steps", type=positive_int, default=150)
    p.add_argument("--lr", type=positive_float, default=5e-5)
    p.add_argument("--batch-size", type=positive_int, default=4)
    p.add_argument("--alpha", type=non_negative_float, default=1.0, help="retain weight")
    p.add_argument("--lora-r", type=positive_int, default=None, help="train a LoRA of rank r")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-progress", action="store_true", help="no progress bar or lines")


@cli.command("unlearn", "unlearn a model from forget/retain data and save it", _unlearn_arguments)
def unlearn_command(args: argparse.Namespace) -> int:
    from paperstack.contract import check_device, check_model
    from paperstack.progress import quiet_libraries
    from paperstack.records import output_dir
    from ra2_unlearn.config import UnlearnConfig, parse_trainable
    from ra2_unlearn.data import load_mc_jsonl, load_text_corpus

    quiet_libraries()
    device = check_device(args.device)
    name = check_model(args.model)
    assert name is not None
    load = load_mc_jsonl if args.format == "mc" else load_text_corpus
    forget, retain = load(args.forget), load(args.retain)
    trainable, trained_layers = parse_trainable(args.trainable)
    config = UnlearnConfig(
        method=args.method,
        layer=args.layer,
        alpha=args.alpha,
        trainable=trainable,
        trained_layers=trained_layers,
    )
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise PaperstackError(f"--out {out}: exists and is not a directory")
    from ra2_unlearn.trainer import load_model, save_model, unlearn

    model, tok = load_model(name, device)
    config = config.for_model(model)  # --layer / --trainable against this model, before training
    result = unlearn(
        model,
        tok,
        forget,
        retain,
        config,
        steps=args.steps,
        lr=args.lr,
        batch_size=args.batch_size,
        seed=args.seed,
        lora_r=args.lora_r,
        device=device,
        progress=not args.no_progress,
    )
    # output_dir: one line for an unusable --out, and the folder it made removed again if the
    # save fails before writing anything; save_model leaves nothing half-written in it.
    with output_dir(out) as out:
        save_model(result.model, tok, out)
    print(f"ra2: unlearned with {args.method} in {result.seconds:.1f}s; saved to {out}")
    return 0


def _evaluate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the (unlearned) model: id or local folder")
    p.add_argument("--forget", type=Path, required=True, help="forget set: MC JSONL or corpus")
    p.add_argument(
        "--holdout",
        type=Path,
        default=None,
        help="data the model never trained on, same format (the MIA non-members)",
    )
    p.add_argument(
        "--retain-model",
        default=None,
        help="a model trained without the forget set (TOFU forget quality, PrivLeak)",
    )
    p.add_argument(
        "--format",
        choices=("mc", "corpus"),
        default="mc",
        help="mc: question/choices/answer JSONL; corpus: raw text (see unlearn)",
    )
    p.add_argument("--out", type=Path, required=True, help="directory for evaluation.json")
    p.add_argument("--device", default="cpu")  # fmt: skip


@cli.command(
    "evaluate",
    "open-unlearning metrics of a model on your data: truth ratio, forget quality, KnowMem / "
    "VerbMem, LOSS / ZLib / Min-K%% / Min-K%%++ membership AUCs, PrivLeak",
    _evaluate_arguments,
)
def evaluate_command(args: argparse.Namespace) -> int:
    from paperstack.contract import check_device, check_model
    from paperstack.progress import quiet_libraries
    from paperstack.records import atomic_write_json, output_dir
    from ra2_unlearn.data import load_mc_jsonl, load_text_corpus
    from ra2_unlearn.evaluation import evaluate_user_data

    quiet_libraries()
    device = check_device(args.device)
    model_name = check_model(args.model)
    retain_name = check_model(args.retain_model)
    load = load_mc_jsonl if args.format == "mc" else load_text_corpus
    forget = load(args.forget)
    holdout = load(args.holdout) if args.holdout is not None else None
    assert model_name is not None
    with output_dir(args.out) as out:  # no empty --out left behind by a failed first run
        report = evaluate_user_data(model_name, forget, holdout, retain_name, device)
        path = atomic_write_json(out / "evaluation.json", report)
    for name, value in report["metrics"].items():
        print(f"ra2: {name}: {value:.4g}")
    print(f"ra2: wrote {path}")
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
