"""What ``pace demo`` runs, given the contract's :class:`~paperstack.contract.Run`.

Kept apart from :mod:`pace_scheduler.cli` (thin) and :mod:`pace_scheduler.demo` (the plan, the
served sweep and the figures) so that each reads on its own. Order of work:

1. profile the engine on this machine (validation seed; the fit feeds Pace and sets the SLOs);
2. served sweep: validation runs choose the fixed cap, then every policy x load x seed;
3. simulated H200 sweep: the same, on the spec-derived latency model;
4. rows and claims (premises first), the predictor's fit on held-out steps, figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from pace_scheduler import demo as d
from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import LatencyModel, features_matrix, fit, r_squared
from pace_scheduler.profile import ProfileConfig
from paperstack.contract import Report, Run
from paperstack.records import Claim, JsonlWriter, Row

__all__ = ["DEMO_ARTEFACTS", "replay", "run_demo", "run_profile"]

#: Every file ``pace demo`` writes in ``--out`` (the core adds results.json and report.md):
#: removed at the start of a run, so nothing of an earlier run sits beside this one's.
DEMO_ARTEFACTS = (
    "results.json",
    "report.md",
    "fit.json",
    "profile.jsonl",
    "runs.jsonl",
    "goodput_vs_load.png",
    "attainment_vs_load.png",
)


def run_profile(
    session: Any,
    grid: ProfileConfig,
    out: Path | None,
    *,
    progress: Callable[[], None] | None = None,
    seed: int = 0,
) -> tuple[LatencyModel, float, list[dict[str, Any]]]:
    """Profile the engine's steps (``out/profile.jsonl``) and fit ``T̂`` (``out/fit.json``)."""
    from pace_scheduler.profile import fit_profile
    from paperstack.records import atomic_write_json

    records = session.profile(grid, seed=seed, progress=progress)
    name = f"engine-{session.device}"
    fitted, r2, n = fit_profile(records, name=name, source="engine profile")
    if out is not None:
        path = out / "profile.jsonl"
        path.unlink(missing_ok=True)
        with JsonlWriter(path) as log:
            log.write_many(records)
        atomic_write_json(out / "fit.json", {"model": fitted.to_dict(), "r2": r2, "n": n})
    return fitted, r2, records


def replay(
    requests: Any,
    model: LatencyModel,
    engine: Any,
    policies: Sequence[str],
    seed: int,
    split: str,
    log: Callable[[str], None] | None = None,
) -> list[Row]:
    """Every policy on one trace in the simulator; rows per policy (one run each: no intervals,
    a replay is a measurement, not a claim)."""
    from pace_scheduler.simulator import simulate
    from pace_scheduler.sweep import _policy

    engine = replace(engine, warmup=0.0)  # a user's trace: every request counts
    rows: list[Row] = []
    for name in policies:
        res = simulate(requests, model, _policy(name, model, seed), engine, seed=seed)
        rows += result_rows(res, name, split)
        if log is not None:
            log(describe_run(name, res))
    return rows


def result_rows(res: Any, name: str, split: str) -> list[Row]:
    n = int(res.met.size)
    values = [
        ("goodput", res.goodput, "req/s"),
        ("slo_attainment", res.attainment, None),
        ("p50_token_latency", 1e3 * res.per_token_quantile(0.5), "ms"),
        ("p99_token_latency", 1e3 * res.per_token_quantile(0.99), "ms"),
        ("mean_branch_width", res.mean_width, None),
    ]
    return [
        Row(system=name, metric=metric, value=value, n=n, split=split, unit=unit)
        for metric, value, unit in values
        if value == value  # not NaN (nothing finished)
    ]


def describe_run(name: str, res: Any) -> str:
    text = (
        f"pace: {name:14s} goodput {res.goodput:.3f} req/s, attainment {res.attainment:.3f}, "
        f"p99 {1e3 * res.per_token_quantile(0.99):.1f} ms/token, width {res.mean_width:.2f}"
    )
    for rid, why in res.rejected:
        text += f"\npace: warning: request {rid!r} rejected: {why}"
    return text


