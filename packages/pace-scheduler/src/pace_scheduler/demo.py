"""The reproduction: load sweeps on an H200-class and a CPU-calibrated latency model.

1. ``pace profile`` on this machine: a tiny Qwen3-style model's decode and prefill steps, the
   latency model fitted to them, its R² (claim ``predictor_r2_ge_0_9``).
2. A load sweep on the H200 / Qwen3-32B latency model (the paper's setting, simulated) and one
   on the CPU-calibrated model: goodput, SLO attainment, p50/p99 per-token latency and mean
   branch width per policy and load, means over seeds with Student-t 95% intervals.
3. Claims on the H200 sweep, computed from the rows: Pace's goodput over IRP-Off (>= 1.3x) and
   over IRP-Eager (>= 1.2x) at the medium load (the middle of the sweep, 1.0x capacity), Pace's
   attainment >= 95% wherever any policy reaches 95%, and Pace's goodput averaged over the sweep
   above the best fixed cap's.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from pace_scheduler.latency import H200_QWEN3_32B, LatencyModel
from pace_scheduler.profile import QUICK_PROFILE, ProfileConfig
from pace_scheduler.simulator import EngineConfig
from pace_scheduler.sweep import POLICIES, SweepSpec, describe, group, run_sweep
from pace_scheduler.workload import WorkloadConfig
from paperstack.records import Claim, Row, atomic_write

__all__ = ["DemoPlan", "build_claims", "build_rows", "figures", "plan"]

FIXED_CAPS = tuple(p for p in POLICIES if p.startswith(("cap-", "global-")))


@dataclass(frozen=True)
class DemoPlan:
    """Sizes of one demo run (full or ``--quick``)."""

    loads: tuple[float, ...]
    medium: float
    seeds: tuple[int, ...]
    cpu_seeds: tuple[int, ...]
    n_requests: int
    profile: ProfileConfig


def plan(quick: bool) -> DemoPlan:
    if quick:
        return DemoPlan(
            loads=(0.5, 1.0, 1.5),
            medium=1.0,
            seeds=(0, 1),
            cpu_seeds=(0,),
            n_requests=120,
            profile=QUICK_PROFILE,
        )
    return DemoPlan(
        loads=(0.5, 0.75, 1.0, 1.25, 1.5),
        medium=1.0,
        seeds=(0, 1, 2),
        cpu_seeds=(0, 1, 2),
        n_requests=400,
        profile=ProfileConfig(),
    )


def h200_spec(p: DemoPlan, workload: WorkloadConfig | None = None) -> SweepSpec:
    hw = H200_QWEN3_32B
    wl = workload or WorkloadConfig()
    return SweepSpec(
        name="h200",
        model=hw.latency_model(),
        engine=EngineConfig(kv_blocks=hw.kv_tokens() // 16, branch_len_hint=wl.branch_mean),
        workload=replace(wl, n_requests=p.n_requests),
        loads=p.loads,
        seeds=p.seeds,
    )


#: The CPU sweep's workload: the embedded one with lengths divided by 4 (same branch counts,
#: fork fraction and shape), so contexts stay inside the profiled range (<= 1024 tokens in
#: ``--quick``) instead of extrapolating the fitted model, and runs take 4x fewer steps.
CPU_WORKLOAD = WorkloadConfig(prompt_mean=128.0, serial_mean=32.0, branch_mean=64.0)


def cpu_spec(
    p: DemoPlan,
    model: LatencyModel,
    workload: WorkloadConfig | None = None,
    name: str = "cpu",
) -> SweepSpec:
    """The same engine and policies on the latency model fitted to this machine's steps."""
    wl = workload or CPU_WORKLOAD
    return SweepSpec(
        name=name,
        model=model,
        engine=EngineConfig(kv_blocks=13_000, branch_len_hint=wl.branch_mean),
        workload=replace(wl, n_requests=p.n_requests),
        loads=p.loads,
        seeds=p.cpu_seeds,
    )


def split_name(sweep: str, load: float) -> str:
    return f"{sweep}@{load:.2f}x"


