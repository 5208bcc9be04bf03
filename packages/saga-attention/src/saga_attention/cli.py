"""``saga``: the command line of saga-attention.

- ``saga demo --out DIR``: GQA vs SAGA from scratch, GQA converted to SAGA, Atop-N recall,
  decode attention time at 4K-32K and KV-cache bytes; writes ``DIR/results.json``,
  ``DIR/report.md`` and a figure. ``--quick`` is the one-minute version.
- ``saga bench --out DIR``: decode-step attention time and bytes moved against context length
  and ``H_k``, against dense SDPA, in one run; ``DIR/bench.json``.
- ``saga convert --model GQA_DIR --key-heads H --out DIR``: key-head pooling plus a brief
  fine-tune on the recall task; saves a ``SagaForCausalLM``.

Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paperstack.errors import PaperstackError, cli_guard
from saga_attention import __version__

PROG = "saga"
DIST = "saga-attention"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _contexts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"needs positive context lengths, got {text!r}")
    return values


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"{DIST} {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the reproduction and write results.json and report.md")
    demo.add_argument("--out", type=Path, required=True, help="directory for the results")
    demo.add_argument("--quick", action="store_true", help="smaller task, fewer steps (CI)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--model", default=None, help="not supported: the demo trains its models")
    demo.add_argument("--dataset", default=None, help="not supported: the task is generated")
    demo.add_argument("--device", default="cpu", help="cpu (the demo's timings are CPU timings)")
    demo.add_argument("--threads", type=_positive, default=None, help="torch threads (default 1)")

    bench = sub.add_parser("bench", help="decode attention time and bytes vs context and H_k")
    bench.add_argument("--out", type=Path, required=True, help="directory for bench.json")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--repeats", type=_positive, default=5)
    bench.add_argument("--contexts", type=_contexts, default=(4096, 8192, 16384, 32768))
    bench.add_argument("--key-heads", type=_contexts, default=(1, 2, 4), help="H_k sweep")
    bench.add_argument("--device", default="cpu", help="cpu or cuda (cuda adds triton kernels)")

    conv = sub.add_parser("convert", help="turn a GQA checkpoint into SAGA and fine-tune it")
    conv.add_argument("--model", type=Path, required=True, help="GQA checkpoint directory")
    conv.add_argument("--key-heads", type=_positive, required=True, help="H_k of the result")
    conv.add_argument("--out", type=Path, required=True, help="directory for the SAGA model")
    conv.add_argument("--steps", type=int, default=150, help="fine-tuning steps (0: pool only)")
    conv.add_argument("--seed", type=int, default=0)
    conv.add_argument("--quick", action="store_true", help="fine-tune on the --quick task")
    return p


@cli_guard(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "bench":
        return _bench(args)
    if args.command == "convert":
        return _convert(args)
    return _demo(args)


def _threads(n: int | None) -> None:
    """One thread unless asked: the toy models are too small to gain from more, and on a
    shared machine extra OpenMP threads spin and slow everything (measured: 2 threads made
    ``demo --quick`` several times slower under load)."""
    import torch

    torch.set_num_threads(n or 1)


def _demo(args: argparse.Namespace) -> int:
    import torch

    from paperstack.records import Manifest, Results, prepare_out_dir, write_results
    from paperstack.report import bar_chart, write_report
    from saga_attention.demo import FULL, QUICK, run_demo

    if args.model is not None:
        raise PaperstackError(
            f"--model {args.model}: the demo trains its own models; use "
            "'saga convert --model' for a checkpoint"
        )
    if args.dataset is not None:
        raise PaperstackError(f"--dataset {args.dataset}: the demo's task is generated")
    if args.device != "cpu":
        raise PaperstackError(
            f"--device {args.device}: the demo measures CPU decode time; "
            "use 'saga bench --device cuda' on a GPU"
        )
    out = prepare_out_dir(args.out)
    _threads(args.threads)
    torch.manual_seed(args.seed)
    config = QUICK if args.quick else FULL
    manifest = Manifest.collect(DIST, __version__, seed=args.seed, config={"quick": args.quick})
    rows, claims, notes = run_demo(config, args.seed, out, log=lambda m: print(f"{PROG}: {m}"))
    manifest = manifest.model_copy(update={"config": {"quick": args.quick, **notes}})
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    figure = bar_chart(
        rows, "accuracy", out / "accuracy.png", split="test", title="recall accuracy (held-out)"
    )
    scale = "--quick (smoke scale: claims are not meaningful)" if args.quick else "full"
    write_report(
        out,
        results,
        title=f"{DIST} {__version__}: demo",
        intro=(
            f"Demo scale: {scale}. Tiny Llama-style models (CPU, from configs) on multi-query "
            f"associative recall ({config.task.pairs} bindings, {config.task.queries} queries, "
            f"{config.task.length} tokens); sparse modes use top-N with N={config.top_n} at every "
            "position. Decode attention times: one layer, batch 1, fp32, H_q=32, d=128, GQA "
            "H_kv=8, SAGA H_k=2/H_v=8, N=64, one torch thread, measured on a shared 2-core "
            "CPU. Accuracy CIs: Wilson over answers (answers of one sequence are not "
            "independent, so they are optimistic); loss and time CIs: Student t."
        ),
        figures=[figure],
    )
    for c in claims:
        print(f"{PROG}: claim {c.id}: {'held' if c.held else 'NOT held'} ({c.describe()})")
    print(
        f"{PROG}: wrote {out / 'results.json'} and report.md in {notes['seconds']:.0f}s "
        f"({sum(c.held for c in claims)}/{len(claims)} claims held)"
    )
    return 0


def _bench(args: argparse.Namespace) -> int:
    import numpy as np

    from paperstack.records import Manifest, Results, Row, prepare_out_dir, write_results
    from paperstack.stats import mean_ci
    from saga_attention.timing import DecodeShape, time_decode

    if args.device not in ("cpu", "cuda"):
        raise PaperstackError(f"--device {args.device}: must be cpu or cuda")
    out = prepare_out_dir(args.out)
    _threads(None)
    shape = DecodeShape()
    manifest = Manifest.collect(
        DIST,
        __version__,
        seed=args.seed,
        config={
            "contexts": list(args.contexts),
            "key_heads": list(args.key_heads),
            "repeats": args.repeats,
            "device": args.device,
            "shape": vars(shape),
        },
    )
    timing = time_decode(
        args.contexts,
        args.repeats,
        shape,
        seed=args.seed,
        key_heads=args.key_heads,
        device=args.device,
        progress=lambda m: print(f"{PROG}: {m}"),
    )
    rows: list[Row] = []
    for length in args.contexts:
        base = np.array(timing.times["gqa-dense-sdpa"][length])
        for name, per_len in timing.times.items():
            t = np.array(per_len[length])
            ratio, ci = mean_ci(base / t)
            rows.append(
                Row(
                    system=name,
                    metric="speedup_vs_sdpa",
                    value=ratio,
                    ci95=ci,
                    n=t.size,
                    split=f"L={length}",
                    unit="x",
                )
            )
        for name, layout, top in _bench_layouts(shape, args.key_heads):
            rows.append(
                Row(
                    system=name,
                    metric="bytes_per_step",
                    value=layout.decode_bytes(length, top, 2),
                    split=f"L={length}",
                    unit="bytes (bf16)",
                )
            )
    results = Results(manifest=manifest.finish(), rows=rows, claims=[])
    path = write_results(out / "bench.json", results)
    print(f"{PROG}: wrote {path}")
    for r in rows:
        if r.metric == "speedup_vs_sdpa" and r.split == f"L={max(args.contexts)}":
            print(f"{PROG}:   {r.system:>20}: {r.value:.2f}x dense SDPA at {r.split}")
    return 0


def _bench_layouts(shape: Any, key_heads: Sequence[int]) -> list[tuple[str, Any, int | None]]:
    from saga_attention.heads import HeadLayout

    hq, d, hv = shape.query_heads, shape.head_dim, shape.saga_value_heads
    gqa = HeadLayout(hq, shape.gqa_kv_heads, shape.gqa_kv_heads, d)
    out: list[tuple[str, Any, int | None]] = [
        ("gqa-dense", gqa, None),
        ("gqa-atop", gqa, shape.top_n),
    ]
    for h in (shape.saga_key_heads, *key_heads):
        name = "saga-atop" if h == shape.saga_key_heads else f"saga-atop-hk{h}"
        if any(o[0] == name for o in out):
            continue
        out.append((name, HeadLayout(hq, h, hv, d), shape.top_n))
    out.append(("saga-dense", HeadLayout(hq, shape.saga_key_heads, hv, d), None))
    return out


def _convert(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils.logging import disable_progress_bar

    from paperstack.records import prepare_out_dir
    from saga_attention.convert import convert_gqa_to_saga
    from saga_attention.demo import FULL, QUICK
    from saga_attention.training import evaluate, train

    if args.steps < 0:
        raise PaperstackError(f"--steps {args.steps}: must be >= 0")
    if not (args.model / "config.json").is_file():
        raise PaperstackError(f"--model {args.model}: no config.json there (not a checkpoint)")
    try:
        source = AutoConfig.from_pretrained(args.model)
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PaperstackError(f"--model {args.model}: cannot read config.json ({first})") from None
    h_kv = getattr(source, "num_key_value_heads", None)
    if not isinstance(h_kv, int) or h_kv % args.key_heads:
        raise PaperstackError(
            f"--key-heads {args.key_heads}: key heads: {args.key_heads} does not divide the "
            f"checkpoint's {h_kv} key/value heads"
        )
    out = prepare_out_dir(args.out)
    _threads(None)
    torch.manual_seed(args.seed)
    disable_progress_bar()
    try:
        gqa = AutoModelForCausalLM.from_pretrained(args.model)
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PaperstackError(f"--model {args.model}: cannot load ({first})") from None
    config = QUICK if args.quick else FULL
    task = config.task
    if gqa.config.vocab_size < task.vocab_size:
        raise PaperstackError(
            f"--model {args.model}: vocab_size {gqa.config.vocab_size} is smaller than the "
            f"recall task's {task.vocab_size}"
        )
    saga = convert_gqa_to_saga(gqa, args.key_heads)
    if args.steps:
        spec = config.train.__class__(**{**vars(config.train), "steps": args.steps, "warmup": 0.1})
        train(saga, task, spec, seed=args.seed + 1)
    acc = evaluate(saga, task, 64, 1_000_000 + args.seed, "atop", config.top_n).accuracy
    saga.save_pretrained(out)
    print(f"{PROG}: wrote {out} (H_k={args.key_heads}; recall accuracy with Atop-N {acc:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