def _heldout_r2(steps: dict[int, list[tuple[np.ndarray, np.ndarray]]]) -> dict[int, float]:
    """Per seed, R² of (measured, predicted) step times pooled over its runs."""
    out = {}
    for seed, parts in steps.items():
        y = np.concatenate([p[0] for p in parts])
        y_hat = np.concatenate([p[1] for p in parts])
        if y.size >= 8:
            out[seed] = r_squared(y, y_hat)
    return out


def run_demo(run: Run) -> Report:
    """Profile, both sweeps with their validation runs, rows, claims, figures."""
    from pace_scheduler.outdir import claim_out_dir
    from pace_scheduler.profile import load_model
    from pace_scheduler.sweep import default_workers

    workers = run.args.workers or default_workers()
    p = d.reduced_plan() if run.args.reduced and not run.quick else d.plan(run.quick)
    if set(p.validation_seeds) & set(run.seeds):
        raise PaceSchedulerError(
            f"--seeds: {sorted(set(p.validation_seeds) & set(run.seeds))} are validation seeds "
            "(the fixed cap is chosen and the engine profiled on them); report other seeds"
        )
    requests = None
    if run.args.dataset is not None:
        from pace_scheduler.workload import read_trace

        if run.args.dataset.is_dir():
            raise PaceSchedulerError(f"--dataset {run.args.dataset}: is a directory, not a trace")
        requests = read_trace(run.args.dataset)
    claim_out_dir(run.out, "demo", DEMO_ARTEFACTS)  # after the input checks: erases nothing
    from pace_scheduler.engine import EngineSession

    setup = d.engine_setup()
    with EngineSession(load_model(run.model, run.device), setup, run.device) as session:
        return _demo_in(run, session, p, requests, workers)


