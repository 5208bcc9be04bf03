"""``nf12``: the command line of nf12-format.

- ``nf12 compress IN.safetensors OUT.nf12.safetensors``: BF16 checkpoint to NF12, streaming;
- ``nf12 decompress IN.nf12.safetensors OUT.safetensors``: back, sha256-verified, byte-exact;
- ``nf12 inspect FILE``: per-tensor coverage, escape rate, bits per weight, exponent entropy;
- ``nf12 demo --out DIR``: the reproduction (MiniLM and a random Qwen3-shaped model) with
  ``results.json``, ``report.md`` and a figure; ``--quick`` is the one-minute version;
- ``nf12 bench --out DIR``: decode and GEMV speed against BF16 baselines, as ratios.

Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nf12 import __version__
from paperstack.errors import PaperstackError, cli_guard

PROG = "nf12"
DIST = "nf12-format"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"{DIST} {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    comp = sub.add_parser("compress", help="compress a BF16 safetensors checkpoint to NF12")
    comp.add_argument("src", type=Path, help="input .safetensors (BF16)")
    comp.add_argument("dst", type=Path, help="output .nf12.safetensors")
    comp.add_argument("--group", type=int, default=8, help="weights per group (default 8)")
    comp.add_argument("--allow-nan", action="store_true", help="store NaN weights verbatim")
    comp.add_argument(
        "--keep-other-dtypes",
        action="store_true",
        help="store F16/F32/F64 tensors verbatim instead of refusing them",
    )

    dec = sub.add_parser("decompress", help="rebuild the original safetensors file")
    dec.add_argument("src", type=Path, help="input .nf12.safetensors")
    dec.add_argument("dst", type=Path, help="output .safetensors")

    ins = sub.add_parser("inspect", help="per-tensor coverage, escapes, bits/weight, entropy")
    ins.add_argument("file", type=Path, help="an NF12 file, or a BF16 safetensors file")
    ins.add_argument("--json", action="store_true", help="print JSON lines instead of a table")

    demo = sub.add_parser("demo", help="run the reproduction and write results.json and report.md")
    demo.add_argument("--out", type=Path, required=True, help="directory for the results")
    demo.add_argument("--quick", action="store_true", help="small Qwen3, 3 repeats (CI)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the random Qwen3 (default 0)")
    demo.add_argument(
        "--model",
        type=Path,
        default=None,
        help="also measure this safetensors checkpoint (a file or a directory holding "
        "model.safetensors); float tensors are cast to BF16",
    )
    demo.add_argument("--dataset", default=None, help="unused: this method takes no dataset")
    demo.add_argument("--device", default="cpu", help="cpu (GPU timings: nf12 bench)")
    demo.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")

    bench = sub.add_parser("bench", help="decode and GEMV speed against BF16 baselines")
    bench.add_argument("--out", type=Path, required=True, help="directory for bench.json")
    bench.add_argument("--device", default="cpu", help="cpu, or cuda (fused GEMV vs cuBLAS)")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--repeats", type=int, default=10)
    bench.add_argument("--quick", action="store_true", help="small matrices only")
    bench.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    return p


@cli_guard(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {
        "compress": _compress,
        "decompress": _decompress,
        "inspect": _inspect,
        "demo": _demo,
        "bench": _bench,
    }
    return commands[args.command](args)


def _compress(args: argparse.Namespace) -> int:
    from nf12.files import compress_file

    started = time.perf_counter()
    report = compress_file(
        args.src,
        args.dst,
        group=args.group,
        allow_nan=args.allow_nan,
        keep_other_dtypes=args.keep_other_dtypes,
    )
    coded = sum(e["kind"] == "nf12" for e in report.entries)
    print(
        f"{PROG}: wrote {args.dst}: {len(report.entries)} tensors ({coded} NF12), "
        f"{report.source_bytes / 1e6:.1f} MB -> {report.output_bytes / 1e6:.1f} MB, "
        f"{report.bits_per_weight:.3f} bits/weight ({time.perf_counter() - started:.1f}s)"
    )
    return 0


def _decompress(args: argparse.Namespace) -> int:
    from nf12.files import decompress_file

    exact = decompress_file(args.src, args.dst)
    how = "byte-identical to the original file" if exact else "same tensors, new file layout"
    print(f"{PROG}: wrote {args.dst} (every tensor sha256-verified; {how})")
    return 0


def _fmt(value: Any, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.3f}%" if pct else f"{value:.3f}"


def _inspect(args: argparse.Namespace) -> int:
    from nf12.files import inspect_file

    rows = inspect_file(args.file)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    print("tensor | kind | shape | coverage | escape rate | bits/weight | exp. entropy")
    total_bits = 0.0
    total = 0
    for r in rows:
        numel = 1
        for d in r["shape"]:
            numel *= int(d)
        total += numel
        total_bits += numel * (r["bits_per_weight"] or 0.0)
        print(
            f"{r['name']} | {r['kind']} | {'x'.join(map(str, r['shape']))} | "
            f"{_fmt(r['coverage'], True)} | {_fmt(r['escape_rate'], True)} | "
            f"{_fmt(r['bits_per_weight'])} | {_fmt(r['exponent_entropy'])}"
        )
    print(
        f"total: {len(rows)} tensors, {total} weights, {total_bits / max(total, 1):.3f} bits/weight"
    )
    return 0


def _demo(args: argparse.Namespace) -> int:
    import torch

    from nf12.demo import FULL, QUICK, claims_for, describe, minilm_state, qwen3_state, rows_for
    from paperstack.records import Manifest, Results, prepare_out_dir, write_results
    from paperstack.report import bar_chart, write_report

    if args.dataset is not None:
        raise PaperstackError(f"--dataset {args.dataset}: this method takes no dataset")
    if args.device != "cpu":
        raise PaperstackError(
            f"--device {args.device}: the demo times CPU decoders; use `nf12 bench --device cuda`"
        )
    if args.threads < 1:
        raise PaperstackError(f"--threads {args.threads}: must be at least 1")
    out = prepare_out_dir(args.out)
    torch.set_num_threads(args.threads)
    cfg = QUICK if args.quick else FULL
    sets: dict[str, Any] = {}
    if args.model is not None:
        sets["model"] = lambda: _load_model(args.model)
    sets["minilm"] = minilm_state
    sets["qwen3-random"] = lambda: qwen3_state(
        cfg.qwen_hidden, cfg.qwen_layers, cfg.qwen_vocab, args.seed
    )
    config = {
        "quick": args.quick,
        "qwen3": {"hidden": cfg.qwen_hidden, "layers": cfg.qwen_layers, "vocab": cfg.qwen_vocab},
        "repeats": cfg.repeats,
        "groups": list(cfg.groups),
        "threads": args.threads,
        "model": str(args.model) if args.model else None,
        "device": "cpu",
    }
    manifest = Manifest.collect(DIST, __version__, seed=args.seed, config=config)
    started = time.perf_counter()
    from nf12.demo import run_weight_set

    rows: list[Any] = []
    for name, load in sets.items():
        measured = run_weight_set(name, load(), cfg, log=lambda m: print(f"{PROG}: {m}"))
        print(f"{PROG}: {describe(name, measured)}")
        rows.extend(rows_for(name, measured))
    claims = claims_for(rows)
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    figures = [bar_chart(rows, "bits_per_weight", out / "bits_per_weight.png", split="minilm")]
    figures.append(
        bar_chart(rows, "decode_Mweights_per_s", out / "decode_throughput.png", split="minilm")
    )
    write_report(
        out,
        results,
        title=f"{DIST} {__version__}: demo",
        intro=(
            "NF12 against BF16, a DFloat11-style Huffman exponent codec and the exponent entropy "
            "bound, on the trained all-MiniLM-L6-v2 weights (cast to BF16) and a randomly "
            f"initialised Qwen3-shaped model (hidden {cfg.qwen_hidden}, {cfg.qwen_layers} "
            f"layers). Decode throughput: CPU, {args.threads} thread(s), {cfg.repeats} "
            "interleaved repeats; GPU not measured here. Rates are in percent."
        ),
        figures=figures,
    )
    held = sum(c.held for c in claims)
    print(
        f"{PROG}: wrote {out / 'results.json'} and report.md "
        f"({held}/{len(claims)} claims held, {time.perf_counter() - started:.1f}s)"
    )
    return 0


def _load_model(path: Path) -> dict[str, Any]:
    import torch
    from safetensors.torch import load_file

    file = path / "model.safetensors" if path.is_dir() else path
    if not file.is_file():
        raise PaperstackError(f"--model {path}: no safetensors file there")
    try:
        state = load_file(str(file))
    except Exception as exc:
        raise PaperstackError(f"--model {file}: cannot read ({str(exc).splitlines()[0]})") from None
    return {
        k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous()
        for k, v in state.items()
    }


def _bench(args: argparse.Namespace) -> int:
    from nf12.bench import run_bench

    if args.repeats < 2:
        raise PaperstackError(f"--repeats {args.repeats}: needs at least 2")
    if args.device not in ("cpu", "cuda"):
        raise PaperstackError(f"--device {args.device}: must be cpu or cuda")
    path, summary = run_bench(args)
    print(f"{PROG}: wrote {path} ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
