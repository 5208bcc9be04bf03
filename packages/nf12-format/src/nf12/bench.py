"""``nf12 bench``: speed of NF12 decode and GEMV against BF16 baselines, as ratios.

CPU (always): decode throughput against a BF16 memcpy of the same matrix, and a row-blocked
decode+GEMV in torch (the CPU stand-in for the fused kernel: W is never whole in BF16) against
torch's BF16 matrix-vector product. These are CPU numbers, labelled so; they say nothing about
the paper's GPU headline.

CUDA (``--device cuda``, when a GPU is present): the Triton fused decode+GEMV against cuBLAS
(``torch.nn.functional.linear`` on BF16) and the Triton decode against a device memcpy, across
matrix sizes: the paper's headline measurement. Each ratio is the mean over interleaved repeats
with a 95% interval.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import torch

from nf12 import __version__
from nf12.errors import Nf12Error
from nf12.format import NF12Tensor, decode, encode

__all__ = ["blocked_gemv", "run_bench"]

CPU_SIZES = ((1024, 1024), (4096, 4096), (4096, 11008))
CPU_QUICK = ((512, 512), (1024, 1024))
GPU_SIZES = ((4096, 4096), (8192, 8192), (14336, 4096), (4096, 14336), (16384, 16384))
GPU_QUICK = ((4096, 4096), (8192, 8192))


def blocked_gemv(nt: NF12Tensor, x: torch.Tensor, block_rows: int = 256) -> torch.Tensor:
    """``y = W x`` decoding ``block_rows`` rows at a time (W is never materialised whole)."""
    rows = nt.rows
    ys = []
    for r0 in range(0, rows, block_rows):
        part = NF12Tensor(
            sm=nt.sm[r0 : r0 + block_rows],
            ex=nt.ex[r0 : r0 + block_rows],
            esc=nt.esc,
            shape=(min(block_rows, rows - r0), nt.cols),
            base=nt.base,
            sentinel=nt.sentinel,
            group=nt.group,
        )
        ys.append(decode(part, whole=False) @ x)
    return torch.cat(ys)


def _cpu_time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _cuda_time(fn: Callable[[], object], inner: int = 20) -> float:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(inner):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000.0 / inner


def _measure_cpu(
    w: torch.Tensor, x: torch.Tensor, nt: NF12Tensor, repeats: int
) -> dict[str, list[float]]:
    """Interleaved CPU timings; ratios > 1 mean NF12 is faster than the BF16 baseline."""
    ratios: dict[str, list[float]] = {"decode_vs_memcpy": [], "gemv_vs_bf16": []}
    dst = torch.empty_like(w)
    for _ in range(repeats + 1):
        t_copy = _cpu_time(lambda: dst.copy_(w))
        t_dec = _cpu_time(lambda: decode(nt))
        t_mv = _cpu_time(lambda: w @ x)
        t_gemv = _cpu_time(lambda: blocked_gemv(nt, x))
        ratios["decode_vs_memcpy"].append(t_copy / t_dec)
        ratios["gemv_vs_bf16"].append(t_mv / t_gemv)
    return ratios


def _measure_cuda(
    w: torch.Tensor, x: torch.Tensor, nt: NF12Tensor, repeats: int, split: str
) -> dict[str, list[float]]:
    """Interleaved CUDA timings: Triton decode vs memcpy, fused GEMV vs cuBLAS BF16."""
    from nf12.kernels import decode_triton, gemv_triton

    wd, xd, ntd = w.cuda(), x.cuda(), nt.to("cuda")
    dst = torch.empty_like(wd)
    if not torch.equal(decode_triton(ntd).view(torch.int16), wd.view(torch.int16)):
        raise Nf12Error(f"{split}: Triton decode is not bit-exact on this device")
    ratios: dict[str, list[float]] = {"decode_vs_memcpy": [], "gemv_vs_bf16": []}
    for _ in range(repeats + 1):
        t_copy = _cuda_time(lambda: dst.copy_(wd))
        t_dec = _cuda_time(lambda: decode_triton(ntd))
        t_blas = _cuda_time(lambda: torch.nn.functional.linear(xd[None], wd))
        t_gemv = _cuda_time(lambda: gemv_triton(ntd, xd))
        ratios["decode_vs_memcpy"].append(t_copy / t_dec)
        ratios["gemv_vs_bf16"].append(t_blas / t_gemv)
    return ratios


def run_bench(args: argparse.Namespace) -> tuple[Path, str]:
    """Run the bench for ``args.device`` and write ``bench.json``; return its path and a summary."""
    from paperstack.records import Manifest, Results, Row, prepare_out_dir, write_results
    from paperstack.stats import mean_ci

    out = prepare_out_dir(args.out)
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    sizes: tuple[tuple[int, int], ...]
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise Nf12Error("--device cuda: no CUDA device is visible")
        sizes = GPU_QUICK if args.quick else GPU_SIZES
    else:
        sizes = CPU_QUICK if args.quick else CPU_SIZES
    config = {
        "device": args.device,
        "sizes": [list(s) for s in sizes],
        "repeats": args.repeats,
        "threads": args.threads,
    }
    manifest = Manifest.collect("nf12-format", __version__, seed=args.seed, config=config)
    rows: list[Row] = []
    summary = []
    for n_rows, n_cols in sizes:
        w = (torch.randn(n_rows, n_cols, generator=gen) * 0.02).to(torch.bfloat16)
        x = torch.randn(n_cols, generator=gen).to(torch.bfloat16)
        nt = encode(w)
        split = f"{n_rows}x{n_cols}"
        if args.device == "cuda":
            ratios = _measure_cuda(w, x, nt, args.repeats, split)
            names = ("nf12-triton-decode", "nf12-fused-gemv-vs-cublas")
        else:
            ratios = _measure_cpu(w, x, nt, args.repeats)
            names = ("nf12-cpu-decode", "nf12-cpu-blocked-gemv-vs-torch-bf16")
        for (metric, values), system in zip(ratios.items(), names, strict=True):
            mean, ci = mean_ci(values[1:])  # first round is warm-up
            rows.append(
                Row(
                    system=system,
                    metric=f"speed_ratio_{metric}",
                    value=mean,
                    ci95=ci,
                    n=len(values) - 1,
                    split=split,
                    unit="x",
                )
            )
            summary.append(f"{split} {metric} {mean:.2f}x")
    results = Results(manifest=manifest.finish(), rows=rows, claims=[])
    path = write_results(out / "bench.json", results)
    label = "CPU" if args.device == "cpu" else "CUDA"
    return path, f"{label}: " + ", ".join(summary)