def _demo_in(run: Run, session: Any, p: d.DemoPlan, requests: Any, workers: int) -> Report:
    from pace_scheduler.sweep import model_profile

    setup = session.setup
    grid = p.profile
    n_profile = len(grid.batch_sizes) * len(grid.contexts)
    with run.progress(n_profile, "profiling the engine") as bar:
        fitted, r2, prof = run_profile(
            session, grid, run.out, progress=bar.advance, seed=p.validation_seeds[0]
        )
    prior_x = features_matrix(prof, "engine profile")
    prior_y = np.array([r["seconds"] for r in prof])
    ttft, tpot, cap = d.engine_slos(fitted, setup)
    run.log(
        f"engine profile: {len(prof)} steps, in-sample R^2 {r2:.3f}; per-token SLO "
        f"{tpot * 1e3:.2f} ms, TTFT SLO {ttft * 1e3:.0f} ms, capacity {cap:.1f} req/s"
    )
    config: dict[str, Any] = {
        "workers": workers,
        "plan": {k: v for k, v in vars(p).items() if k != "profile"},
        "profile": vars(grid),
        "engine": {
            "setup": vars(setup),
            "model": fitted.to_dict(),
            "profile_r2": r2,
            "workload": vars(replace(d.ENGINE_WORKLOAD)),
            "ttft_slo_s": ttft,
            "tpot_slo_s": tpot,
            "capacity_rps": cap,
            "clock": "thread CPU time" if run.device == "cpu" else "wall time, synchronised",
        },
    }
    rows: list[Row] = [
        Row(system="predictor", metric="insample_r2", value=r2, n=len(prof),
            split="engine-profile"),
    ]  # fmt: skip
    if requests is not None:
        return _replay_dataset(run, requests, session, fitted, (prior_x, prior_y), rows, config)

    seeds = run.seeds
    engine_seeds = tuple(seeds[: p.engine_seeds])
    val_engine = (p.validation_seeds[0],)
    n_engine = len(p.engine_loads) * (
        len(engine_seeds) * (len(p.engine_policies) + len(p.engine_caps)) + len(p.engine_caps)
    )
    records: list[dict[str, Any]] = []
    steps: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    log_path = run.out / "runs.jsonl"
    log_path.unlink(missing_ok=True)
    with JsonlWriter(log_path) as log:
        with run.progress(n_engine, "serving in the engine") as bar:

            def served(rec: dict[str, Any], res: Any, model: LatencyModel) -> None:
                log.write(rec)
                bar.advance()
                if rec["sweep"] == "engine" and res.step_times is not None and res.steps:
                    predicted = model.predict(res.step_features)
                    steps.setdefault(rec["seed"], []).append((res.step_times, predicted))

            validation = d.run_engine_sweep(
                session, fitted, (prior_x, prior_y), loads=p.engine_loads, seeds=val_engine,
                policies=p.engine_caps, n_requests=p.engine_requests, on_result=served,
                sweep="engine-validation",
            )  # fmt: skip
            engine_cap = d.best_cap(validation, p.engine_caps)
            engine_records = d.run_engine_sweep(
                session, fitted, (prior_x, prior_y), loads=p.engine_loads, seeds=engine_seeds,
                policies=p.engine_policies + p.engine_caps, n_requests=p.engine_requests,
                on_result=served,
            )  # fmt: skip
        records += engine_records
        speeds = {
            f"{r['sweep']}@{r['load']:g}x/seed{r['seed']}": r["speed"]
            for r in [*validation, *engine_records]
        }
        config["engine"].update(
            seeds=list(engine_seeds),
            validation_seeds=list(val_engine),
            best_fixed_cap_on_validation=engine_cap,
            speed_factors=speeds,
        )
        label = "served, transformers CB on CPU"
        erows, eclaims = d.sweep_rows_claims(
            engine_records,
            "engine",
            p.engine_loads,
            p.engine_medium,
            engine_cap,
            p.engine_caps,
            label,
        )
        rows += erows
        claims: list[Claim] = eclaims
        held = _heldout_r2(steps)
        if held:
            rows.append(Row.from_seeds("predictor", "heldout_r2", held, split="engine-steps"))
            claims.append(
                Claim.compare(
                    "engine_predictor_r2_ge_0_9",
                    "The step-latency model fitted to the engine profile explains >= 90% of the "
                    "variance of the engine's steps while serving (held out: every step of the "
                    "reported runs, predicted by the profile's fit rescaled by the speed probe "
                    "before each group; R² per seed).",
                    rows,
                    ("predictor", "heldout_r2", "engine-steps"),
                    "ge",
                    0.9,
                )
            )

        h200 = d.h200_spec(p, seeds)
        n_sim = len(h200.loads) * (
            len(h200.seeds) * len(h200.policies) + len(p.validation_seeds) * len(p.sim_caps)
        )
        with run.progress(n_sim, "simulating the H200 sweep") as bar:

            def simulated(rec: dict[str, Any]) -> None:
                log.write(rec)
                bar.advance()

            h200_records, h200_cap, h200_config = d.run_with_validation(
                h200, p.validation_seeds, p.sim_caps, workers, on_result=simulated
            )
    records += h200_records
    config["h200"] = h200_config
    label = "simulated H200, spec-derived model"
    hrows, hclaims = d.sweep_rows_claims(
        h200_records, "h200", p.sim_loads, p.medium, h200_cap, p.sim_caps, label
    )
    rows += hrows
    claims += hclaims
    fits: dict[int, float] = {}
    for seed in seeds:  # Pace's H200 predictor: fitted to one noisy profile, tested on another
        x, y = model_profile(h200.model, seed=seed)
        hx, hy = model_profile(h200.model, seed=seed + 10_000)
        fitted_h200, _ = fit(x, y)
        fits[seed] = r_squared(hy, fitted_h200.predict(hx))
    rows.append(Row.from_seeds("predictor", "heldout_r2", fits, split="h200-model"))
    claims.append(
        Claim.compare(
            "h200_predictor_r2_ge_0_9",
            "Pace's predictor fitted to a noisy profile of the spec-derived H200 model explains "
            ">= 90% of the variance of a second, held-out profile (it has the model's own form "
            "by construction: a check of the fit, not of the model).",
            rows,
            ("predictor", "heldout_r2", "h200-model"),
            "ge",
            0.9,
        )
    )
    figs = d.figures(records, run.out, ("engine", "h200"))
    return Report(rows, claims, intro=_intro(p, config), figures=figs, config=config)


