"""``nf12 bench --device cuda``: the paper's GPU measurements, every baseline in the same run.

Per weight shape of a real layer (Llama-3-8B's 4096x4096, 4096x14336 and 14336x4096, and
Llama-3-70B's 8192x28672; rows x columns of ``W``, sigma = 0.02 random BF16 weights, which
behave like trained ones for bandwidth) and batch ``M`` in 1, 2, 4, 8:

- ``cublas``: torch's ``F.linear`` on the BF16 matrix;
- ``nf12``: the fused NF12 decode + GEMV (M = 1) or small-M GEMM (autotuned);
- ``bf16-triton``: the same Triton kernel reading BF16 (autotuned on its own), and
  ``bf16-triton-same-tiling``: that kernel with the tiling the NF12 kernel chose (the paper's
  "matched BF16 kernel");

and per shape the decode: NF12's packed Triton decode, a device memcpy, and a DFloat11-style
Huffman decode on the GPU (ours: the lockstep torch decoder of :mod:`nf12.huffman`, labelled;
the ``dfloat11`` package needs a network install and is not used).

Timing is ``triton.testing.do_bench``: it flushes the L2 cache (writes a 256 MB buffer) before
every call and reports the median. Each repeat times every system once, interleaved; a claim's
interval is over the per-repeat ratios. The achieved fraction of the entropy-bound optimum is
``t_opt / t_nf12`` with ``t_opt = numel * (8 + H) / 8 bytes / B``, ``H`` the weights' exponent
entropy and ``B`` this device's copy bandwidth measured in the same run (2 GiB copy): how close
the fused GEMV gets to a perfect entropy coder running at memory speed (the paper: 71%).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nf12.errors import Nf12Error
from nf12.format import encode, exponent_entropy, exponent_histogram
from nf12.huffman import decode_bundle, encode_bundle

__all__ = ["BATCHES", "CLAIM_SHAPE", "SHAPES", "run_cuda_bench"]

SHAPES = ((4096, 4096), (4096, 14336), (14336, 4096), (8192, 28672))
BATCHES = (1, 2, 4, 8)
QUICK_SHAPES = ((4096, 4096), (4096, 14336))
QUICK_BATCHES = (1, 4)
#: Where the GPU claims are judged, fixed before any run: the most bandwidth-bound shape at
#: batch 1 (the largest quick shape with ``--quick``).
CLAIM_SHAPE = (8192, 28672)


def _ms(fn: Callable[[], object], quick: bool) -> float:
    import triton.testing

    warmup, rep = (5, 20) if quick else (10, 50)
    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep))


def _copy_bandwidth(device: str, quick: bool) -> float:
    """Bytes per second of a device-to-device copy of 2 GiB (read + write counted)."""
    n = 1 << 30  # bf16 elements: 2 GiB
    src = torch.empty(n, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    seconds = _ms(lambda: dst.copy_(src), quick) / 1e3
    return 2 * 2 * n / seconds


def run_cuda_bench(run: Any) -> Any:
    """Every shape and batch; returns the contract's Report with the GPU claims."""
    from nf12 import kernels as k
    from paperstack.contract import Report
    from paperstack.records import Claim, Row

    if k.INTERPRET:
        raise Nf12Error("TRITON_INTERPRET=1 is set: unset it to time the kernels on the GPU")
    quick = run.quick
    repeats = 3 if quick else run.args.repeats
    shapes = QUICK_SHAPES if quick else SHAPES
    batches = QUICK_BATCHES if quick else BATCHES
    claim = shapes[-1] if quick else CLAIM_SHAPE
    device = run.device
    gen = torch.Generator(device=device).manual_seed(run.seed)
    bandwidth = _copy_bandwidth(device, quick)
    rows: list[Row] = [
        Row(system="device", metric="copy_bandwidth_GBps", value=bandwidth / 1e9, n=1,
            unit="GB/s")
    ]  # fmt: skip
    summary = []
    with run.progress(len(shapes), "weight shapes") as bar:
        for n_rows, n_cols in shapes:
            shape = f"{n_rows}x{n_cols}"
            w = (torch.randn(n_rows, n_cols, generator=gen, device=device) * 0.02).bfloat16()
            nt = encode(w)
            if not torch.equal(k.decode_triton(nt).view(torch.int16), w.view(torch.int16)):
                raise Nf12Error(f"{shape}: the Triton decode is not bit-exact on this device")
            entropy = exponent_entropy(exponent_histogram(w).cpu())
            for m in batches:
                x = torch.randn(m, n_cols, generator=gen, device=device).bfloat16()
                times = _time_matmuls(k, nt, w, x, repeats, quick)
                split = f"{shape}-m{m}"
                for base in ("cublas", "bf16-triton", "bf16-triton-same-tiling"):
                    ratios = {i: b / t for i, (b, t) in enumerate(zip(times[base], times["nf12"],
                                                                      strict=True))}  # fmt: skip
                    rows.append(Row.from_items("nf12-triton", f"speedup_vs_{base}", ratios,
                                               split=split, unit="x"))  # fmt: skip
                if m == 1:
                    optimum = w.numel() * (8 + entropy) / 8 / bandwidth * 1e3  # ms
                    rows.append(Row.from_items(
                        "nf12-triton", "fraction_of_entropy_optimum",
                        {i: optimum / t for i, t in enumerate(times["nf12"])}, split=split,
                    ))  # fmt: skip
                    gbps = {i: 1.5 * w.numel() / t / 1e6 for i, t in enumerate(times["nf12"])}
                    rows.append(Row.from_items("nf12-triton", "achieved_GBps", gbps, split=split,
                                               unit="GB/s"))  # fmt: skip
                summary.append(f"{split} {_mean(times['cublas']) / _mean(times['nf12']):.2f}x")
            decode = _time_decoders(k, nt, w, repeats, quick)
            for base in ("huffman-gpu-ours", "memcpy"):
                ratios = {i: b / t for i, (b, t) in enumerate(zip(decode[base], decode["nf12"],
                                                                  strict=True))}  # fmt: skip
                rows.append(Row.from_items("nf12-triton", f"decode_speedup_vs_{base}", ratios,
                                           split=shape, unit="x"))  # fmt: skip
            rows.append(Row(system="bf16", metric="exponent_entropy", value=entropy,
                            n=w.numel(), split=shape, unit="bits"))  # fmt: skip
            del w, nt
            torch.cuda.empty_cache()
            bar.advance()
    at = f"{claim[0]}x{claim[1]}"
    claims = [
        Claim.compare(
            "gpu_gemv_faster_than_matched_bf16",
            f"At {at}, batch 1, the fused NF12 GEMV is faster than the same Triton kernel "
            "reading BF16 with the same tiling (the paper: up to 1.21x).",
            rows, ("nf12-triton", "speedup_vs_bf16-triton-same-tiling", f"{at}-m1"), "gt", 1.0,
        ),
        Claim.compare(
            "gpu_gemv_faster_than_cublas",
            f"At {at}, batch 1, the fused NF12 GEMV is faster than cuBLAS on the BF16 matrix "
            "(the paper: up to 1.35x when bandwidth-bound).",
            rows, ("nf12-triton", "speedup_vs_cublas", f"{at}-m1"), "gt", 1.0,
        ),
        Claim.compare(
            "gpu_decode_faster_than_huffman",
            f"At {at}, NF12's packed decode is faster than a DFloat11-style Huffman decode on "
            "the GPU (ours, the lockstep torch decoder; the paper: 3.3x against DFloat11).",
            rows, ("nf12-triton", "decode_speedup_vs_huffman-gpu-ours", at), "gt", 1.0,
        ),
    ]  # fmt: skip
    config = {
        "shapes": [list(s) for s in shapes],
        "batches": list(batches),
        "repeats": repeats,
        "claim_shape": at,
        "device_name": torch.cuda.get_device_name(device),
    }
    return Report(rows, claims, title="nf12-format: CUDA bench", intro=_INTRO, config=config,
                  summary="cuBLAS/NF12 time: " + ", ".join(summary))  # fmt: skip


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _time_matmuls(
    k: Any, nt: Any, w: torch.Tensor, x: torch.Tensor, repeats: int, quick: bool
) -> dict[str, list[float]]:
    """Milliseconds per call of each system, one value per repeat (autotuned first)."""
    m = x.shape[0]
    if m == 1:
        nf12 = lambda: k.gemv_triton(nt, x[0])  # noqa: E731
        bf16 = lambda: k.bf16_gemv_triton(w, x[0])  # noqa: E731
        name = "gemv"
    else:
        nf12 = lambda: k.gemm_triton(nt, x)  # noqa: E731
        bf16 = lambda: k.bf16_gemm_triton(w, x)  # noqa: E731
        name = "gemm"
    reference = torch.nn.functional.linear(x, w).float()
    got = nf12().reshape(reference.shape)
    torch.testing.assert_close(got, reference, rtol=2e-2, atol=2e-2)  # a wrong kernel is no result
    bf16()
    tiling = k.tuned_config(name)
    same = (lambda: k.bf16_gemv_triton(w, x[0], config=tiling)) if m == 1 else (
        lambda: k.bf16_gemm_triton(w, x, config=tiling))  # fmt: skip
    systems: dict[str, Callable[[], object]] = {
        "cublas": lambda: torch.nn.functional.linear(x, w),
        "nf12": nf12,
        "bf16-triton": bf16,
        "bf16-triton-same-tiling": same,
    }
    times: dict[str, list[float]] = {s: [] for s in systems}
    for _ in range(repeats):
        for system, fn in systems.items():
            times[system].append(_ms(fn, quick))
    return times


