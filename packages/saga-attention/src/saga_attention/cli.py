"""``saga``: the command line of saga-attention.

- ``saga demo --out DIR``: the premise (dense attention solves a 1K-4K-token recall task),
  then the two ideas apart: asymmetry at equal sparsity (SAGA + Atop-N vs GQA + Atop-N),
  sparsity at equal heads (GQA + Atop-N vs dense GQA), their combination, Atop-N recall by
  context length, and the GQA -> SAGA conversion; 5 seeds; writes ``DIR/results.json``,
  ``DIR/report.md`` and figures. ``--quick`` is the one-minute smoke version.
- ``saga bench --out DIR``: decode-step attention time against context length and ``H_k``,
  selection time on its own (Atop-N vs ``torch.topk``) and end-to-end decode tokens/s of whole
  models (a tiny one and Llama-1B-shaped layers), SAGA vs GQA, in one run; ``DIR/bench.json``.
  ``--device cuda`` adds the triton kernels and a flash-decoding baseline.
- ``saga convert --model GQA_DIR --key-heads H --out DIR``: key-head pooling of a Llama,
  Qwen2, Qwen3 or Mistral checkpoint plus a brief fine-tune on the recall task; saves the SAGA
  model of that family and the source's tokenizer beside it (written in a staging folder and
  renamed, ``config.json`` last).

The common flags and flow (``--out``, ``--quick``, ``--seed``/``--seeds``, ``--device``,
``--no-progress``; results written atomically, verdicts printed) come from
:class:`paperstack.contract.ContractCLI`. Heavy imports stay inside the commands so that
``--help`` is instant.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    positive_float,
    positive_int,
    positive_int_list,
    seed_int,
)
from paperstack.errors import PaperstackError
from saga_attention import __version__

cli = ContractCLI("saga", "saga-attention", __version__, __doc__)


def _threads(n: int | None) -> None:
    """One torch thread unless asked: the toy models are too small to gain from more, and on a
    shared machine extra OpenMP threads spin and slow everything down."""
    import torch

    torch.set_num_threads(n or 1)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=positive_int, default=None, help="torch threads (default 1)")


@cli.demo(arguments=_demo_arguments, seeds=5, quick_seeds=1, model=None, devices=("cpu",))
def demo(run: Run) -> Report:
    """GQA and SAGA trained on long-context recall, conversion, recall, decode time."""
    from saga_attention.demo import FULL, QUICK, report_text, run_demo

    _threads(run.args.threads)
    config = QUICK if run.quick else FULL
    rows, claims, notes, figures = run_demo(config, run.seeds, run.out, run.log, run.progress)
    return Report(
        rows,
        claims,
        intro=report_text(config, run.quick, run.seeds),
        figures=figures,
        config=notes,
    )


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repeats", type=positive_int, default=None, help="timed repeats per system")
    p.add_argument(
        "--contexts",
        type=positive_int_list,
        default=None,
        help="decode-step contexts (default 4096,8192,16384,32768; cuda 8K-128K)",
    )
    p.add_argument(
        "--key-heads",
        type=positive_int_list,
        default=(1, 2, 4),
        help="H_k sweep of SAGA + Atop-N (default 1,2,4; each must divide H_q=32)",
    )
    p.add_argument(
        "--e2e-contexts",
        type=positive_int_list,
        default=None,
        help="end-to-end model decode contexts (CPU default 16384,65536, 512 with --quick; "
        "CUDA 32768,65536,131072 on the 16-layer Llama-1B shape)",
    )
    p.add_argument(
        "--budget-s",
        type=positive_float,
        default=None,
        help="time budget in seconds: what would not finish is skipped, what did is written",
    )
    p.add_argument(
        "--threads", type=positive_int, default=None, help="CPU threads (default 1; recorded)"
    )


@cli.bench(arguments=_bench_arguments, devices=("cpu", "cuda"))
def bench(run: Run) -> Report:
    """End-to-end and decode-step time of SAGA vs GQA (paperstack.bench), selection alone."""
    from saga_attention.bench import BenchConfig, run_bench

    config = BenchConfig.for_run(
        device=run.device,
        quick=run.quick,
        repeats=run.args.repeats,
        contexts=run.args.contexts,
        key_heads=run.args.key_heads,
        e2e_contexts=run.args.e2e_contexts,
        budget_s=run.args.budget_s,
        threads=run.args.threads,
    )
    rows, claims, notes, summary = run_bench(config, run.seed, run.log, run.progress)
    return Report(rows, claims, intro=config.describe(), config=notes, summary=summary)


def _convert_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, required=True, help="GQA checkpoint directory")
    p.add_argument("--key-heads", type=positive_int, required=True, help="H_k of the result")
    p.add_argument("--out", type=Path, required=True, help="directory for the SAGA model")
    p.add_argument("--steps", type=int, default=150, help="fine-tuning steps (0: pool only)")
    p.add_argument("--seed", type=seed_int, default=0, help="fine-tuning seed (0 to 2**32-1)")
    p.add_argument("--quick", action="store_true", help="fine-tune on the --quick task")


@cli.command("convert", "turn a GQA checkpoint into SAGA and fine-tune it", _convert_arguments)
def convert(args: argparse.Namespace) -> int:
    """Key-head pooling of a GQA checkpoint (Llama, Qwen2, Qwen3, Mistral), then ``--steps`` of
    fine-tuning; the tokenizer, when the source has one, is saved beside the result."""
    from paperstack.checkpoint import check_model_dir, load_pretrained
    from paperstack.progress import quiet_libraries
    from paperstack.records import prepare_out_dir

    if args.steps < 0:
        raise PaperstackError(f"--steps {args.steps}: must be >= 0")
    source = check_model_dir(args.model)  # config.json readable, weights present and whole
    import json

    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    from saga_attention.modeling import FAMILIES

    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise PaperstackError(
            f"--model {args.model}: model_type {model_type!r} is not a Llama-style GQA "
            f"architecture saga converts ({', '.join(FAMILIES)})"
        )
    h_kv = config.get("num_key_value_heads", config.get("num_attention_heads"))
    if not isinstance(h_kv, int):
        raise PaperstackError(
            f"--model {args.model}: config.json has no num_key_value_heads or "
            f"num_attention_heads (model_type {model_type!r}); not a Llama-style "
            "attention model"
        )
    if h_kv % args.key_heads:
        raise PaperstackError(
            f"--key-heads {args.key_heads}: does not divide the checkpoint's {h_kv} key/value heads"
        )
    quiet_libraries()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from saga_attention.convert import convert_gqa_to_saga, has_tokenizer, save_converted
    from saga_attention.demo import FULL, QUICK
    from saga_attention.training import evaluate_decode, train_curriculum

    out = prepare_out_dir(args.out)
    _threads(None)
    torch.manual_seed(args.seed)
    tokenizer = None
    if has_tokenizer(source):
        try:
            tokenizer = AutoTokenizer.from_pretrained(source)
        except (OSError, ValueError, TypeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PaperstackError(
                f"--model {args.model}: tokenizer cannot be loaded ({first})"
            ) from None
    gqa = load_pretrained(source, AutoModelForCausalLM.from_pretrained)
    demo = QUICK if args.quick else FULL
    task = demo.task
    if gqa.config.vocab_size < task.vocab_size:
        raise PaperstackError(
            f"--model {args.model}: vocab_size {gqa.config.vocab_size} is smaller than the "
            f"recall task's {task.vocab_size}"
        )
    saga = convert_gqa_to_saga(gqa, args.key_heads)
    if args.steps:
        train_curriculum(saga, task, demo.convert_phases(args.steps), seed=args.seed + 1)
    long = task.with_context(demo.claim_context)
    result = evaluate_decode(saga, long, 8, 1_000_000 + args.seed, ("atop",), demo.top_n)
    save_converted(saga, out, tokenizer)
    kept = "tokenizer saved beside it" if tokenizer is not None else "no tokenizer in --model"
    print(
        f"saga: wrote {out} ({type(saga).__name__}, H_k={args.key_heads}, {kept}; recall "
        f"accuracy with Atop-{demo.top_n} at {long.length} tokens: "
        f"{result['atop'].accuracy:.3f} on 8 sequences)"
    )
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
