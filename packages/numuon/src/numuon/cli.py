"""``numuon``: the command line of numuon.

- ``numuon demo --out DIR``: AdamW, Muon and NuMuon train a tiny Llama on synthetic text, then
  SVD compression; writes ``DIR/results.json``, ``DIR/report.md``, figures and
  ``DIR/runs.jsonl``. ``--quick`` is the one-minute version.
- ``numuon bench --out DIR``: optimizer step time of NuMuon, Muon and AdamW on several matrix
  sizes and NuMuon's rank ratios, as ratios to Muon, in ``DIR/bench.json``.
- ``numuon compress MODEL --text FILE --out DIR``: held-out loss of any causal LM before and
  after plain and whitened SVD compression, and its stable rank, in ``DIR/results.json``.

The common flags and flow (``--out``, ``--quick``, ``--seed``/``--seeds``, ``--device``,
``--model``, ``--no-progress``) come from :class:`paperstack.contract.ContractCLI`. Heavy imports
stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from numuon import __version__
from paperstack.contract import ContractCLI, Report, Run, check_device, check_model
from paperstack.errors import PaperstackError

cli = ContractCLI("numuon", "numuon", __version__, __doc__)


def positive(args: argparse.Namespace, flag: str, minimum: int = 1) -> int | None:
    """The integer flag ``--flag`` checked in code, so a bad value is one line (argparse would
    add its usage text): ``--seq-len 0: must be >= 1``."""
    value: int | None = getattr(args, flag.lstrip("-").replace("-", "_"))
    if value is not None and value < minimum:
        raise PaperstackError(f"{flag} {value}: must be >= {minimum}")
    return value


def _fractions(flag: str, text: str) -> tuple[float, ...]:
    """``0.2,0.4,0.6``: fractions strictly between 0 and 1, else one line naming the value."""
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise PaperstackError(f"{flag} {text}: not a comma-separated list of numbers") from None
    if not values:
        raise PaperstackError(f"{flag} {text!r}: no numbers")
    for v in values:
        if not 0 < v < 1:
            raise PaperstackError(f"{flag} {text}: {v:g} is not a fraction in (0, 1)")
    return values


#: The reported seeds of the full demo and of ``demo --real`` when neither ``--seeds`` nor a
#: first seed other than 0 is given: fresh seeds never used in development. The toy's regime
#: was picked on seed 0 and NuMuon's setting on seed 7, and the real arm's budget was probed on
#: seed 0, so the 0.2/0.3 runs on seeds 0-2 (0 for --real) are exploratory; 10-12 confirm them
#: with the regime, claims and margins frozen before these seeds ran (CHANGELOG, Design
#: history). ``--quick`` keeps seeds 0-1 (a smoke run, not evidence).
REPORTED_SEEDS = (10, 11, 12)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    for action in p._actions:  # the core's --seeds help says "from --seed"; say what runs here
        if "--seeds" in action.option_strings:
            action.help = (
                "seeds (default: the reported seeds "
                + ",".join(map(str, REPORTED_SEEDS))
                + "; with --seed N > 0, N..N+2; 2 from --seed with --quick)"
            )
    p.add_argument("--steps", type=int, default=None, help="training steps per run")
    p.add_argument(
        "--workers", type=int, default=None, help="processes (default: cores, at most 2)"
    )
    p.add_argument("--dataset", type=Path, default=None, help="UTF-8 text file as the corpus")
    p.add_argument("--resume", action="store_true", help="reuse finished runs in runs.jsonl")
    p.add_argument(
        "--real",
        action="store_true",
        help="the real-model arm: fine-tune SmolLM2-135M-Instruct (or --model) with Muon and "
        "NuMuon, then compress both",
    )


@cli.demo(
    arguments=_demo_arguments,
    seeds=3,
    quick_seeds=2,
    model="causal LM id or directory to train further (default: a tiny Llama from a config)",
    devices=("cpu", "cuda"),
)
def demo(run: Run) -> Report:
    """The reproduction (:mod:`numuon.demo`)."""
    from numuon.demo import run_demo

    positive(run.args, "--steps")
    positive(run.args, "--workers")
    run = with_reported_seeds(run)
    if run.args.real:
        return _real(run)
    return run_demo(run)


def with_reported_seeds(run: Run) -> Run:
    """``run`` on :data:`REPORTED_SEEDS` when it is a full run that named no seeds (no
    ``--seeds``, ``--seed`` left at 0), so the default command reproduces the reported run;
    otherwise unchanged. The report's config records the seeds that ran."""
    from dataclasses import replace

    if run.quick or run.args.seeds is not None or run.args.seed != 0:
        return run
    return replace(run, seed=REPORTED_SEEDS[0], seeds=REPORTED_SEEDS)


