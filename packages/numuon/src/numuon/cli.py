"""``numuon``: the command line of numuon.

- ``numuon demo --out DIR``: AdamW, Muon and NuMuon train a tiny Llama on synthetic text, then
  SVD compression at 20/40/60%; writes ``DIR/results.json``, ``DIR/report.md``, figures and
  ``DIR/runs.jsonl``. ``--quick`` is the one-minute version.
- ``numuon bench --out DIR``: optimizer step time of NuMuon, Muon and AdamW on several matrix
  sizes and NuMuon's rank ratios, as ratios to Muon, in ``DIR/bench.json``.
- ``numuon compress MODEL --text FILE --out DIR``: held-out loss of any causal LM before and
  after plain and whitened SVD compression, and its stable rank, in ``DIR/results.json``.

Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from numuon import __version__
from paperstack.errors import PaperstackError, cli_guard

PROG = "numuon"
DIST = "numuon"


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers"
        ) from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"{DIST} {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="train with AdamW, Muon, NuMuon; compress; write results")
    demo.add_argument("--out", type=Path, required=True, help="directory for the results")
    demo.add_argument("--quick", action="store_true", help="micro model, few steps (CI smoke run)")
    demo.add_argument("--seed", type=int, default=0, help="offset added to every seed (default 0)")
    demo.add_argument("--seeds", type=_seeds, default=None, help="seeds, e.g. 0,1,2")
    demo.add_argument("--steps", type=int, default=None, help="training steps per run")
    demo.add_argument("--workers", type=int, default=None, help="processes (default: cores, <=2)")
    demo.add_argument(
        "--model",
        default=None,
        help="causal LM id or directory to train further (default: a tiny Llama from a config)",
    )
    demo.add_argument("--dataset", type=Path, default=None, help="UTF-8 text file as the corpus")
    demo.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    demo.add_argument("--resume", action="store_true", help="reuse finished runs in runs.jsonl")

    bench = sub.add_parser("bench", help="optimizer step time, as ratios to Muon")
    bench.add_argument("--out", type=Path, required=True, help="directory for bench.json")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--repeats", type=int, default=20)
    bench.add_argument("--quick", action="store_true", help="small matrices only")
    bench.add_argument("--device", default="cpu")
    bench.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default 1: stable ratios)"
    )

    comp = sub.add_parser("compress", help="loss of a causal LM before/after SVD compression")
    comp.add_argument("model", help="causal LM id or directory (from_pretrained)")
    comp.add_argument("--text", type=Path, required=True, help="UTF-8 text: calibration + eval")
    comp.add_argument("--out", type=Path, required=True, help="directory for results.json")
    comp.add_argument("--reductions", default="0.2,0.4,0.6", help="fractions of params removed")
    comp.add_argument("--seq-len", type=int, default=128)
    comp.add_argument("--device", default="cpu")
    return p


@cli_guard(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "bench":
        return _bench(args)
    if args.command == "compress":
        return _compress(args)
    return _demo(args)


def _device(name: str) -> str:
    import torch

    try:
        dev = torch.device(name)
    except RuntimeError:
        raise PaperstackError(f"--device {name}: not a torch device") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise PaperstackError(f"--device {name}: CUDA is not available here")
    return name


def _demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from numuon.demo import available_cores, build_rows, config_dict, config_for, figures, run_all
    from paperstack.records import (
        JsonlWriter,
        Manifest,
        Results,
        prepare_out_dir,
        read_jsonl,
        write_results,
    )
    from paperstack.report import claims_table, write_report

    out = prepare_out_dir(args.out)
    if args.dataset is not None and not args.dataset.is_file():
        raise PaperstackError(f"--dataset {args.dataset}: no such file")
    device = _device(args.device)
    cfg = config_for(
        args.quick,
        steps=args.steps,
        seeds=args.seeds,
        device=device,
        model=args.model,
        dataset=str(args.dataset) if args.dataset else None,
    )
    cfg = config_for(
        args.quick, **{**config_dict(cfg), "seeds": tuple(s + args.seed for s in cfg.seeds)}
    )
    workers = args.workers or min(2, available_cores())
    if workers < 1:
        raise PaperstackError(f"--workers {workers}: must be >= 1")
    if device != "cpu":
        workers = 1
    manifest = Manifest.collect(
        DIST, __version__, seed=args.seed, config={**config_dict(cfg), "workers": workers}
    )
    console = Console(stderr=True)
    log_path = out / "runs.jsonl"
    done: list[dict[str, Any]] = []
    if args.resume and log_path.exists():
        done = [
            r
            for r in read_jsonl(log_path, allow_torn_tail=True)
            if r.get("config") == config_dict(cfg)
        ]
    elif log_path.exists():
        log_path.unlink()
    total = len(cfg.systems) * len(cfg.seeds)
    started = time.perf_counter()
    with (
        JsonlWriter(log_path) as log,
        console.status(
            f"training {total} runs ({len(done)} reused) on {workers} worker(s)"
        ) as status,
    ):

        def record(res: dict[str, Any]) -> None:
            log.write({**res, "config": config_dict(cfg)})
            status.update(
                f"{res['system']} seed {res['seed']}: held-out loss "
                f"{res['val_loss']:.4f} ({time.perf_counter() - started:.0f}s)"
            )
            console.log(
                f"{res['system']:>7} seed {res['seed']}: loss {res['val_loss']:.4f}, "
                f"stable rank {res['ranks']['stable_rank']:.1f}, "
                f"{res['seconds']:.0f}s training"
            )

        results = run_all(cfg, workers=workers, on_result=record, done=done)
    rows, claims = build_rows(cfg, results)
    results_obj = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results_obj)
    figs = figures(cfg, results, out)
    write_report(
        out,
        results_obj,
        title=f"{DIST} {__version__}: demo" + (" (--quick)" if args.quick else ""),
        intro=(
            f"AdamW, torch.optim.Muon and NuMuon (cosine rank schedule r: {cfg.rank_start} -> "
            f"{cfg.rank_end}) train the same tiny Llama (hidden {cfg.hidden_size}, "
            f"{cfg.num_hidden_layers} layers) for {cfg.steps} steps of {cfg.batch_size}x"
            f"{cfg.seq_len} tokens on synthetic task text, seeds {list(cfg.seeds)}; then every "
            "hidden Linear is replaced by a low-rank pair at 20/40/60% parameter reduction "
            "(plain truncated SVD, and SVD-LLM whitening with "
            f"{cfg.calib_sequences} calibration sequences). Held-out loss in nats/token; means "
            f"over {len(cfg.seeds)} seeds with Student-t 95% intervals. Toy scale, CPU."
        ),
        figures=figs,
    )
    held = sum(c.held for c in claims)
    print(claims_table(claims))
    print(
        f"{PROG}: wrote {out / 'results.json'} and report.md "
        f"({held}/{len(claims)} claims held, {time.perf_counter() - started:.1f}s)"
    )
    return 0


def _bench(args: argparse.Namespace) -> int:
    from numuon.bench import DEFAULT_SIZES, QUICK_SIZES, RANK_RATIOS, run_bench
    from paperstack.records import Manifest, Results, prepare_out_dir, write_results
    from paperstack.report import markdown_table

    if args.repeats < 2:
        raise PaperstackError(f"--repeats {args.repeats}: needs at least 2")
    if args.threads < 1:
        raise PaperstackError(f"--threads {args.threads}: must be >= 1")
    out = prepare_out_dir(args.out)
    device = _device(args.device)
    import torch

    torch.set_num_threads(args.threads)
    sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    config = {
        "sizes": sizes,
        "rank_ratios": RANK_RATIOS,
        "repeats": args.repeats,
        "device": device,
        "threads": args.threads,
    }
    manifest = Manifest.collect(DIST, __version__, seed=args.seed, config=config)
    rows = run_bench(
        sizes,
        RANK_RATIOS,
        args.repeats,
        args.seed,
        device=device,
        progress=lambda s: print(f"{PROG}: bench {s}", flush=True),
    )
    results = Results(manifest=manifest.finish(), rows=rows, claims=[])
    path = write_results(out / "bench.json", results)
    print(markdown_table(rows))
    print(f"{PROG}: wrote {path}")
    return 0


def _compress(args: argparse.Namespace) -> int:
    from numuon.compression import collect_grams, compress
    from numuon.spectra import model_ranks
    from numuon.toy import lm_loss, load_model, load_text_file
    from paperstack.records import Manifest, Results, Row, prepare_out_dir, write_results
    from paperstack.report import markdown_table

    try:
        reductions = [float(x) for x in args.reductions.split(",") if x.strip()]
    except ValueError:
        raise PaperstackError(f"--reductions {args.reductions}: not a list of numbers") from None
    for rho in reductions:
        if not 0 < rho < 1:
            raise PaperstackError(f"--reductions: {rho} must be in (0, 1)")
    out = prepare_out_dir(args.out)
    device = _device(args.device)
    data, _tok = load_text_file(args.text, args.seq_len, 16, 16, args.model)
    data = data.to(device)
    model = load_model(args.model, 0).to(device)  # type: ignore[arg-type]
    manifest = Manifest.collect(DIST, __version__, config=vars(args) | {"out": str(out)})
    ranks = model_ranks(model)
    rows = [
        Row(system="original", metric="loss", value=lm_loss(model, data.val), n=16),
        Row(system="original", metric="stable_rank", value=ranks["stable_rank"]),
        Row(system="original", metric="effective_rank", value=ranks["effective_rank"]),
    ]
    grams = collect_grams(model, data.calib[:, :-1].split(4))
    for method in ("svd", "whitened"):
        for rho in reductions:
            small, _info = compress(model, rho, method, grams=grams)  # type: ignore[arg-type]
            rows.append(
                Row(
                    system=method,
                    metric="loss",
                    value=lm_loss(small, data.val),
                    n=16,
                    split=f"reduce-{round(rho * 100)}%",
                )
            )
    results = Results(manifest=manifest.finish(), rows=rows, claims=[])
    path = write_results(out / "results.json", results)
    print(markdown_table(rows))
    print(f"{PROG}: wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
