"""``nf12 bench``: speed of NF12 decode and GEMV against its baselines, as same-run ratios.

CPU (the default): per matrix size, two :func:`paperstack.bench.compare_speed` runs
(interleaved repeats in shuffled order, medians of per-repeat ratios with order-statistic
intervals, outputs checked bit for bit against the baseline's in the same run): the decoders
(a BF16 memcpy, the NF12 decode, the DFloat11-style Huffman decode) and the GEMVs (torch's BF16
``W @ x``, a row-blocked NF12 decode+GEMV: the CPU stand-in for the fused kernel, ``W`` is never
whole in BF16). These are CPU numbers of the torch reference path, labelled so: the paper's
speed claims are about a fused GPU kernel, and the claims use the paper's numbers.

CUDA (``--device cuda``): see :mod:`nf12.gpu_bench`.
"""

from __future__ import annotations

from typing import Any

import torch

from nf12.format import NF12Tensor, decode, encode
from nf12.huffman import decode_bundle, encode_bundle

__all__ = ["CPU_QUICK", "CPU_SIZES", "blocked_gemv", "cpu_systems", "run_bench"]

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


def cpu_systems(w: torch.Tensor, x: torch.Tensor) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two CPU comparisons on one matrix: decodes (baseline: a BF16 memcpy, every decoder
    bit-exact against it) and GEMVs (baseline: torch's BF16 ``W @ x``)."""
    nt = encode(w)
    bundle = encode_bundle([w])
    dst = torch.empty_like(w)
    decodes = {
        "memcpy": lambda: dst.copy_(w),
        "nf12-decode": lambda: decode(nt),
        "huffman-decode": lambda: decode_bundle(bundle)[0],
    }
    gemvs = {"bf16-gemv": lambda: w @ x, "nf12-gemv": lambda: blocked_gemv(nt, x)}
    return decodes, gemvs


def run_bench(run: Any) -> Any:
    """The bench for ``run.device``; returns the contract's Report (rows, claims, summary)."""
    if run.device.startswith("cuda"):
        from nf12.gpu_bench import run_cuda_bench

        return run_cuda_bench(run)
    return _run_cpu(run)


def _run_cpu(run: Any) -> Any:
    from paperstack.bench import compare_speed, median_ci, set_threads
    from paperstack.contract import Report
    from paperstack.records import Claim, Row

    threads = set_threads(run.args.threads)
    repeats = 6 if run.quick else max(run.args.repeats, 6)
    sizes = CPU_QUICK if run.quick else CPU_SIZES
    claim_size = sizes[-1] if run.quick else CLAIM_SIZE
    gen = torch.Generator().manual_seed(run.seed)
    rows: list[Row] = []
    summary = []
    measured: dict[str, Any] = {}
    with run.progress(len(sizes), "matrix sizes") as bar:
        for n_rows, n_cols in sizes:
            w = (torch.randn(n_rows, n_cols, generator=gen) * 0.02).to(torch.bfloat16)
            x = torch.randn(n_cols, generator=gen).to(torch.bfloat16)
            split = f"{n_rows}x{n_cols}"
            decodes, gemvs = cpu_systems(w, x)
            dec = compare_speed(decodes, baseline="memcpy", repeats=repeats, warmup=1,
                                check="exact", seed=run.seed)  # fmt: skip
            gemv = compare_speed(gemvs, baseline="bf16-gemv", repeats=repeats, warmup=1,
                                 check="exact", seed=run.seed + 1)  # fmt: skip
            rows += dec.rows(split=split) + gemv.rows(split=split)
            vs_huffman = [h / n for h, n in zip(dec.times["huffman-decode"],
                                                dec.times["nf12-decode"], strict=True)]  # fmt: skip
            med, ci = median_ci(vs_huffman)
            rows.append(Row(system="nf12-decode", metric="speedup_vs_huffman-decode", value=med,
                            ci95=ci, n=len(vs_huffman), split=split, unit="x"))  # fmt: skip
            measured[split] = {"decode": dec.to_dict(), "gemv": gemv.to_dict()}
            summary.append(f"{split} decode/huffman {med:.2f}x, "
                           f"gemv/bf16 {gemv.speedup('nf12-gemv')[0]:.3f}x")  # fmt: skip
            bar.advance()
    at = f"{claim_size[0]}x{claim_size[1]}"
    decode_exact = Claim.compare(
        "cpu_decode_bit_exact", f"At {at}, the NF12 decode is bit-identical to the BF16 matrix, "
        "in the timed run (the Huffman decode's check is its own row).",
        rows, ("nf12-decode", "matches_memcpy", at), "ge", 1.0, exact=True,
    )  # fmt: skip
    gemv_exact = Claim.compare(
        "cpu_gemv_bit_exact", f"At {at}, the row-blocked NF12 decode+GEMV output is "
        "bit-identical to torch's BF16 W @ x, in the timed run.",
        rows, ("nf12-gemv", "matches_bf16-gemv", at), "ge", 1.0, exact=True,
    )  # fmt: skip
    claims = [
        decode_exact,
        gemv_exact,
        Claim.compare(
            "cpu_decode_3_3x_huffman",
            f"On this CPU ({at}, {threads} thread(s)), NF12 decodes at least 3.3x as fast as "
            "the DFloat11-style Huffman exponent decoder (the paper's GPU figure against "
            "DFloat11, tried on the torch CPU path).",
            rows, ("nf12-decode", "speedup_vs_huffman-decode", at), "ge", 3.3,
            requires=[decode_exact],
        ),
        Claim.compare(
            "cpu_gemv_1_35x_bf16",
            f"On this CPU ({at}), the row-blocked NF12 decode+GEMV is at least 1.35x torch's "
            "BF16 W @ x (the paper's fused-GEMV figure against cuBLAS, tried on the CPU "
            "reference path; not the paper's GPU kernel).",
            rows, ("nf12-gemv", "speedup_vs_bf16-gemv", at), "ge", 1.35, requires=[gemv_exact],
        ),
    ]  # fmt: skip
    config = {"sizes": [list(s) for s in sizes], "repeats": repeats, "claim_size": at,
              "threads": threads, "measured": measured}  # fmt: skip
    return Report(rows, claims, title="nf12-format: CPU bench", config=config,
                  intro=_CPU_INTRO.format(repeats=repeats, threads=threads),
                  summary="CPU: " + "; ".join(summary))  # fmt: skip


_CPU_INTRO = (
    "CPU bench of the torch reference path (paperstack.bench): per matrix size (sigma = 0.02 "
    "random BF16 weights), {repeats} interleaved repeats in shuffled order on {threads} "
    "thread(s), after a warm-up: the decoders (a BF16 memcpy, the NF12 decode, the "
    "DFloat11-style Huffman decode; each output bit-exact against the memcpy's) and the GEMVs "
    "(torch's BF16 W @ x, a row-blocked NF12 decode+GEMV; bit-exact against W @ x). Speed-ups "
    "are medians of per-repeat ratios (above 1: NF12 faster) with order-statistic 95% "
    "intervals; claims at the paper's numbers. Timings on a shared CPU; these say nothing about "
    "the paper's fused GPU kernel."
)
