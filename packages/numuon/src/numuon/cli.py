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


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=int, default=None, help="training steps per run")
    p.add_argument(
        "--workers", type=int, default=None, help="processes (default: cores, at most 2)"
    )
    p.add_argument("--dataset", type=Path, default=None, help="UTF-8 text file as the corpus")
    p.add_argument("--resume", action="store_true", help="reuse finished runs in runs.jsonl")


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
    return run_demo(run)


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
    """Optimizer step time as ratios to ``torch.optim.Muon``, interleaved in one process."""
    import torch

    from numuon.bench import DEFAULT_SIZES, QUICK_SIZES, RANK_RATIOS, run_bench

    positive(run.args, "--repeats", 2)
    positive(run.args, "--threads")
    if run.args.sizes is not None:
        sizes = _shapes(run.args.sizes)
    else:
        sizes = QUICK_SIZES if run.quick else DEFAULT_SIZES
    torch.set_num_threads(run.args.threads)
    with run.progress(len(sizes) + len(RANK_RATIOS), "bench") as bar:
        rows = run_bench(
            sizes,
            RANK_RATIOS,
            run.args.repeats,
            run.seed,
            device=run.device,
            progress=lambda what: bar.advance(at=what),
        )
    biggest = f"{sizes[-1][0]}x{sizes[-1][1]}"
    numuon = next(
        r for r in rows if r.system == "numuon" and r.split == biggest and r.metric.endswith("muon")
    )
    return Report(
        rows,
        title=f"numuon {__version__}: optimizer step time",
        intro=(
            "Median step time of each optimizer over torch.optim.Muon's on the same parameter and "
            f"gradients, interleaved in one process ({run.args.repeats} repeats, "
            f"{run.args.threads} thread(s), {run.device}); NuMuon at r = 0.25, and its rank "
            f"sweep on the largest shape. Ratios, not absolute times."
        ),
        config={"sizes": [list(s) for s in sizes], "rank_ratios": list(RANK_RATIOS)},
        summary=f"NuMuon (r = 0.25) takes {numuon.value:.2f}x Muon's step on {biggest}",
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
