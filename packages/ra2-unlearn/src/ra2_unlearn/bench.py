"""``ra2 bench``: wall time and peak memory per unlearning step, RA^2 vs RMU, in one run.

Each method runs in its own spawned process (so one method's allocations cannot hide the
other's peak) on the same model, data, batch and steps; the first two steps are warm-up.
Memory on the CPU is the growth of the process's peak resident set over its value just
before training (``ru_maxrss``); on CUDA it would be ``max_memory_allocated`` (not measured
here: no GPU). Ratios RA^2 / RMU are the result; absolute times depend on the machine.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import time
from typing import Any

__all__ = ["measure", "run_bench"]


def measure(method: str, preset: str, steps: int, seed: int) -> dict[str, Any]:
    """Per-step seconds and peak-RSS growth (MiB) of ``steps`` unlearning steps of ``method``."""
    import copy

    import torch
    from transformers import TrainerCallback

    from paperstack import tiny
    from paperstack.tasks import FactWorld
    from ra2_unlearn.config import UnlearnConfig
    from ra2_unlearn.data import ForgetRetainCollator, ForgetRetainDataset, encode, fact_splits
    from ra2_unlearn.trainer import UnlearnTrainer, build_anchor_bank, training_arguments

    torch.set_num_threads(1)
    tok = tiny.build_tokenizer()
    model = tiny.build_model(preset, tok, seed=seed)
    ref = copy.deepcopy(model)
    splits = fact_splits(FactWorld(n_entities=40))
    layer = min(1, len(model.model.layers) - 1)
    cfg = UnlearnConfig(method=method, layer=layer)  # type: ignore[arg-type]
    anchors = build_anchor_bank(ref, tok, splits.retain, cfg) if method == "ra2" else None
    data = ForgetRetainDataset(encode(tok, splits.forget), encode(tok, splits.retain))
    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.t = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            times.append(time.perf_counter() - self.t)

    args = training_arguments(steps + 2, 5e-5, 16, seed)
    trainer = UnlearnTrainer(
        model, ref, cfg, args, data, ForgetRetainCollator(int(tok.pad_token_id)), anchors=anchors
    )
    trainer.add_callback(Clock())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    trainer.train()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return {"step_seconds": times[2:], "peak_mib": (after - before) * 1024 / scale / 1024}


def _child(method: str, preset: str, steps: int, seed: int, queue: Any) -> None:
    try:
        queue.put(measure(method, preset, steps, seed))
    except BaseException as exc:  # pragma: no cover - reported by the parent
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def _in_process(method: str, preset: str, steps: int, seed: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(method, preset, steps, seed, queue))
    proc.start()
    result: dict[str, Any] = queue.get()
    proc.join()
    return result


def run_bench(args: argparse.Namespace) -> int:
    """The ``bench`` command: write ``bench.json`` with per-method rows and RA^2/RMU ratios."""
    from paperstack.errors import PaperstackError
    from paperstack.records import Manifest, Results, Row, prepare_out_dir, write_results
    from paperstack.stats import mean_ci
    from ra2_unlearn import __version__

    if args.steps < 3:
        raise PaperstackError(f"--steps {args.steps}: needs at least 3 timed steps")
    out = prepare_out_dir(args.out)
    config = {"preset": args.preset, "steps": args.steps, "batch_size": 16, "threads": 1}
    manifest = Manifest.collect("ra2-unlearn", __version__, seed=args.seed, config=config)
    measured = {m: _in_process(m, args.preset, args.steps, args.seed) for m in ("rmu", "ra2")}
    for m, res in measured.items():
        if "error" in res:
            raise PaperstackError(f"bench {m}: {res['error']}")
    rows = []
    for m, res in measured.items():
        mean, ci = mean_ci(res["step_seconds"])
        n = len(res["step_seconds"])
        rows.append(Row(system=m, metric="step_seconds", value=mean, ci95=ci, n=n, unit="s"))
        rows.append(Row(system=m, metric="peak_rss_growth", value=res["peak_mib"], unit="MiB"))
    t_rmu = sum(measured["rmu"]["step_seconds"]) / len(measured["rmu"]["step_seconds"])
    t_ra2 = sum(measured["ra2"]["step_seconds"]) / len(measured["ra2"]["step_seconds"])
    rows.append(Row(system="ra2/rmu", metric="time_ratio", value=t_ra2 / t_rmu))
    mem = measured["rmu"]["peak_mib"]
    if mem > 0:
        rows.append(
            Row(system="ra2/rmu", metric="memory_ratio", value=measured["ra2"]["peak_mib"] / mem)
        )
    results = Results(manifest=manifest.finish(), rows=rows, claims=[])
    path = write_results(out / "bench.json", results)
    print(
        f"ra2: wrote {path} (RA^2 step {t_ra2 * 1e3:.1f} ms vs RMU {t_rmu * 1e3:.1f} ms: "
        f"{t_ra2 / t_rmu:.2f}x; peak RSS growth {measured['ra2']['peak_mib']:.1f} vs "
        f"{mem:.1f} MiB)"
    )
    return 0
