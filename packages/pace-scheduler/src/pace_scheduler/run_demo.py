"""What ``pace demo`` runs, given the contract's :class:`~paperstack.contract.Run`.

Kept apart from :mod:`pace_scheduler.cli` (thin) and :mod:`pace_scheduler.demo` (the plan and
the figures) so that each reads on its own.
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

__all__ = ["crossval_r2", "replay", "run_demo", "run_profile"]


def _load_model(name: str | None, device: str, cfg: ProfileConfig) -> Any:
    from pace_scheduler.profile import tiny_qwen

    if name is None:
        return tiny_qwen(cfg).to(device)
    from transformers import AutoModelForCausalLM

    from paperstack.checkpoint import load_pretrained

    model: Any = load_pretrained(name, AutoModelForCausalLM.from_pretrained, dtype="auto")
    return model.to(device).eval()


def run_profile(
    model_name: str | None,
    device: str,
    cfg: ProfileConfig,
    out: Path,
    *,
    progress: bool = True,
    run: Run | None = None,
) -> tuple[LatencyModel, float, int]:
    """Profile a model's steps into ``out/profile.jsonl``, fit ``T̂`` into ``out/fit.json``."""
    from pace_scheduler.profile import fit_profile, profile_model
    from paperstack.progress import Progress
    from paperstack.records import atomic_write_json

    model = _load_model(model_name, device, cfg)
    total = len(cfg.batch_sizes) * len(cfg.contexts)
    bar = (
        run.progress(total, "profiling steps")
        if run is not None
        else Progress(total, "profiling steps", enabled=progress)
    )
    with bar:
        records = profile_model(model, cfg, device, progress=bar.advance)
    path = out / "profile.jsonl"
    path.unlink(missing_ok=True)
    with JsonlWriter(path) as log:
        log.write_many(records)
    name = f"{'tiny-qwen3' if model_name is None else model_name}-{device}"
    fitted, r2, n = fit_profile(records, name=name, source=str(path))
    atomic_write_json(out / "fit.json", {"model": fitted.to_dict(), "r2": r2, "n": n})
    return fitted, r2, n


def crossval_r2(records: Sequence[dict[str, Any]], folds: int = 5) -> dict[str, float]:
    """R² of ``T̂`` on held-out profiled steps: ``folds`` folds by grid point (batch size and
    context), each fitted on the others. Per fold, so the claim has an interval."""
    x = features_matrix(records, "profile")
    y = np.array([float(r["seconds"]) for r in records])
    keys = sorted({(r.get("batch", 0), r.get("context", 0)) for r in records})
    fold_of = {k: i % folds for i, k in enumerate(keys)}
    fold = np.array([fold_of[(r.get("batch", 0), r.get("context", 0))] for r in records])
    out = {}
    for f in range(folds):
        test = fold == f
        if test.sum() < 2 or (~test).sum() < 8:
            continue
        model, _ = fit(x[~test], y[~test], source="profile")
        out[f"fold{f}"] = r_squared(y[test], model.predict(x[test]))
    return out


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
    rows = []
    for name in policies:
        res = simulate(requests, model, _policy(name, model, seed), engine, seed=seed)
        n = int(res.met.size)
        values = [
            ("goodput", res.goodput, "req/s"),
            ("slo_attainment", res.attainment, None),
            ("p50_token_latency", 1e3 * res.per_token_quantile(0.5), "ms"),
            ("p99_token_latency", 1e3 * res.per_token_quantile(0.99), "ms"),
            ("mean_branch_width", res.mean_width, None),
        ]
        for metric, value, unit in values:
            if value == value:  # not NaN (nothing finished)
                rows.append(
                    Row(system=name, metric=metric, value=value, n=n, split=split, unit=unit)
                )
        if log is not None:
            log(
                f"pace: {name:14s} goodput {res.goodput:.3f} req/s, attainment "
                f"{res.attainment:.3f}, p99 {1e3 * res.per_token_quantile(0.99):.1f} ms/token, "
                f"width {res.mean_width:.2f}"
                + (f", {len(res.rejected)} rejected" if res.rejected else "")
            )
    return rows


