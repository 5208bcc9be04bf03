"""Load sweeps: every policy at every load and seed on one latency model, in the same harness.

Loads are multiples of an SLO capacity ``λ_cap``: the request rate at which the largest batch
that still decodes at the per-token SLO (``T̂(L*) ≤ τ``, at the workload's mean context, capped
by ``max_num_seqs``) just keeps up with the workload's mean tokens per request,

    λ_cap = (L* / τ) / E[total tokens per request].

SLOs are multiples of the latency model's own step times (``τ = tpot_x · T̂(one decode)``,
``TTFT = ttft_x · T̂(prefill of a mean prompt)``), so one sweep definition fits an H200 and a
CPU alike. Pace's predictor is not handed the true model: it is fitted from a noisy profile of
the simulated engine (``model_profile``), as ``pace profile`` fits a real one, and refitted
online.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from pace_scheduler.admission import PaceConfig
from pace_scheduler.latency import LatencyModel, fit
from pace_scheduler.policies import Pace, Policy, make_policy
from pace_scheduler.simulator import EngineConfig, RunResult, simulate
from pace_scheduler.workload import WorkloadConfig, generate, summarize

__all__ = [
    "POLICIES",
    "SweepSpec",
    "capacity",
    "model_profile",
    "run_sweep",
    "slos_for",
]

#: What ``pace simulate`` replays by default: IRP-Off, IRP-Eager, the fixed-cap grid of the
#: H200 sweep, Pace, and Pace with amortised slack (an ablation of the slack definition).
H200_CAPS = (
    "cap-2", "cap-3", "cap-4", "cap-6",
    "global-8", "global-16", "global-32", "global-64", "global-96", "global-128", "global-192",
)  # fmt: skip
POLICIES = ("irp-off", "irp-eager", *H200_CAPS, "pace", "pace-amortized")


@dataclass(frozen=True)
class SweepSpec:
    """One sweep: a latency model, the workload shape, load multipliers, seeds, policies."""

    name: str
    model: LatencyModel
    engine: EngineConfig
    workload: WorkloadConfig
    loads: tuple[float, ...]
    seeds: tuple[int, ...]
    policies: tuple[str, ...] = POLICIES
    tpot_x: float = 3.0
    ttft_x: float = 20.0


def slos_for(
    model: LatencyModel, wl: WorkloadConfig, tpot_x: float, ttft_x: float
) -> tuple[float, float]:
    """``(TTFT, τ)`` as multiples of one decode step and of one mean-prompt prefill."""
    one_decode = float(model.predict([1.0, wl.prompt_mean, 0.0, 0.0, 0.0]))
    prefill = float(model.predict([0.0, 0.0, wl.prompt_mean, wl.prompt_mean**2 / 2, 0.0]))
    return ttft_x * prefill, tpot_x * one_decode


def capacity(model: LatencyModel, wl: WorkloadConfig, engine: EngineConfig, tpot: float) -> float:
    """``λ_cap`` (requests/s; see the module doc), from the workload's own mean lengths."""
    stats = workload_means(wl)
    mean_ctx = stats["mean_prompt"] + stats["mean_total_tokens"] / 2
    lanes = np.arange(1, engine.max_num_seqs + 1, dtype=float)
    zero = np.zeros_like(lanes)
    x = np.column_stack([lanes, lanes * mean_ctx, zero, zero, zero])
    ok = model.predict(x) <= tpot
    best = float(lanes[ok][-1]) if ok.any() else 1.0
    return best / tpot / stats["mean_total_tokens"]