def _real(run: Run) -> Report:
    """``numuon demo --real``: :mod:`numuon.real`."""
    from dataclasses import replace

    from numuon.real import QUICK_REAL, REAL, run_real

    cfg = QUICK_REAL if run.quick else REAL
    overrides = {"steps": run.args.steps, "model": run.model, "device": run.device}
    cfg = replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
    rows, claims, config = run_real(cfg, run.seeds, log=run.log)
    return Report(
        rows,
        claims,
        title="numuon: real-model arm" + (" (--quick)" if run.quick else ""),
        intro=(
            f"{cfg.model}: the nn.Linear matrices of the last {cfg.layers} decoder layers "
            f"(7 each) fine-tuned for {cfg.steps} steps of {cfg.batch_size} x {cfg.seq_len} "
            f"tokens of synthetic task text ({', '.join(cfg.tasks)}), the rest frozen, with "
            "Muon (Newton-Schulz in NuMuon's harness: float32 on CPU, bfloat16 on CUDA) and "
            f"NuMuon (constant r = {cfg.rank_end:g}) at lr {cfg.lr:g}, warmup + cosine, "
            f"gradient clipping 1, training seeds {list(run.seeds)} (data order and Krylov "
            "starts; the pretrained weights are the same). Then the trained matrices are "
            "replaced by low-rank pairs (plain SVD and SVD-LLM whitening with "
            f"{cfg.calib_sequences} calibration sequences) and the held-out loss is measured on "
            f"{cfg.val_sequences} sequences (perplexity = exp(loss)). Claims are paired over "
            "training seeds; per-sequence rows (`<arm>/seed<N>`) are descriptive. Budget fixed "
            "before the first run; no tuning."
        ),
        config=config,
    )


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repeats", type=int, default=20, help="timed steps per optimizer")
    p.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default 1: stable ratios)"
    )
    p.add_argument(
        "--sizes",
        default=None,
        help="matrix shapes, e.g. 4096x4096,4096x11008 (default: CPU-sized ones)",
    )


def _shapes(text: str) -> tuple[tuple[int, int], ...]:
    shapes = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        try:
            rows, cols = (int(x) for x in part.split("x"))
        except ValueError:
            raise PaperstackError(f"--sizes {text}: {part!r} is not ROWSxCOLS") from None
        if rows < 2 or cols < 2:
            raise PaperstackError(f"--sizes {text}: {part!r} needs both sides >= 2")
        shapes.append((rows, cols))
    if not shapes:
        raise PaperstackError(f"--sizes {text!r}: no shapes")
    return tuple(shapes)