def _time_decoders(
    k: Any, nt: Any, w: torch.Tensor, repeats: int, quick: bool
) -> dict[str, list[float]]:
    bundle = encode_bundle([w])
    if not torch.equal(decode_bundle(bundle)[0].view(torch.int16), w.view(torch.int16)):
        raise Nf12Error("the GPU Huffman baseline is not bit-exact on this device")
    dst = torch.empty_like(w)
    systems: dict[str, Callable[[], object]] = {
        "nf12": lambda: k.decode_triton(nt),
        "memcpy": lambda: dst.copy_(w),
        "huffman-gpu-ours": lambda: decode_bundle(bundle),
    }
    times: dict[str, list[float]] = {s: [] for s in systems}
    for _ in range(repeats):
        for system, fn in systems.items():
            times[system].append(_ms(fn, quick))
    return times


_INTRO = (
    "GPU bench: per real layer shape and batch, cuBLAS BF16, the fused NF12 GEMV/GEMM, and the "
    "same Triton kernel reading BF16 (autotuned on its own, and with NF12's tiling), timed with "
    "triton.testing.do_bench (L2 flushed before every call, median), interleaved per repeat; "
    "ratios above 1 mean NF12 is faster. Decode: NF12's packed Triton decode against a device "
    "memcpy and a DFloat11-style Huffman decode on the GPU (ours, torch; not the dfloat11 "
    "package). fraction_of_entropy_optimum = time an ideal entropy coder would need at this "
    "device's copy bandwidth / the NF12 GEMV's time."
)