def model_profile(
    model: LatencyModel, seed: int = 0, repeats: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Noisy step times of the simulated engine over a grid of decode and prefill batches.

    What ``pace profile`` measures on real hardware: decode steps over batch sizes x contexts,
    and prefill steps over chunk lengths; times carry the model's lognormal noise.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for b in (1, 2, 4, 8, 16, 32, 64, 128, 192, 256):
        for c in (128, 512, 1024, 2048, 4096):
            rows.append([b, b * c, 0.0, 0.0, 0.0])
    for p in (64, 256, 512, 1024, 2048):
        for c in (0, 1024):
            rows.append([0.0, 0.0, p, p * (c + p / 2), c])
    x = np.repeat(np.array(rows, dtype=float), repeats, axis=0)
    sigma = float(np.sqrt(np.log1p(model.noise_cv**2)))
    y = model.predict(x) * rng.lognormal(-(sigma**2) / 2, sigma, len(x))
    return x, y


def _policy(name: str, model: LatencyModel, seed: int) -> Policy:
    if name in ("pace", "pace-amortized"):
        x, y = model_profile(model, seed=seed)
        fitted, _ = fit(x, y, name=f"{model.name}-profiled")
        return Pace(fitted, PaceConfig(amortize=name == "pace-amortized"), prior_x=x, prior_y=y)
    return make_policy(name, model)


@functools.lru_cache(maxsize=32)
def workload_means(wl: WorkloadConfig) -> dict[str, float]:
    """Mean lengths of a workload shape, from 2000 draws (independent of the run's seed)."""
    return summarize(generate(replace(wl, n_requests=2000, rate=1.0), seed=12345))


def _engine(spec: SweepSpec) -> EngineConfig:
    """The spec's engine with the controller's length hints taken from the workload's means."""
    stats = workload_means(spec.workload)
    return replace(
        spec.engine,
        branch_len_hint=spec.workload.branch_mean,
        cp_len_hint=stats["mean_critical_path"],
    )


def _run_one(task: tuple[SweepSpec, str, float, float, int]) -> dict[str, Any]:
    spec, policy_name, load, rate, seed = task
    ttft, tpot = slos_for(spec.model, spec.workload, spec.tpot_x, spec.ttft_x)
    wl = replace(spec.workload, rate=rate, ttft_slo=ttft, tpot_slo=tpot)
    requests = generate(wl, seed=seed)
    policy = _policy(policy_name, spec.model, seed)
    res = simulate(requests, spec.model, policy, _engine(spec), seed=seed)
    return record_of(res, spec.name, policy_name, load, rate, seed, ttft, tpot)


def record_of(
    res: RunResult,
    sweep: str,
    policy: str,
    load: float,
    rate: float,
    seed: int,
    ttft: float,
    tpot: float,
) -> dict[str, Any]:
    """One run as a record (what ``runs.jsonl`` holds and the summary reads)."""
    decisions = np.asarray(res.decision_seconds)
    return {
        "sweep": sweep,
        "policy": policy,
        "load": load,
        "rate": rate,
        "seed": seed,
        "goodput": res.goodput,
        "attainment": res.attainment,
        "p50_tpot_ms": 1e3 * res.per_token_quantile(0.5),
        "p99_tpot_ms": 1e3 * res.per_token_quantile(0.99),
        "mean_width": res.mean_width,
        "finished": float(res.finished.mean()),
        "steps": res.steps,
        "events": res.events,
        "preemptions": res.preemptions,
        "mean_step_ms": 1e3 * res.step_seconds,
        "sim_wall_s": res.sim_wall,
        "decision_us": 1e6 * float(decisions.mean()) if decisions.size else 0.0,
        "ttft_slo": ttft,
        "tpot_slo": tpot,
        "rejected": len(res.rejected),
    }


def run_sweep(
    spec: SweepSpec,
    *,
    workers: int = 1,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (policy, load, seed) of ``spec``; results in a fixed order whatever ``workers``.

    Runs are independent and deterministic by seed, so ``workers > 1`` (a process pool) gives
    the same records as a serial run, only sooner.
    """
    _, tpot = slos_for(spec.model, spec.workload, spec.tpot_x, spec.ttft_x)
    cap = capacity(spec.model, spec.workload, spec.engine, tpot)
    tasks = [
        (spec, p, load, load * cap, seed)
        for load in spec.loads
        for seed in spec.seeds
        for p in spec.policies
    ]
    out: list[dict[str, Any]] = []
    if workers <= 1:
        for task in tasks:
            rec = _run_one(task)
            out.append(rec)
            if on_result:
                on_result(rec)
        return out
    # spawn, not fork: the demo has imported torch (with its thread pools) before the sweep.
    # multiprocessing.Pool rather than ProcessPoolExecutor: it has a public terminate(). On any
    # exit but a clean one (Ctrl-C, SIGTERM turned into KeyboardInterrupt by the CLI guard, an
    # error in a worker) the workers are terminated and joined here, so none outlives the demo;
    # the executor's shutdown would instead wait for every queued run to finish.
    ctx = multiprocessing.get_context("spawn")
    pool = ctx.Pool(processes=workers)
    try:
        for rec in pool.imap(_run_one, tasks):
            out.append(rec)
            if on_result:
                on_result(rec)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return out


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def describe(spec: SweepSpec) -> dict[str, Any]:
    """The sweep's configuration for the run manifest."""
    _, tpot = slos_for(spec.model, spec.workload, spec.tpot_x, spec.ttft_x)
    ttft, _ = slos_for(spec.model, spec.workload, spec.tpot_x, spec.ttft_x)
    return {
        "model": spec.model.to_dict(),
        "engine": asdict(spec.engine),
        "workload": asdict(spec.workload),
        "loads": list(spec.loads),
        "seeds": list(spec.seeds),
        "policies": list(spec.policies),
        "ttft_slo_s": ttft,
        "tpot_slo_s": tpot,
        "capacity_rps": capacity(spec.model, spec.workload, spec.engine, tpot),
    }
