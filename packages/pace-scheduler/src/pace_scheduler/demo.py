"""The reproduction behind ``pace demo``.

1. Profile this machine: a tiny Qwen3-style model's decode and prefill steps, the latency model
   fitted to them (its R², claim ``predictor_r2_ge_0_9``).
2. A load sweep on the H200 / Qwen3-32B latency model (spec-derived: the paper's setting,
   simulated) and one on the CPU-calibrated model: every policy at every load on the same
   requests per seed. The best fixed cap is chosen on validation seeds that are not reported.
3. Rows keep per-seed values, and every claim (premises first) is judged on the interval of the
   paired difference (:mod:`pace_scheduler.summary`).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from pace_scheduler.latency import H200_QWEN3_32B, LatencyModel
from pace_scheduler.profile import QUICK_PROFILE, ProfileConfig
from pace_scheduler.simulator import EngineConfig
from pace_scheduler.summary import best_cap, claims_for, group, rows_for
from pace_scheduler.sweep import SweepSpec, describe, run_sweep
from pace_scheduler.workload import WorkloadConfig
from paperstack.records import Claim, Row, atomic_write

__all__ = ["DemoPlan", "figures", "plan", "sweep_claims"]

#: Baselines and Pace in every sweep (pace-amortized: an ablation of the slack definition).
CORE_POLICIES = ("irp-off", "irp-eager", "pace", "pace-amortized")
#: The fixed-cap grid of the simulated H200 engine: per request and global.
H200_CAPS = ("cap-2", "cap-4", "global-64")
#: Seeds the best fixed cap is chosen on; never reported.
VALIDATION_SEEDS = (100, 101)


@dataclass(frozen=True)
class DemoPlan:
    """Sizes of one demo run (full or ``--quick``)."""

    loads: tuple[float, ...]
    medium: float
    n_requests: int
    profile: ProfileConfig
    validation_seeds: tuple[int, ...] = VALIDATION_SEEDS


def plan(quick: bool) -> DemoPlan:
    if quick:
        return DemoPlan(loads=(0.5, 1.0, 1.5), medium=1.0, n_requests=120, profile=QUICK_PROFILE,
                        validation_seeds=(100,))  # fmt: skip
    return DemoPlan(
        loads=(0.5, 0.75, 1.0, 1.25, 1.5), medium=1.0, n_requests=400, profile=ProfileConfig()
    )


def h200_spec(
    p: DemoPlan, seeds: Sequence[int], workload: WorkloadConfig | None = None
) -> SweepSpec:
    hw = H200_QWEN3_32B
    wl = workload or WorkloadConfig()
    return SweepSpec(
        name="h200",
        model=hw.latency_model(),
        engine=EngineConfig(kv_blocks=hw.kv_tokens() // 16, branch_len_hint=wl.branch_mean),
        workload=replace(wl, n_requests=p.n_requests),
        loads=p.loads,
        seeds=tuple(seeds),
        policies=CORE_POLICIES + H200_CAPS,
    )


#: The CPU sweep's workload: the embedded one with lengths divided by 4 (same branch counts,
#: fork fraction and shape), so contexts stay inside the profiled range.
CPU_WORKLOAD = WorkloadConfig(prompt_mean=128.0, serial_mean=32.0, branch_mean=64.0)


def cpu_spec(
    p: DemoPlan, model: LatencyModel, seeds: Sequence[int], name: str = "cpu"
) -> SweepSpec:
    """The same engine and policies on the latency model fitted to this machine's steps."""
    wl = CPU_WORKLOAD
    return SweepSpec(
        name=name,
        model=model,
        engine=EngineConfig(kv_blocks=13_000, branch_len_hint=wl.branch_mean),
        workload=replace(wl, n_requests=p.n_requests),
        loads=p.loads,
        seeds=tuple(seeds),
        policies=CORE_POLICIES + H200_CAPS,
    )


def run_with_validation(
    spec: SweepSpec,
    validation_seeds: Sequence[int],
    caps: Sequence[str],
    workers: int,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
    """The validation runs (fixed caps only, on seeds that are not reported) pick the cap; then
    the reported sweep. Returns the reported records, the chosen cap, the sweep's config."""
    validation = replace(spec, seeds=tuple(validation_seeds), policies=tuple(caps))
    chosen = best_cap(run_sweep(validation, workers=workers, on_result=on_result), caps)
    records = run_sweep(spec, workers=workers, on_result=on_result)
    config = describe(spec)
    config["validation_seeds"] = list(validation_seeds)
    config["best_fixed_cap_on_validation"] = chosen
    return records, chosen, config


def sweep_claims(
    records: Sequence[dict[str, Any]],
    spec: SweepSpec,
    medium: float,
    chosen_cap: str,
    caps: Sequence[str],
    label: str,
) -> tuple[list[Row], list[Claim]]:
    rows = rows_for(records, spec.name, caps)
    claims = claims_for(
        rows, spec.name, loads=spec.loads, medium=medium, chosen_cap=chosen_cap, label=label
    )
    return rows, claims


def figures(records: Sequence[dict[str, Any]], out: Path, sweeps: Sequence[str]) -> list[Path]:
    """``goodput_vs_load.png`` and ``attainment_vs_load.png``: one panel per sweep, means over
    the reported seeds; Pace drawn thick, fixed caps thin and grey-ish."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    paths = []
    for key, label, fname in (
        ("goodput", "goodput (SLO-met requests/s)", "goodput_vs_load.png"),
        ("attainment", "SLO attainment", "attainment_vs_load.png"),
    ):
        fig, axes = plt.subplots(
            1, len(sweeps), figsize=(5.4 * len(sweeps), 3.8), dpi=110, squeeze=False
        )
        for ax, sweep in zip(axes[0], sweeps, strict=True):
            recs = [r for r in records if r["sweep"] == sweep]
            by = group(recs, "policy", "load")
            loads = sorted({r["load"] for r in recs})
            for pol in dict.fromkeys(r["policy"] for r in recs):
                ys = [np.mean([r[key] for r in by.get((pol, ld), [])] or [np.nan]) for ld in loads]
                cap = pol.startswith(("cap-", "global-"))
                ax.plot(
                    loads,
                    ys,
                    marker="o" if not cap else ".",
                    label=pol,
                    lw=2.4 if pol == "pace" else (0.8 if cap else 1.4),
                    alpha=0.55 if cap else 1.0,
                )
            ax.set_xlabel("load (x SLO capacity)")
            ax.set_ylabel(label)
            ax.set_title(sweep)
            if key == "attainment":
                ax.axhline(0.95, color="grey", ls=":", lw=1)
            ax.grid(alpha=0.3)
        axes[0][-1].legend(fontsize=6, loc="best", ncol=2)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        paths.append(atomic_write(out / fname, buf.getvalue()))
    return paths
