"""``pace``: the command line of pace-scheduler.

- ``pace demo --out DIR``: profile this machine, load sweeps on the H200-class and the
  CPU-calibrated latency models, rows, claims, figures (``--quick``: under a minute).
- ``pace profile --out DIR``: time real decode/prefill steps, fit the latency model, print R².
- ``pace trace --out FILE``: write a generated workload as a JSONL trace.
- ``pace simulate --trace FILE``: replay a trace under every policy (or one).
- ``pace bench --out DIR``: simulator events/s and controller decision time vs batch size.

Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pace_scheduler import __version__
from pace_scheduler.errors import PaceSchedulerError
from paperstack.errors import cli_guard

PROG = "pace"
DIST = "pace-scheduler"


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"{DIST} {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="profile, load sweeps, results.json, report.md, figures")
    demo.add_argument("--out", type=Path, required=True, help="directory for the results")
    demo.add_argument("--quick", action="store_true", help="small sweep (under a minute)")
    demo.add_argument("--seed", type=int, default=0, help="first workload seed (default 0)")
    demo.add_argument(
        "--model",
        default=None,
        help="transformers model id or path to profile instead of the "
        "tiny Qwen3-style model (use with --device cuda on a GPU)",
    )
    demo.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="a JSONL trace to replay under every policy instead of the generated load sweep",
    )
    demo.add_argument("--device", default="cpu", help="device for the profile (cpu, cuda)")
    demo.add_argument("--workers", type=int, default=None, help="processes (default: up to 2)")

    prof = sub.add_parser("profile", help="time real steps, fit the latency model, report R²")
    prof.add_argument(
        "--out", type=Path, required=True, help="directory for profile.jsonl, fit.json"
    )
    prof.add_argument("--model", default=None, help="model id or path (default: tiny Qwen3)")
    prof.add_argument("--device", default="cpu")
    prof.add_argument("--quick", action="store_true", help="a 3x3 grid")
    prof.add_argument("--batch-sizes", type=_ints, default=None, help="e.g. 1,2,4,8,16,32")
    prof.add_argument("--contexts", type=_ints, default=None, help="e.g. 32,128,512,1024")
    prof.add_argument("--repeats", type=int, default=None)
    prof.add_argument(
        "--fit-only",
        type=Path,
        default=None,
        metavar="PROFILE",
        help="fit an existing profile.jsonl instead of profiling",
    )

    tr = sub.add_parser("trace", help="write a generated workload as a JSONL trace")
    tr.add_argument("--out", type=Path, required=True, help="trace file to write")
    tr.add_argument("--rate", type=float, default=4.0, help="requests per second")
    tr.add_argument("--requests", type=int, default=400)
    tr.add_argument("--arrival", choices=("poisson", "bursty"), default="poisson")
    tr.add_argument("--ttft-slo", type=float, default=1.0, help="seconds")
    tr.add_argument("--tpot-slo", type=float, default=0.05, help="seconds per critical-path token")
    tr.add_argument("--seed", type=int, default=0)

    sim = sub.add_parser("simulate", help="replay a trace under the policies")
    sim.add_argument("--trace", type=Path, required=True, help="JSONL trace (see README)")
    sim.add_argument("--policy", action="append", default=None, help="repeatable; default: all")
    sim.add_argument(
        "--latency", default="h200", help="'h200' or a fit.json written by pace profile"
    )
    sim.add_argument("--kv-blocks", type=int, default=None)
    sim.add_argument("--max-num-seqs", type=int, default=256)
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--out", type=Path, default=None, help="directory for results.json")

    bench = sub.add_parser("bench", help="simulator events/s and decision time vs batch size")
    bench.add_argument("--out", type=Path, required=True, help="directory for bench.json")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--repeats", type=int, default=200)
    return p


@cli_guard(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = {
        "demo": _demo,
        "profile": _profile,
        "trace": _trace,
        "simulate": _simulate,
        "bench": _bench,
    }[args.command]
    return command(args)


# --------------------------------------------------------------------------- profile


def _require_torch(what: str) -> None:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        raise PaceSchedulerError(
            f"{what} needs torch and transformers: pip install 'pace-scheduler[torch]'"
        ) from None


def _load_model(name: str | None, device: str, cfg: Any) -> Any:
    from pace_scheduler.profile import tiny_qwen

    if device not in ("cpu",) and not device.startswith("cuda"):
        raise PaceSchedulerError(f"--device {device}: expected cpu or cuda[:N]")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise PaceSchedulerError(f"--device {device}: no CUDA device is available")
    if name is None:
        return tiny_qwen(cfg).to(device)
    from transformers import AutoModelForCausalLM

    try:
        model: Any = AutoModelForCausalLM.from_pretrained(name, torch_dtype="auto")
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PaceSchedulerError(f"--model {name}: cannot load ({first})") from None
    return model.to(device).eval()


def _run_profile(
    model_name: str | None, device: str, cfg: Any, out: Path
) -> tuple[Any, float, int]:
    from rich.progress import Progress

    from pace_scheduler.profile import fit_profile, profile_model
    from paperstack.records import JsonlWriter, atomic_write_json

    _require_torch("profiling")
    model = _load_model(model_name, device, cfg)
    total = len(cfg.batch_sizes) * len(cfg.contexts)
    with Progress(transient=True) as bar:
        task = bar.add_task("profiling steps", total=total)
        records = profile_model(model, cfg, device, progress=lambda: bar.advance(task))
    path = out / "profile.jsonl"
    path.unlink(missing_ok=True)
    with JsonlWriter(path) as log:
        log.write_many(records)
    name = f"{'tiny-qwen3' if model_name is None else model_name}-{device}"
    fitted, r2, n = fit_profile(records, name=name, source=str(path))
    atomic_write_json(out / "fit.json", {"model": fitted.to_dict(), "r2": r2, "n": n})
    return fitted, r2, n


def _profile_config(args: argparse.Namespace) -> Any:
    from dataclasses import replace

    from pace_scheduler.profile import QUICK_PROFILE, ProfileConfig

    cfg = QUICK_PROFILE if args.quick else ProfileConfig()
    changes: dict[str, Any] = {}
    if args.batch_sizes:
        changes["batch_sizes"] = args.batch_sizes
    if args.contexts:
        changes["contexts"] = args.contexts
    if args.repeats is not None:
        changes["repeats"] = args.repeats
    return replace(cfg, **changes)


def _profile(args: argparse.Namespace) -> int:
    from pace_scheduler.profile import fit_profile, read_profile
    from paperstack.records import atomic_write_json, prepare_out_dir

    out = prepare_out_dir(args.out)
    if args.fit_only is not None:
        records = read_profile(args.fit_only)
        fitted, r2, n = fit_profile(records, name="fitted", source=str(args.fit_only))
        atomic_write_json(out / "fit.json", {"model": fitted.to_dict(), "r2": r2, "n": n})
    else:
        fitted, r2, n = _run_profile(args.model, args.device, _profile_config(args), out)
    print(
        f"{PROG}: fitted {n} steps, R^2 = {r2:.3f}; alpha {fitted.alpha * 1e3:.2f} ms, "
        f"beta {fitted.beta * 1e6:.2f} us/token, gamma {fitted.gamma * 1e9:.2f} ns/ctx token, "
        f"knee {fitted.knee:.0f} tokens -> {out / 'fit.json'}"
    )
    return 0


# --------------------------------------------------------------------------- trace, simulate


def _trace(args: argparse.Namespace) -> int:
    from pace_scheduler.workload import WorkloadConfig, generate, write_trace

    cfg = WorkloadConfig(
        rate=args.rate,
        n_requests=args.requests,
        arrival=args.arrival,
        ttft_slo=args.ttft_slo,
        tpot_slo=args.tpot_slo,
    )
    path = write_trace(args.out, generate(cfg, seed=args.seed))
    print(f"{PROG}: wrote {args.requests} requests to {path}")
    return 0


def _latency(spec: str) -> Any:
    from pace_scheduler.latency import H200_QWEN3_32B, LatencyModel

    if spec == "h200":
        return H200_QWEN3_32B.latency_model()
    return LatencyModel.load(spec)


def _replay(
    requests: Any, model: Any, engine: Any, policies: Sequence[str], seed: int, split: str
) -> list[Any]:
    from dataclasses import replace

    from pace_scheduler.simulator import simulate
    from pace_scheduler.sweep import _policy
    from paperstack.records import Row

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
        print(
            f"{PROG}: {name:10s} goodput {res.goodput:.3f} req/s, attainment "
            f"{res.attainment:.3f}, p99 {1e3 * res.per_token_quantile(0.99):.1f} ms/token, "
            f"width {res.mean_width:.2f}"
        )
    return rows


def _simulate(args: argparse.Namespace) -> int:
    from pace_scheduler.latency import H200_QWEN3_32B
    from pace_scheduler.policies import make_policy
    from pace_scheduler.simulator import EngineConfig
    from pace_scheduler.sweep import POLICIES
    from pace_scheduler.workload import read_trace
    from paperstack.records import Manifest, Results, prepare_out_dir, write_results

    out = prepare_out_dir(args.out) if args.out is not None else None
    requests = read_trace(args.trace)
    model = _latency(args.latency)
    policies = args.policy or list(POLICIES)
    for name in policies:
        make_policy(name, model)  # validates the names before any work
    kv = args.kv_blocks or (H200_QWEN3_32B.kv_tokens() // 16)
    engine = EngineConfig(kv_blocks=kv, max_num_seqs=args.max_num_seqs)
    rows = _replay(requests, model, engine, policies, args.seed, split=args.trace.name)
    if out is not None:
        config = {"trace": str(args.trace), "latency": model.to_dict(), "policies": policies}
        manifest = Manifest.collect(DIST, __version__, seed=args.seed, config=config)
        write_results(
            out / "results.json", Results(manifest=manifest.finish(), rows=rows, claims=[])
        )
        print(f"{PROG}: wrote {out / 'results.json'}")
    return 0


# --------------------------------------------------------------------------- demo


def _demo(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from rich.progress import Progress

    from pace_scheduler import demo as d
    from pace_scheduler.sweep import default_workers
    from paperstack.records import (
        Claim,
        JsonlWriter,
        Manifest,
        Results,
        Row,
        prepare_out_dir,
        write_results,
    )
    from paperstack.report import write_report

    if args.device != "cpu" and args.model is None:
        raise PaceSchedulerError(
            f"--device {args.device}: pass --model too (the tiny model is CPU-only)"
        )
    workers = args.workers if args.workers is not None else default_workers()
    if workers < 1:
        raise PaceSchedulerError(f"--workers {workers}: must be >= 1")
    out = prepare_out_dir(args.out)
    p = d.plan(args.quick)
    p = replace(
        p,
        seeds=tuple(args.seed + s for s in p.seeds),
        cpu_seeds=tuple(args.seed + s for s in p.cpu_seeds),
    )
    requests = None
    if args.dataset is not None:
        from pace_scheduler.workload import read_trace

        requests = read_trace(args.dataset)
    # the calibrated sweep is named for the device its steps were measured on
    measured = "cpu" if args.device == "cpu" else "gpu"
    started = time.perf_counter()
    fitted, r2, n_prof = _run_profile(args.model, args.device, p.profile, out)
    print(f"{PROG}: profiled {n_prof} steps on {args.device}, R^2 = {r2:.3f}")
    rows: list[Row] = [
        Row(system="predictor", metric="r2", value=r2, n=n_prof, split=f"{measured}-profile"),
        Row(
            system="predictor",
            metric="noise_cv",
            value=fitted.noise_cv,
            n=n_prof,
            split=f"{measured}-profile",
        ),
    ]
    h200 = d.h200_spec(p)
    cpu = d.cpu_spec(p, fitted, name=measured)
    claims: list[Claim] = []
    config: dict[str, Any] = {"quick": args.quick, "workers": workers, "profile": vars(p.profile)}
    if requests is not None:
        config["dataset"] = str(args.dataset)
        for spec in (h200, cpu):
            rows += _replay(
                requests,
                spec.model,
                spec.engine,
                list(spec.policies),
                args.seed,
                f"{spec.name}@trace",
            )
        records: list[dict[str, Any]] = []
    else:
        specs = (h200, cpu)
        total = sum(len(s.loads) * len(s.seeds) * len(s.policies) for s in specs)
        log_path = out / "runs.jsonl"
        log_path.unlink(missing_ok=True)
        with Progress(transient=True) as bar, JsonlWriter(log_path) as log:
            task = bar.add_task("simulating", total=total)

            def done(rec: dict[str, Any]) -> None:
                log.write(rec)
                bar.advance(task)

            records, sweep_config, _ = d.run_sweeps(specs, workers, on_result=done)
        config["sweeps"] = sweep_config
        rows += d.build_rows(records, "h200", p.medium)
        rows += d.build_rows(records, measured, p.medium)
        claims = d.build_claims(rows, "h200", p.medium)
    claims.append(
        Claim.compare(
            "predictor_r2_ge_0_9",
            "The fitted step-latency model explains >= 90% of the variance of real "
            f"{measured.upper()} step times (R^2 on the profiled steps).",
            rows,
            ("predictor", "r2", f"{measured}-profile"),
            "ge",
            0.9,
        )
    )
    manifest = Manifest.collect(DIST, __version__, seed=args.seed, config=config)
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    figs = d.figures(records, out, ("h200", measured)) if records else []
    elapsed = time.perf_counter() - started
    write_report(
        out,
        results,
        title=f"{DIST} {__version__}: demo{' (--quick)' if args.quick else ''}",
        intro=_intro(p, config, elapsed),
        figures=figs,
    )
    held = sum(c.held for c in claims)
    print(
        f"{PROG}: wrote {out / 'results.json'} and report.md "
        f"({held}/{len(claims)} claims held, {elapsed:.1f}s)"
    )
    for c in claims:
        print(
            f"  {'held' if c.held else 'NOT held'}: {c.id} ({c.lhs_value:.3f} vs {c.rhs_value:.3f})"
        )
    return 0


def _intro(p: Any, config: dict[str, Any], elapsed: float) -> str:
    lines = [
        "Pace (and its amortised-slack ablation, pace-amortized) against IRP-Off, IRP-Eager and "
        "fixed caps (per request: cap-2, cap-4; global: global-64) in one simulated vLLM-like "
        "engine (max 256 sequences, 2048 batched tokens, 16-token KV blocks). Loads are "
        "multiples of the SLO capacity (the request rate a batch decoding at the per-token SLO "
        "sustains). Values are means over seeds with Student-t 95% intervals clipped to the "
        "metric's range (n = seeds); goodput ratios are ratios of mean goodputs with a paired "
        "bootstrap interval over seeds; per-token latency is (finish - first token) / "
        "critical-path tokens; goodput counts requests meeting both TTFT and per-token SLOs.",
        "",
    ]
    for name, sweep in config.get("sweeps", {}).items():
        lines.append(
            f"- {name}: capacity {sweep['capacity_rps']:.3f} req/s, TTFT SLO "
            f"{sweep['ttft_slo_s'] * 1e3:.0f} ms, per-token SLO "
            f"{sweep['tpot_slo_s'] * 1e3:.1f} ms, "
            f"loads {sweep['loads']}, seeds {sweep['seeds']}, {p.n_requests} requests per run"
        )
    lines.append(f"- wall time {elapsed:.0f} s (CPU, {config['workers']} worker processes)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- bench


def _bench(args: argparse.Namespace) -> int:
    from pace_scheduler.bench import run_bench
    from paperstack.records import Manifest, Results, prepare_out_dir, write_results

    if args.repeats < 2:
        raise PaceSchedulerError(f"--repeats {args.repeats}: needs at least 2")
    out = prepare_out_dir(args.out)
    rows, config = run_bench(args.seed, args.repeats)
    manifest = Manifest.collect(DIST, __version__, seed=args.seed, config=config)
    path = write_results(
        out / "bench.json", Results(manifest=manifest.finish(), rows=rows, claims=[])
    )
    print(f"{PROG}: wrote {path}")
    for r in rows:
        print(f"  {r.system:10s} {r.metric:28s} {r.split or '':10s} {r.value:.4g} {r.unit or ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