def _mean_row(
    system: str, metric: str, split: str, values: Sequence[float], unit: str | None
) -> Row:
    from paperstack.stats import mean_ci

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return Row(system=system, metric=metric, value=0.0, n=0, split=split, unit=unit)
    mean, (lo, hi) = mean_ci(v)
    # a t-interval over 2-3 seeds can leave the metric's range; clip it to the range
    lo, hi = max(lo, 0.0), (min(hi, 1.0) if metric == "slo_attainment" else hi)
    ci = (min(lo, mean), max(hi, mean))
    return Row(
        system=system, metric=metric, value=mean, ci95=ci, n=int(v.size), split=split, unit=unit
    )


def _ratio_row(pace: dict[int, float], base: dict[int, float], name: str, split: str) -> Row:
    """Pace's mean goodput over ``name``'s at one load, with a paired bootstrap 95% interval.

    The value is the ratio of the two mean goodputs (what a reader gets from the goodput rows);
    the interval resamples seeds with replacement, keeping each seed's pair (same requests)
    together. Zero when the baseline's goodput is zero.
    """
    seeds = sorted(set(pace) & set(base))
    a = np.array([pace[s] for s in seeds])
    b = np.array([base[s] for s in seeds])
    metric = f"goodput_ratio_vs_{name}"
    if not seeds or b.sum() <= 0:
        return Row(system="pace", metric=metric, value=0.0, n=len(seeds), split=split, unit="x")
    idx = np.random.default_rng(0).integers(0, len(seeds), (2000, len(seeds)))
    num, den = a[idx].sum(axis=1), b[idx].sum(axis=1)
    boot = num[den > 0] / den[den > 0]
    value = float(a.sum() / b.sum())
    lo, hi = (float(v) for v in np.quantile(boot, [0.025, 0.975]))
    return Row(
        system="pace",
        metric=metric,
        value=value,
        ci95=(min(lo, value), max(hi, value)),
        n=len(seeds),
        split=split,
        unit="x",
    )


METRICS = (
    ("goodput", "goodput", "req/s"),
    ("attainment", "slo_attainment", None),
    ("p50_tpot_ms", "p50_token_latency", "ms"),
    ("p99_tpot_ms", "p99_token_latency", "ms"),
    ("mean_width", "mean_branch_width", None),
)


def build_rows(records: Sequence[dict[str, Any]], sweep: str, medium: float) -> list[Row]:
    """Per (policy, load): the metrics above; plus Pace's goodput ratios over IRP-Off and
    IRP-Eager at every load, each policy's sweep-mean goodput, Pace's worst attainment where 95%
    was reachable, and the controller's decision time."""
    recs = [r for r in records if r["sweep"] == sweep]
    rows: list[Row] = []
    by = group(recs, "policy", "load")
    loads = sorted({r["load"] for r in recs})
    policies = [p for p in POLICIES if any(r["policy"] == p for r in recs)]
    for load in loads:
        for pol in policies:
            rs = by.get((pol, load), [])
            for key, metric, unit in METRICS:
                rows.append(
                    _mean_row(pol, metric, split_name(sweep, load), [r[key] for r in rs], unit)
                )
        pace = {r["seed"]: r["goodput"] for r in by.get(("pace", load), [])}
        for base in ("irp-off", "irp-eager"):
            other = {r["seed"]: r["goodput"] for r in by.get((base, load), [])}
            rows.append(_ratio_row(pace, other, base, split_name(sweep, load)))
    for pol in policies:
        per_seed: dict[int, list[float]] = {}
        for r in recs:
            if r["policy"] == pol:
                per_seed.setdefault(r["seed"], []).append(r["goodput"])
        rows.append(
            _mean_row(
                pol,
                "goodput",
                f"{sweep}@sweep",
                [float(np.mean(v)) for v in per_seed.values()],
                "req/s",
            )
        )
    att = {
        (pol, load): float(np.mean([r["attainment"] for r in by.get((pol, load), [])] or [0.0]))
        for pol in policies
        for load in loads
    }
    reachable = [ld for ld in loads if max(att[(p, ld)] for p in policies) >= 0.95]
    considered = reachable or loads
    worst = min(att[("pace", ld)] for ld in considered) if "pace" in policies else 0.0
    rows.append(
        Row(
            system="pace",
            metric="min_attainment_where_95_reachable",
            value=worst,
            n=len(reachable),
            split=sweep,
        )
    )
    decisions = [r["decision_us"] for r in recs if r["policy"] == "pace"]
    if decisions:
        rows.append(_mean_row("pace", "decision_time_per_step", sweep, decisions, "us"))
        steps = [r["mean_step_ms"] * 1e3 for r in recs if r["policy"] == "pace"]
        share = [d / s for d, s in zip(decisions, steps, strict=True) if s > 0]
        rows.append(_mean_row("pace", "decision_time_share_of_step", sweep, share, None))
    return rows