def _replay_dataset(
    run: Run,
    requests: Any,
    session: Any,
    fitted: LatencyModel,
    prior: tuple[np.ndarray, np.ndarray],
    rows: list[Row],
    config: dict[str, Any],
) -> Report:
    """``--dataset``: the user's trace under every policy, served in the engine and simulated
    on the H200 model (its own SLOs and lengths; one run each, so rows without claims)."""
    p = d.plan(run.quick)
    config["dataset"] = str(run.args.dataset)
    session.setup = replace(session.setup, warmup=0.0)  # a user's trace: every request counts
    for name in p.engine_policies + p.engine_caps:
        factory = d.engine_policy(name, fitted, *prior)
        res = session.serve(requests, factory, seed=run.seed, name=name)
        run.log(describe_run(name, res).removeprefix("pace: "))
        rows += result_rows(res, name, "engine@trace")
    h200 = d.h200_spec(p, run.seeds)
    rows += replay(requests, h200.model, h200.engine, list(h200.policies), run.seed, "h200@trace")
    return Report(rows, [], intro=f"Replay of {run.args.dataset} under every policy.",
                  config=config)  # fmt: skip


def _intro(p: d.DemoPlan, config: dict[str, Any]) -> str:
    e, h = config["engine"], config["h200"]
    return "\n".join(
        [
            "Pace against IRP-Off, IRP-Eager and a grid of fixed caps (per request `cap-N`: at "
            "most N concurrent sequences of a request; global `global-N`: at most N extra "
            "branch sequences in the batch), in two settings:",
            "",
            f"- **engine (served, real steps)**: transformers' continuous-batching engine on this "
            f"CPU serving the toy world's tiny Llama (random weights); every policy is a "
            f"scheduler of that engine (`PaceCBScheduler`); steps timed in {e['clock']}. "
            f"`T̂` fitted to a profile of the engine (in-sample R² {e['profile_r2']:.3f}); "
            f"per-token SLO {e['tpot_slo_s'] * 1e3:.2f} ms, TTFT SLO "
            f"{e['ttft_slo_s'] * 1e3:.0f} ms at the profile's speed (before each (load, seed) "
            f"group a probe of real steps rescales `T̂`, the SLOs and the rate to the machine's "
            f"speed then: factors {min(e['speed_factors'].values()):.2f}-"
            f"{max(e['speed_factors'].values()):.2f}), SLO capacity {e['capacity_rps']:.1f} "
            f"req/s of "
            f"engine time (estimated from `T̂`; it overstates what the engine sustains, see the "
            f"README); loads {list(p.engine_loads)} (medium {p.engine_medium:g}x), seeds "
            f"{e['seeds']}, "
            f"{p.engine_requests} requests per run; best fixed cap on validation seed "
            f"{e['validation_seeds']}: {e['best_fixed_cap_on_validation']}.",
            f"- **h200 (simulated)**: the discrete-event simulator with the H200 / Qwen3-32B "
            f"latency model derived from spec sheets (not measured; assumptions in the README); "
            f"capacity {h['capacity_rps']:.2f} req/s, per-token SLO "
            f"{h['tpot_slo_s'] * 1e3:.1f} ms, TTFT SLO {h['ttft_slo_s'] * 1e3:.0f} ms; loads "
            f"{h['loads']}, seeds {h['seeds']}, {p.sim_requests} requests per run; best fixed "
            f"cap on validation seeds {h['validation_seeds']}: "
            f"{h['best_fixed_cap_on_validation']}.",
            "",
            "Rows hold per-seed values (mean, Student-t 95% interval, n = seeds); the policies "
            "of one (load, seed) serve the same requests, so every claim is judged on the "
            "interval of the paired per-seed difference. `1.3 x irp-off` rows are IRP-Off's "
            "goodput scaled by the claimed factor. `best-cap-hindsight` is the cap of the grid "
            "with the best mean goodput at each load, chosen on the reported seeds. The first "
            "10% of each run's requests are a warm-up left out of the metrics.",
        ]
    )
