"""``nf12 bench``: speed of NF12 decode and GEMV against its baselines, as same-run ratios.

CPU (the default): per matrix size, every repeat runs back to back a BF16 memcpy, the NF12
decode, the DFloat11-style Huffman decode, torch's BF16 ``W @ x`` and a row-blocked NF12
decode+GEMV (the CPU stand-in for the fused kernel: ``W`` is never whole in BF16). The ratios
are per repeat, so the claims are paired over repeats. These are CPU numbers of the torch
reference path, labelled so: the paper's speed claims are about a fused GPU kernel.

CUDA (``--device cuda``): see :mod:`nf12.gpu_bench`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from nf12.format import NF12Tensor, decode, encode
from nf12.huffman import decode_bundle, encode_bundle

__all__ = ["CPU_QUICK", "CPU_SIZES", "blocked_gemv", "run_bench"]

CPU_SIZES = ((1024, 1024), (4096, 4096), (4096, 11008))
CPU_QUICK = ((512, 512), (1024, 1024))
#: The size the CPU claims are judged on, fixed before any run (the largest quick size in
#: ``--quick``): big enough to leave the caches, small enough for the Huffman baseline.
CLAIM_SIZE = (4096, 4096)


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
        ys.append(decode(part, whole=False, check=False) @ x)
    return torch.cat(ys)


def _cpu_time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_cpu(w: torch.Tensor, x: torch.Tensor, repeats: int) -> dict[str, list[float]]:
    """Per-repeat speed ratios on one matrix (above 1: NF12 is faster than the baseline)."""
    nt = encode(w)
    bundle = encode_bundle([w])
    dst = torch.empty_like(w)
    runs: dict[str, Callable[[], object]] = {
        "memcpy": lambda: dst.copy_(w),
        "nf12_decode": lambda: decode(nt),
        "huffman_decode": lambda: decode_bundle(bundle),
        "bf16_gemv": lambda: w @ x,
        "nf12_gemv": lambda: blocked_gemv(nt, x),
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    for i in range(repeats + 1):  # round 0 warms the caches and is not kept
        for key, fn in runs.items():
            seconds = _cpu_time(fn)
            if i:
                times[key].append(seconds)

    def ratio(base: str, ours: str) -> list[float]:
        return [b / o for b, o in zip(times[base], times[ours], strict=True)]

    return {
        "decode_vs_huffman": ratio("huffman_decode", "nf12_decode"),
        "decode_vs_memcpy": ratio("memcpy", "nf12_decode"),
        "gemv_vs_bf16": ratio("bf16_gemv", "nf12_gemv"),
    }


def run_bench(run: Any) -> Any:
    """The bench for ``run.device``; returns the contract's Report (rows, claims, summary)."""
    if run.device.startswith("cuda"):
        from nf12.gpu_bench import run_cuda_bench

        return run_cuda_bench(run)
    return _run_cpu(run)


def _run_cpu(run: Any) -> Any:
    from paperstack.contract import Report
    from paperstack.records import Claim, Row

    torch.set_num_threads(run.args.threads)
    repeats = 3 if run.quick else run.args.repeats
    sizes = CPU_QUICK if run.quick else CPU_SIZES
    claim_size = sizes[-1] if run.quick else CLAIM_SIZE
    gen = torch.Generator().manual_seed(run.seed)
    rows: list[Row] = []
    summary = []
    with run.progress(len(sizes), "matrix sizes") as bar:
        for n_rows, n_cols in sizes:
            w = (torch.randn(n_rows, n_cols, generator=gen) * 0.02).to(torch.bfloat16)
            x = torch.randn(n_cols, generator=gen).to(torch.bfloat16)
            split = f"{n_rows}x{n_cols}"
            for metric, values in measure_cpu(w, x, repeats).items():
                rows.append(
                    Row.from_items("nf12-cpu", f"speed_ratio_{metric}", dict(enumerate(values)),
                                   split=split, unit="x")
                )  # fmt: skip
                summary.append(f"{split} {metric} {sum(values) / len(values):.2f}x")
            bar.advance()
    split = f"{claim_size[0]}x{claim_size[1]}"
    claims = [
        Claim.compare(
            "cpu_decode_faster_than_huffman",
            f"On this CPU ({split}, one thread), NF12 decodes faster than the DFloat11-style "
            "Huffman exponent decoder (per-repeat speed ratio above 1).",
            rows, ("nf12-cpu", "speed_ratio_decode_vs_huffman", split), "gt", 1.0,
        ),
        Claim.compare(
            "cpu_decode_keeps_up_with_memcpy",
            f"On this CPU ({split}), the torch NF12 decode is at least as fast as a BF16 memcpy "
            "of the same matrix (the paper's bandwidth argument, tried on the CPU reference "
            "path; not the paper's GPU kernel).",
            rows, ("nf12-cpu", "speed_ratio_decode_vs_memcpy", split), "ge", 1.0,
        ),
        Claim.compare(
            "cpu_gemv_keeps_up_with_bf16",
            f"On this CPU ({split}), the row-blocked NF12 decode+GEMV is at least as fast as "
            "torch's BF16 W @ x (the paper's fused-GEMV claim, tried on the CPU reference "
            "path; not the paper's GPU kernel).",
            rows, ("nf12-cpu", "speed_ratio_gemv_vs_bf16", split), "ge", 1.0,
        ),
    ]  # fmt: skip
    config = {"sizes": [list(s) for s in sizes], "repeats": repeats, "claim_size": split}
    return Report(rows, claims, title="nf12-format: CPU bench", config=config,
                  intro=_CPU_INTRO.format(repeats=repeats, threads=run.args.threads),
                  summary="CPU: " + ", ".join(summary))  # fmt: skip


_CPU_INTRO = (
    "CPU bench of the torch reference path: per matrix size (sigma = 0.02 random BF16 weights), "
    "{repeats} interleaved repeats on {threads} thread(s) of a BF16 memcpy, the NF12 decode, the "
    "DFloat11-style Huffman decode, torch's BF16 W @ x and a row-blocked NF12 decode+GEMV. "
    "Every value is a same-run speed ratio (above 1: NF12 faster), paired per repeat. Timings "
    "were taken on a shared CPU. These say nothing about the paper's fused GPU kernel."
)