def best_cap_row(rows: Sequence[Row], sweep: str) -> Row:
    caps = [
        r
        for r in rows
        if r.system in FIXED_CAPS and r.metric == "goodput" and r.split == f"{sweep}@sweep"
    ]
    return max(caps, key=lambda r: r.value)


def build_claims(rows: Sequence[Row], sweep: str, medium: float) -> list[Claim]:
    mid = split_name(sweep, medium)
    best = best_cap_row(rows, sweep)
    claims = [
        Claim.compare(
            "pace_beats_off_goodput",
            f"At the medium load ({medium:.2f}x capacity) Pace's mean goodput is at least "
            "1.3x IRP-Off's.",
            rows,
            ("pace", "goodput_ratio_vs_irp-off", mid),
            "ge",
            1.3,
        ),
        Claim.compare(
            "pace_beats_eager_goodput",
            f"At the medium load ({medium:.2f}x capacity) Pace's mean goodput is at least "
            "1.2x IRP-Eager's.",
            rows,
            ("pace", "goodput_ratio_vs_irp-eager", mid),
            "ge",
            1.2,
        ),
        Claim.compare(
            "pace_slo_ge_95",
            "Pace's SLO attainment is >= 95% at every load where any policy reaches 95%.",
            rows,
            ("pace", "min_attainment_where_95_reachable", sweep),
            "ge",
            0.95,
        ),
        Claim.compare(
            "pace_beats_every_fixed_cap",
            "Pace's goodput averaged over the load sweep exceeds every fixed cap's (compared with "
            f"the best one, {best.system}).",
            rows,
            ("pace", "goodput", f"{sweep}@sweep"),
            "gt",
            (best.system, "goodput", f"{sweep}@sweep"),
        ),
    ]
    return claims


def figures(records: Sequence[dict[str, Any]], out: Path, sweeps: Sequence[str]) -> list[Path]:
    """``goodput_vs_load.png`` and ``attainment_vs_load.png``: one panel per sweep."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    paths = []
    for key, label, fname in (
        ("goodput", "goodput (SLO-met requests/s)", "goodput_vs_load.png"),
        ("attainment", "SLO attainment", "attainment_vs_load.png"),
    ):
        fig, axes = plt.subplots(
            1, len(sweeps), figsize=(5.2 * len(sweeps), 3.6), dpi=110, squeeze=False
        )
        for ax, sweep in zip(axes[0], sweeps, strict=True):
            recs = [r for r in records if r["sweep"] == sweep]
            by = group(recs, "policy", "load")
            loads = sorted({r["load"] for r in recs})
            for pol in POLICIES:
                ys = [np.mean([r[key] for r in by.get((pol, ld), [])] or [np.nan]) for ld in loads]
                ax.plot(loads, ys, marker="o", label=pol, lw=2.2 if pol == "pace" else 1.2)
            ax.set_xlabel("load (x SLO capacity)")
            ax.set_ylabel(label)
            ax.set_title(f"{sweep} latency model")
            if key == "attainment":
                ax.axhline(0.95, color="grey", ls=":", lw=1)
            ax.grid(alpha=0.3)
        axes[0][-1].legend(fontsize=7, loc="best")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        paths.append(atomic_write(out / fname, buf.getvalue()))
    return paths


def run_sweeps(
    specs: Sequence[SweepSpec],
    workers: int,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    started = time.perf_counter()
    records: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    for spec in specs:
        config[spec.name] = describe(spec)
        records += run_sweep(spec, workers=workers, on_result=on_result)
    return records, config, time.perf_counter() - started