def run_demo(run: Run) -> Report:
    """Profile, validation runs, both sweeps, rows, claims, figures."""
    from pace_scheduler.profile import read_profile
    from pace_scheduler.sweep import default_workers

    if run.device != "cpu" and run.model is None:
        raise PaceSchedulerError(
            f"--device {run.device}: pass --model too (the tiny profile model is CPU-only)"
        )
    workers = run.args.workers or default_workers()
    p = d.plan(run.quick)
    if set(p.validation_seeds) & set(run.seeds):
        raise PaceSchedulerError(
            f"--seeds: {sorted(set(p.validation_seeds) & set(run.seeds))} are validation seeds "
            "(the fixed cap is chosen on them); report other seeds"
        )
    requests = None
    if run.args.dataset is not None:
        from pace_scheduler.workload import read_trace

        if run.args.dataset.is_dir():
            raise PaceSchedulerError(f"--dataset {run.args.dataset}: is a directory, not a trace")
        requests = read_trace(run.args.dataset)
    measured = "cpu" if run.device == "cpu" else "gpu"
    fitted, r2, n_prof = run_profile(run.model, run.device, p.profile, run.out, run=run)
    run.log(f"profiled {n_prof} steps on {run.device}, in-sample R^2 = {r2:.3f}")
    folds = crossval_r2(read_profile(run.out / "profile.jsonl"))
    rows: list[Row] = [
        Row.from_items("predictor", "heldout_r2", folds, split=f"{measured}-profile"),
        Row(
            system="predictor",
            metric="insample_r2",
            value=r2,
            n=n_prof,
            split=f"{measured}-profile",
        ),
    ]
    claims: list[Claim] = []
    h200 = d.h200_spec(p, run.seeds)
    cpu = d.cpu_spec(p, fitted, run.seeds, name=measured)
    config: dict[str, Any] = {"workers": workers, "profile": vars(p.profile)}
    records: list[dict[str, Any]] = []
    if requests is not None:
        config["dataset"] = str(run.args.dataset)
        for spec in (h200, cpu):
            rows += replay(
                requests, spec.model, spec.engine, list(spec.policies), run.seed,
                f"{spec.name}@trace",
            )  # fmt: skip
    else:
        specs = (h200, cpu)
        per_spec = [
            len(s.loads)
            * (len(s.seeds) * len(s.policies) + len(p.validation_seeds) * len(d.H200_CAPS))
            for s in specs
        ]
        log_path = run.out / "runs.jsonl"
        log_path.unlink(missing_ok=True)
        config["sweeps"] = {}
        with run.progress(sum(per_spec), "simulating") as bar, JsonlWriter(log_path) as log:

            def done(rec: dict[str, Any]) -> None:
                log.write(rec)
                bar.advance()

            for spec, label in (
                (h200, "simulated H200, spec-derived"),
                (cpu, "simulated, CPU-fitted"),
            ):
                recs, chosen, cfg = d.run_with_validation(
                    spec, p.validation_seeds, d.H200_CAPS, workers, on_result=done
                )
                records += recs
                config["sweeps"][spec.name] = cfg
                srows, sclaims = d.sweep_claims(recs, spec, p.medium, chosen, d.H200_CAPS, label)
                rows += srows
                if spec.name == "h200":
                    claims += sclaims
    claims.append(
        Claim.compare(
            "predictor_r2_ge_0_9",
            "The fitted step-latency model explains >= 90% of the variance of real "
            f"{measured.upper()} step times held out from its fit (R² per fold of a 5-fold "
            "split by grid point).",
            rows,
            ("predictor", "heldout_r2", f"{measured}-profile"),
            "ge",
            0.9,
        )
    )
    figs = d.figures(records, run.out, ("h200", measured)) if records else []
    return Report(rows, claims, intro=_intro(p, config, run), figures=figs, config=config)


def _intro(p: d.DemoPlan, config: dict[str, Any], run: Run) -> str:
    lines = [
        "Pace (and its amortised-slack ablation, pace-amortized) against IRP-Off, IRP-Eager "
        "and fixed caps in one simulated vLLM-like engine (max 256 sequences, 2048 batched "
        "tokens, 16-token KV blocks). The h200 sweep's latency model is derived from spec "
        "sheets (not measured). Loads are multiples of the SLO capacity. Rows hold per-seed "
        "values (mean, Student-t 95% interval, n = seeds); every claim is judged on the "
        "interval of the paired per-seed difference. The best fixed cap is chosen on "
        f"validation seeds {list(p.validation_seeds)}, which are not reported.",
        "",
    ]
    for name, sweep in config.get("sweeps", {}).items():
        lines.append(
            f"- {name}: capacity {sweep['capacity_rps']:.3f} req/s, TTFT SLO "
            f"{sweep['ttft_slo_s'] * 1e3:.0f} ms, per-token SLO "
            f"{sweep['tpot_slo_s'] * 1e3:.1f} ms, loads {sweep['loads']}, seeds "
            f"{sweep['seeds']}, {p.n_requests} requests per run, best fixed cap on validation: "
            f"{sweep['best_fixed_cap_on_validation']}"
        )
    return "\n".join(lines)
