"""Optimizer step time of NuMuon against Muon and AdamW, on one matrix at a time.

For each matrix size every optimizer steps the same parameter with the same random gradients
in the same process, interleaved, so machine load hits them alike; a report gives the ratio of
each step time to Muon's (``torch.optim.Muon``) per repeat, not absolute times. A second sweep
varies NuMuon's rank ratio on one size, to show how the cost scales with ``k``: the Krylov
block has ``k + p`` columns, so until it reaches the exact-SVD switch the cost grows with ``k``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["DEFAULT_SIZES", "QUICK_SIZES", "RANK_RATIOS", "step_times"]

DEFAULT_SIZES: tuple[tuple[int, int], ...] = ((128, 128), (256, 1024), (256, 256), (512, 512))
QUICK_SIZES: tuple[tuple[int, int], ...] = ((64, 64), (64, 256), (128, 128))
RANK_RATIOS: tuple[float, ...] = (1 / 64, 1 / 16, 1 / 4, 1 / 2, 1.0)

Factory = Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]


def _factories(rank: float) -> dict[str, Factory]:
    from numuon.baselines import NewtonSchulzMuon
    from numuon.optimizer import NuMuon

    return {
        "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
        "muon": lambda ps: torch.optim.Muon(ps, lr=0.02),
        "muon-ns": lambda ps: NewtonSchulzMuon(ps, lr=0.02),
        "muon-polar": lambda ps: NuMuon(ps, lr=0.02, rank_schedule=1.0),
        "numuon": lambda ps: NuMuon(ps, lr=0.02, rank_schedule=rank),
    }


def step_times(
    shape: tuple[int, int],
    factories: dict[str, Factory],
    repeats: int,
    warmup: int = 3,
    seed: int = 0,
    device: str = "cpu",
) -> dict[str, list[float]]:
    """Seconds per ``step()`` of each optimizer on one ``shape`` parameter, interleaved."""
    gen = torch.Generator(device=device).manual_seed(seed)
    grads = [torch.randn(shape, generator=gen, device=device) for _ in range(4)]
    params = {name: torch.nn.Parameter(torch.zeros(shape, device=device)) for name in factories}
    opts = {name: make([params[name]]) for name, make in factories.items()}
    times: dict[str, list[float]] = {name: [] for name in factories}
    for i in range(warmup + repeats):
        for name, opt in opts.items():
            params[name].grad = grads[i % len(grads)]
            if device != "cpu":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            opt.step()
            if device != "cpu":
                torch.cuda.synchronize()
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times


def run_bench(
    sizes: Sequence[tuple[int, int]],
    ratios: Sequence[float],
    repeats: int,
    seed: int,
    device: str = "cpu",
    rank: float = 0.25,
    progress: Callable[[str], None] | None = None,
) -> list[Any]:
    """Rows: per size, each optimizer's step time over Muon's, per repeat (the two timed
    back to back on the same gradient, so load hits both alike): the mean of those ratios with
    its interval over repeats; per rank ratio, NuMuon's over Muon's on the last size."""
    import numpy as np

    from paperstack.records import Row

    rows: list[Row] = []

    def ratio_row(system: str, num: list[float], den: list[float], split: str) -> Row:
        ratios = {i: a / b for i, (a, b) in enumerate(zip(num, den, strict=True))}
        return Row.from_items(system, "step_time_vs_muon", ratios, split=split, unit="ratio")

    for shape in sizes:
        split = f"{shape[0]}x{shape[1]}"
        if progress:
            progress(f"sizes: {split}")
        times = step_times(shape, _factories(rank), repeats, seed=seed, device=device)
        for name in times:
            rows.append(ratio_row(name, times[name], times["muon"], split))
        rows.append(
            Row(
                system="muon",
                metric="step_ms",
                value=1e3 * float(np.median(times["muon"])),
                n=repeats,
                split=split,
                unit="ms",
            )
        )
    big = sizes[-1]
    for rank_ratio in ratios:
        split = f"{big[0]}x{big[1]}@r={rank_ratio:.4g}"
        if progress:
            progress(f"rank: {split}")
        fac = _factories(rank_ratio)
        times = step_times(
            big, {"muon": fac["muon"], "numuon": fac["numuon"]}, repeats, seed=seed, device=device
        )
        rows.append(ratio_row("numuon", times["numuon"], times["muon"], split))
    return rows
