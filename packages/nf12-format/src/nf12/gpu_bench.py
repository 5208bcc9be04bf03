"""``nf12 bench --device cuda``: the Triton fused decode+GEMV against cuBLAS BF16, as ratios."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nf12.errors import Nf12Error
from nf12.format import encode

__all__ = ["GPU_QUICK", "GPU_SIZES", "run_cuda_bench"]

GPU_SIZES = ((4096, 4096), (8192, 8192), (14336, 4096), (4096, 14336), (16384, 16384))
GPU_QUICK = ((4096, 4096), (8192, 8192))


def _cuda_time(fn: Callable[[], object], inner: int = 20) -> float:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(inner):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000.0 / inner


def _measure(
    wd: torch.Tensor, xd: torch.Tensor, ntd: Any, repeats: int
) -> dict[str, dict[int, float]]:
    from nf12.kernels import decode_triton, gemv_triton

    dst = torch.empty_like(wd)
    ratios: dict[str, dict[int, float]] = {"decode_vs_memcpy": {}, "gemv_vs_cublas": {}}
    for i in range(repeats + 1):
        t_copy = _cuda_time(lambda: dst.copy_(wd))
        t_dec = _cuda_time(lambda: decode_triton(ntd))
        t_blas = _cuda_time(lambda: torch.nn.functional.linear(xd[None], wd))
        t_gemv = _cuda_time(lambda: gemv_triton(ntd, xd))
        if i:
            ratios["decode_vs_memcpy"][i] = t_copy / t_dec
            ratios["gemv_vs_cublas"][i] = t_blas / t_gemv
    return ratios


def run_cuda_bench(run: Any) -> Any:
    """Fused GEMV vs cuBLAS and Triton decode vs a device memcpy, per size, paired per repeat."""
    from nf12.kernels import decode_triton
    from paperstack.contract import Report
    from paperstack.records import Row

    repeats = 3 if run.quick else run.args.repeats
    sizes = GPU_QUICK if run.quick else GPU_SIZES
    gen = torch.Generator().manual_seed(run.seed)
    rows: list[Row] = []
    for n_rows, n_cols in sizes:
        w = (torch.randn(n_rows, n_cols, generator=gen) * 0.02).to(torch.bfloat16)
        x = torch.randn(n_cols, generator=gen).to(torch.bfloat16)
        split = f"{n_rows}x{n_cols}"
        wd, xd, ntd = w.to(run.device), x.to(run.device), encode(w).to(run.device)
        if not torch.equal(decode_triton(ntd).view(torch.int16), wd.view(torch.int16)):
            raise Nf12Error(f"{split}: Triton decode is not bit-exact on this device")
        ratios = _measure(wd, xd, ntd, repeats)
        for metric, values in ratios.items():
            rows.append(Row.from_items("nf12-triton", f"speed_ratio_{metric}", values,
                                       split=split, unit="x"))  # fmt: skip
    return Report(rows, title="nf12-format: CUDA bench", config={"sizes": [list(s) for s in sizes]})
