"""Optimizer step time of NuMuon against Muon at matched precision, on one matrix at a time.

``torch.optim.Muon`` runs its Newton-Schulz products in bfloat16, unconditionally; NuMuon's
Krylov iteration runs in float32 by default. A ratio of the two mixes the algorithm with the
precision (0.2's bench did, and reported the mean of per-repeat ratios: 13.75x mean, 3.69x
median in one quick run). So every system is timed in both settings, interleaved in one
:func:`paperstack.bench.compare_speed` run per matrix size (each repeat calls every system once,
in a shuffled order, on the same gradient), and each is compared with the Muon of its own
precision:

- **bfloat16**: ``muon`` is ``torch.optim.Muon`` itself; ``muon-ns-bf16`` is the same
  Newton-Schulz step in NuMuon's harness (bit-identical to torch's: an output-check row);
  ``numuon-bf16`` runs its Krylov products in bfloat16 (``matmul_dtype``; QRs and the small SVD
  stay float32, neither has a bfloat16 kernel).
- **float32**: ``muon-fp32`` is torch's algorithm in float32 (:class:`~numuon.NewtonSchulzMuon`
  with ``dtype=float32``: ``torch.optim.Muon`` cannot run in float32); ``numuon-fp32``,
  ``muon-polar`` (the exact polar factor from an SVD, float32 only: LAPACK has no bfloat16
  SVD) and ``adamw``.

Rows per size: each system's step time (median over repeats, order-statistic 95% interval),
and ``time_ratio_vs_muon-<precision>``: the median of the per-repeat ratios
``t_system / t_muon`` (both timed in the same repeat) with its interval: > 1 means slower than
Muon. A second sweep varies NuMuon's rank ratio on the last size, both precisions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["DEFAULT_SIZES", "QUICK_SIZES", "RANK_RATIOS", "run_bench", "systems_for"]

DEFAULT_SIZES: tuple[tuple[int, int], ...] = ((128, 128), (256, 1024), (256, 256), (512, 512))
QUICK_SIZES: tuple[tuple[int, int], ...] = ((64, 64), (64, 256), (128, 128))
RANK_RATIOS: tuple[float, ...] = (1 / 64, 1 / 16, 1 / 4, 1 / 2, 1.0)

#: system -> the Muon of the same precision it is compared with.
MATCHED: dict[str, str] = {
    "muon-ns-bf16": "muon",
    "numuon-bf16": "muon",
    "numuon-fp32": "muon-fp32",
    "muon-polar": "muon-fp32",
    "adamw": "muon-fp32",
}

Factory = Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]


def systems_for(rank: float) -> dict[str, Factory]:
    """Every optimizer of the bench, NuMuon at rank ratio ``rank``."""
    from numuon.baselines import NewtonSchulzMuon
    from numuon.optimizer import NuMuon

    bf16, fp32 = torch.bfloat16, torch.float32
    return {
        "muon": lambda ps: torch.optim.Muon(ps, lr=0.02, weight_decay=0.0),
        "muon-ns-bf16": lambda ps: NewtonSchulzMuon(ps, lr=0.02, dtype=bf16),
        "numuon-bf16": lambda ps: NuMuon(ps, lr=0.02, rank_schedule=rank, matmul_dtype=bf16),
        "muon-fp32": lambda ps: NewtonSchulzMuon(ps, lr=0.02, dtype=fp32),
        "numuon-fp32": lambda ps: NuMuon(ps, lr=0.02, rank_schedule=rank),
        "muon-polar": lambda ps: NuMuon(ps, lr=0.02, rank_schedule=1.0),
        "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
    }


def _stepper(
    make: Factory, shape: tuple[int, int], grads: list[torch.Tensor], device: str
) -> tuple[Callable[[], torch.Tensor], torch.nn.Parameter]:
    """A zero-argument step of a fresh optimizer on a zero ``shape`` parameter; each call takes
    the next gradient of ``grads`` (the same sequence for every system) and returns the
    parameter, so the first call's output is the first step of every system from one state."""
    p = torch.nn.Parameter(torch.zeros(shape, device=device))
    opt = make([p])
    calls = [0]

    def step() -> torch.Tensor:
        p.grad = grads[calls[0] % len(grads)]
        calls[0] += 1
        opt.step()
        return p

    return step, p


def _compare(
    shape: tuple[int, int],
    factories: dict[str, Factory],
    repeats: int,
    seed: int,
    device: str,
) -> tuple[Any, dict[str, torch.Tensor]]:
    from paperstack.bench import compare_speed

    gen = torch.Generator(device=device).manual_seed(seed)
    grads = [torch.randn(shape, generator=gen, device=device) for _ in range(4)]
    steps = {name: _stepper(make, shape, grads, device) for name, make in factories.items()}
    first = {name: step().detach().clone() for name, (step, _) in steps.items()}
    sync = torch.cuda.synchronize if device != "cpu" else None
    cmp = compare_speed(
        {name: step for name, (step, _) in steps.items()},
        baseline="muon",
        repeats=repeats,
        warmup=2,
        check=None,  # different algorithms: the output checks are the rows of run_bench
        sync=sync,
        seed=seed,
    )
    return cmp, first


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp(min=1e-30))


def run_bench(
    sizes: Sequence[tuple[int, int]],
    ratios: Sequence[float],
    repeats: int,
    seed: int,
    device: str = "cpu",
    rank: float = 0.25,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """Rows (see the module docstring) and the raw timings (per size, for the report's config).

    Output checks, on the first step of every system from the same zero matrix and gradient:
    ``muon-ns-bf16`` against ``torch.optim.Muon`` (``max_abs_diff_vs_muon`` and an exact
    ``matches_muon`` proportion: the harness is torch's step), and the relative Frobenius
    difference of each bfloat16 step from its float32 counterpart (what the precision changes).
    """
    from paperstack.records import Row

    rows: list[Row] = []
    raw: dict[str, Any] = {}
    for shape in sizes:
        split = f"{shape[0]}x{shape[1]}"
        if progress:
            progress(f"sizes: {split}")
        cmp, first = _compare(shape, systems_for(rank), repeats, seed, device)
        raw[split] = cmp.to_dict()
        rows += [r for r in cmp.rows(split=split) if r.metric == "time_ms"]
        rows += cmp.pair_rows(MATCHED, split)
        diff = float((first["muon-ns-bf16"] - first["muon"]).abs().max())
        rows.append(Row(system="muon-ns-bf16", metric="max_abs_diff_vs_muon", value=diff,
                        n=1, split=split))  # fmt: skip
        rows.append(Row.proportion("muon-ns-bf16", "matches_muon", int(diff == 0.0), 1,
                                   split=split))  # fmt: skip
        for low, high in (("muon", "muon-fp32"), ("numuon-bf16", "numuon-fp32")):
            rows.append(Row(system=low, metric=f"rel_diff_vs_{high}",
                            value=_rel(first[low], first[high]), n=1, split=split))  # fmt: skip
    big = sizes[-1]
    for rank_ratio in ratios:
        split = f"{big[0]}x{big[1]}@r={rank_ratio:.4g}"
        if progress:
            progress(f"rank: {split}")
        fac = systems_for(rank_ratio)
        keep = ("muon", "numuon-bf16", "muon-fp32", "numuon-fp32")
        cmp, _ = _compare(big, {k: fac[k] for k in keep}, repeats, seed, device)
        raw[split] = cmp.to_dict()
        rows += cmp.pair_rows({k: MATCHED[k] for k in ("numuon-bf16", "numuon-fp32")}, split)
    return rows, raw