@cli.bench(arguments=_bench_arguments, devices=("cpu", "cuda"))
def bench(run: Run) -> Report:
    """Optimizer step time against Muon at matched precision (:mod:`numuon.bench`)."""
    from numuon.bench import DEFAULT_SIZES, QUICK_SIZES, RANK_RATIOS, run_bench
    from paperstack.bench import set_threads
    from paperstack.records import Claim

    positive(run.args, "--repeats", 2)
    positive(run.args, "--threads")
    if run.args.sizes is not None:
        sizes = _shapes(run.args.sizes)
    else:
        sizes = QUICK_SIZES if run.quick else DEFAULT_SIZES
    threads = set_threads(run.args.threads)
    with run.progress(len(sizes) + len(RANK_RATIOS), "bench") as bar:
        rows, raw = run_bench(
            sizes,
            RANK_RATIOS,
            run.args.repeats,
            run.seed,
            device=run.device,
            progress=lambda what: bar.advance(at=what),
        )
    biggest = f"{sizes[-1][0]}x{sizes[-1][1]}"
    claims = [
        Claim.compare(
            f"muon_ns_bf16_is_torch_muon_{split}",
            f"NuMuon's harness with bfloat16 Newton-Schulz takes torch.optim.Muon's step "
            f"bit for bit on {split} (the matched-precision Muon control)",
            rows,
            ("muon-ns-bf16", "matches_muon", split),
            "ge",
            1.0,
            exact=True,
        )
        for split in (f"{s[0]}x{s[1]}" for s in sizes)
    ]

    def ratio(system: str, base: str) -> str:
        row = next(
            r for r in rows
            if r.system == system and r.split == biggest and r.metric == f"time_ratio_vs_{base}"
        )  # fmt: skip
        assert row.ci95 is not None
        return f"{row.value:.2f}x [{row.ci95[0]:.2f}, {row.ci95[1]:.2f}]"

    return Report(
        rows,
        claims,
        title=f"numuon {__version__}: optimizer step time at matched precision",
        intro=(
            "Step time of each optimizer on one matrix, interleaved in one process "
            f"(paperstack.bench.compare_speed: {run.args.repeats} repeats, shuffled order, "
            f"{threads} thread(s), {run.device}), as the median of per-repeat ratios to the "
            "Muon of the same precision, with its order-statistic 95% interval (> 1: slower "
            "than Muon). bfloat16: torch.optim.Muon (`muon`), the same step in NuMuon's "
            "harness (`muon-ns-bf16`, checked bit-identical) and NuMuon with bfloat16 Krylov "
            "products (`numuon-bf16`; QR and the small SVD in float32). float32: torch's "
            "Newton-Schulz in float32 (`muon-fp32`, NuMuon's harness: torch.optim.Muon has no "
            "float32 mode), NuMuon (`numuon-fp32`), the exact-SVD polar control (`muon-polar`) "
            "and AdamW. NuMuon at r = 0.25, and its rank sweep on the largest shape. Ratios, "
            "not absolute times; CPU bfloat16 matmuls are slow on CPUs without bfloat16 "
            "instructions, so the two settings answer different questions there."
        ),
        config={
            "sizes": [list(s) for s in sizes],
            "rank_ratios": list(RANK_RATIOS),
            "threads": threads,
            "timings": raw,
        },
        summary=(
            f"On {biggest}, NuMuon (r = 0.25) takes {ratio('numuon-bf16', 'muon')} of "
            f"torch.optim.Muon's step in bfloat16 and {ratio('numuon-fp32', 'muon-fp32')} of "
            "Muon's in float32 (median per-repeat ratio [95% CI])"
        ),
    )


def _compress_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="causal LM id or directory (from_pretrained)")
    p.add_argument("--text", type=Path, required=True, help="UTF-8 text: calibration + eval")
    p.add_argument("--out", type=Path, required=True, help="directory for results.json")
    p.add_argument(
        "--reductions",
        default="0.2,0.4,0.6",
        help="fractions of the hidden matrices' parameters removed (default 0.2,0.4,0.6)",
    )
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")


@cli.command(
    "compress", "held-out loss of a causal LM before/after SVD compression", _compress_arguments
)
def compress_command(args: argparse.Namespace) -> int:
    """``numuon compress MODEL --text FILE --out DIR``."""
    from paperstack.progress import quiet_libraries
    from paperstack.records import Manifest, Results, prepare_out_dir, write_results
    from paperstack.report import markdown_table

    quiet_libraries()
    positive(args, "--seq-len")
    reductions = _fractions("--reductions", args.reductions)
    model = check_model(args.model)
    assert model is not None
    device = check_device(args.device)
    if not args.text.is_file():
        what = "is a directory, not a text file" if args.text.is_dir() else "no such file"
        raise PaperstackError(f"--text {args.text}: {what}")
    out = Path(args.out)
    created = not out.exists()
    out = prepare_out_dir(out)
    try:
        from numuon.demo import compress_rows

        rows = compress_rows(model, args.text, reductions, args.seq_len, device)
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only when still empty
        raise
    config = {
        "model": model,
        "text": str(args.text),
        "reductions": list(reductions),
        "seq_len": args.seq_len,
        "device": device,
    }
    manifest = Manifest.collect("numuon", __version__, config=config)
    path = write_results(out / "results.json", Results(manifest=manifest.finish(), rows=rows))
    print(markdown_table(rows))
    print(f"numuon: wrote {path}")
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
