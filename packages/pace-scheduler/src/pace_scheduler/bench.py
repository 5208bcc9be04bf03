"""``pace bench``: how fast the simulator runs and how much a Pace decision costs per step.

- simulator: events (arrivals, segment and branch ends, admissions) and steps per wall second
  for each policy on the same H200 workload (1.0x capacity), and the ratio to IRP-Off's rate;
- controller: wall time of one Pace decision against batch size (synthetic steps with a quarter
  of the requests holding 3 pending branches each), as microseconds, as a ratio to IRP-Eager's
  decision on the same view, and as a share of the H200 step time it is deciding about.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from pace_scheduler.admission import PaceController, StepView
from pace_scheduler.latency import H200_QWEN3_32B
from pace_scheduler.policies import IRPEager
from pace_scheduler.simulator import EngineConfig, simulate
from pace_scheduler.sweep import POLICIES, _policy, capacity, slos_for
from pace_scheduler.workload import WorkloadConfig, generate
from paperstack.records import Row
from paperstack.stats import mean_ci

__all__ = ["run_bench", "synthetic_view"]

BATCH_SIZES = (8, 32, 128, 256)
SIM_REQUESTS = 150


def synthetic_view(batch: int, rng: np.random.Generator, now: float = 100.0) -> StepView:
    """A step with ``batch`` decoding requests, a quarter of them with 3 pending branches."""
    model = H200_QWEN3_32B.latency_model()
    ctx = rng.integers(256, 4096, batch).astype(float)
    tpot = np.full(batch, 0.05)
    step = float(model.predict([float(batch), float(ctx.sum()), 0.0, 0.0, 0.0]))
    deadline = now + tpot * rng.uniform(0.5, 3.0, batch) + step
    owners = np.flatnonzero(rng.random(batch) < 0.25)
    counts = np.full(owners.size, 3)
    cand_req = np.repeat(owners, counts)
    rank = (np.arange(cand_req.size) % 3 + 1).astype(float)
    ben = np.zeros(batch, dtype=bool)
    ben[owners] = True
    return StepView(
        now=now,
        base=np.array([float(batch), float(ctx.sum()), 0.0, 0.0, 0.0]),
        deadline=deadline,
        tpot=tpot,
        bank=deadline - tpot - now,
        remaining=rng.integers(16, 512, batch).astype(float),
        decoding=np.ones(batch, dtype=bool),
        beneficiary=ben,
        cand_req=cand_req,
        cand_rank=rank,
        cand_ctx=ctx[cand_req],
        cand_width=np.ones(cand_req.size),
        cand_unfinished=np.full(cand_req.size, 4.0),
        cand_len=np.full(cand_req.size, 256.0),
        cand_blocks=np.full(cand_req.size, 16, dtype=np.int64),
        kv_free_blocks=5000,
        seats_free=max(256 - batch, 0),
    )


def run_bench(seed: int = 0, repeats: int = 200) -> tuple[list[Row], dict[str, Any]]:
    rng = np.random.default_rng(seed)
    hw = H200_QWEN3_32B
    model = hw.latency_model()
    rows: list[Row] = []
    # ---- controller decision time vs batch size
    for batch in BATCH_SIZES:
        view = synthetic_view(batch, rng)
        pace = PaceController.from_model(model)
        eager = IRPEager()
        pace_t, ratio = [], []
        for _ in range(repeats):
            t0 = time.thread_time()
            pace.decide(view)
            t1 = time.thread_time()
            eager.admit(view)
            t2 = time.thread_time()
            pace_t.append(1e6 * (t1 - t0))
            ratio.append((t1 - t0) / max(t2 - t1, 1e-9))
        step_us = 1e6 * float(model.predict(view.base))
        split = f"batch={batch}"
        m, ci = mean_ci(pace_t)
        rows.append(
            Row(
                system="pace",
                metric="decision_time",
                value=m,
                ci95=ci,
                n=repeats,
                split=split,
                unit="us",
            )
        )
        m, ci = mean_ci(ratio)
        rows.append(
            Row(
                system="pace",
                metric="decision_time_vs_eager",
                value=m,
                ci95=ci,
                n=repeats,
                split=split,
                unit="x",
            )
        )
        share = float(np.mean(pace_t)) / step_us
        rows.append(
            Row(
                system="pace",
                metric="decision_share_of_h200_step",
                value=share,
                n=repeats,
                split=split,
            )
        )
    # ---- simulator speed per policy
    wl = WorkloadConfig(n_requests=SIM_REQUESTS)
    ttft, tpot = slos_for(model, wl, 3.0, 20.0)
    engine = EngineConfig(kv_blocks=hw.kv_tokens() // 16)
    rate = capacity(model, wl, engine, tpot)
    requests = generate(replace(wl, rate=rate, ttft_slo=ttft, tpot_slo=tpot), seed=seed)
    speeds: dict[str, tuple[float, float]] = {}
    for name in POLICIES:
        res = simulate(requests, model, _policy(name, model, seed), engine, seed=seed)
        speeds[name] = (res.events / res.sim_wall, res.steps / res.sim_wall)
    base_events = speeds["irp-off"][0]
    for name, (ev, st) in speeds.items():
        rows.append(
            Row(
                system=name,
                metric="sim_events_per_s",
                value=ev,
                n=1,
                split="h200@1.00x",
                unit="1/s",
            )
        )
        rows.append(
            Row(
                system=name, metric="sim_steps_per_s", value=st, n=1, split="h200@1.00x", unit="1/s"
            )
        )
        rows.append(
            Row(
                system=name,
                metric="sim_events_per_s_vs_irp-off",
                value=ev / base_events,
                n=1,
                split="h200@1.00x",
                unit="x",
            )
        )
    config = {
        "batch_sizes": list(BATCH_SIZES),
        "repeats": repeats,
        "sim_requests": SIM_REQUESTS,
        "sim_rate": rate,
    }
    return rows, config
