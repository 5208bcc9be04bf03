"""``mage``: the command line of mage-attention.

- ``mage demo --out DIR``: the reproduction (a tiny block-diffusion LM trained on long-context
  retrieval, exact / MAGE / Quest / SparseD / random-k in one decoder, attention time at 8K and
  32K); writes ``DIR/results.json``, ``DIR/report.md`` and figures. ``--quick``: about a minute.
  ``--model DIR``: evaluate a block-diffusion checkpoint (e.g. one ``mage train`` saved).
- ``mage bench --out DIR``: one block's attention time, MAGE vs exact vs Quest, at 8K-64K on
  the CPU (``--device cuda``: 32K-128K with the triton kernel), as paired ratios.
- ``mage train --out DIR``: train the demo's block-diffusion LM and save it
  (``save_pretrained``), for ``--model``.

The common flags and flow come from :class:`paperstack.contract.ContractCLI`. Heavy imports
stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
from typing import Any

from mage_attention import __version__
from paperstack.contract import ContractCLI, Report, Run, positive_int, positive_int_list

cli = ContractCLI("mage", "mage-attention", __version__, __doc__)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sequences",
        type=positive_int,
        default=None,
        help="sequences decoded per seed and prompt length (default 32; quick 8)",
    )
    p.add_argument(
        "--mask-token-id",
        type=int,
        default=None,
        help="the [MASK] token of a --model checkpoint whose config does not name one",
    )


@cli.demo(
    arguments=_demo_arguments,
    seeds=3,
    quick_seeds=2,
    model="a block-diffusion checkpoint folder trained on the retrieval task (`mage train`); "
    "default: the demo trains (once, cached) its own tiny one",
    devices=("cpu",),
)
def demo(run: Run) -> Report:
    """Premise (exact attention solves the task), then MAGE against the baselines."""
    from dataclasses import replace

    from mage_attention.demo import FULL, QUICK, run_demo
    from mage_attention.modeling import load_model
    from paperstack.report import bar_chart

    config = QUICK if run.quick else FULL
    if run.args.sequences is not None:
        config = replace(config, sequences=run.args.sequences)
    model = None
    if run.model is not None:
        model = load_model(run.model, mask_token_id=run.args.mask_token_id)
    rows, claims, manifest = run_demo(
        config, run.seeds, model, run.log, run.progress if run.show_progress else None
    )
    split = f"L={config.claim_length}"
    figures = [
        bar_chart(rows, "exact_match", run.out / "exact_match.png", split=split,
                  title=f"exact match at L = {config.claim_length}"),
        bar_chart(rows, "mass_recall", run.out / "mass_recall.png", split=split,
                  title="attention-mass recall, steps 2..T"),
    ]  # fmt: skip
    scale = "quick (toy, smaller)" if run.quick else "toy"
    intro = (
        f"A {config.spec.layers}-layer block-diffusion LM (hidden {config.spec.hidden_size}, "
        f"{config.spec.query_heads} query / {config.spec.kv_heads} KV heads, blocks of "
        f"{config.spec.block_size}) trained on the CPU on long-context retrieval "
        f"({config.task.pairs} bindings hidden in the prompt, {config.task.queries} questions "
        f"answered in two blocks). Each policy decodes the same {config.sequences} sequences per "
        f"seed (seeds {', '.join(map(str, run.seeds))}) at prompt lengths "
        f"{', '.join(map(str, config.eval_lengths))} with k = L/16. Timings: one block's "
        f"attention on synthetic q/k/v, paired repeats, on a shared 2-core CPU. Scale: {scale}; "
        "no GPU numbers were measured."
    )
    return Report(rows, claims, intro=intro, figures=figures, config=manifest)


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lengths",
        type=positive_int_list,
        default=None,
        help="prefix lengths (default CPU 8192,16384,32768,65536; cuda up to 131072)",
    )
    p.add_argument("--repeats", type=positive_int, default=None,
                   help="paired repeats (default 5; quick 2)")  # fmt: skip


@cli.bench(arguments=_bench_arguments, devices=None)
def bench(run: Run) -> Report:
    """Attention time of one block: MAGE and Quest over exact, as paired per-repeat ratios."""
    import torch

    from mage_attention.errors import MageError
    from mage_attention.timing import BlockShape, time_block, timing_rows

    cuda = run.device.startswith("cuda")
    if run.args.repeats is not None and run.args.repeats < 2:
        raise MageError(f"--repeats {run.args.repeats}: needs at least 2 (paired ratios)")
    if cuda:
        lengths = run.args.lengths or (32768, 65536, 131072)
        shape = BlockShape()
    else:
        torch.set_num_threads(1)
        default = (8192, 16384) if run.quick else (8192, 16384, 32768, 65536)
        lengths = run.args.lengths or default
        shape = BlockShape(query_heads=16, kv_heads=4, head_dim=128)
    repeats = run.args.repeats or (2 if run.quick else 5)
    times = time_block(lengths, repeats, shape, seed=run.seed, device=run.device, progress=run.log)
    rows = timing_rows(times)
    best = max(lengths)
    speed = next(r for r in rows if r.system == "mage" and r.metric == "speedup_vs_exact"
                 and r.split == f"L={best}")  # fmt: skip
    summary = f"MAGE: {speed.value:.2f}x exact attention's block time at L={best} ({run.device})"
    config: dict[str, Any] = {"lengths": list(lengths), "repeats": repeats, "device": run.device,
                              "shape": shape.__dict__}  # fmt: skip
    return Report(rows, summary=summary, config=config)


def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="folder to save the model in (save_pretrained)")
    p.add_argument("--quick", action="store_true", help="the quick demo's few steps")


@cli.command("train", "train the demo's block-diffusion LM and save it", _train_arguments)
def train_command(args: argparse.Namespace) -> int:
    import torch

    from mage_attention.demo import FULL, QUICK
    from mage_attention.modeling import build_model
    from mage_attention.task import MASK
    from mage_attention.training import train

    torch.set_num_threads(1)
    config = QUICK if args.quick else FULL
    model = build_model(config.spec, config.task.vocab_size, MASK, seed=0)
    losses = train(model, config.task, config.phases, seed=0)
    model.save_pretrained(args.out)
    print(f"mage: saved to {args.out} (final loss {losses[-1]:.3f})")
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
