"""``ra2 bench``: wall time and peak memory per unlearning step, RA^2 vs RMU, in one run.

Each method runs in its own spawned process (so one method's allocations cannot hide the
other's peak) on the same model, data, batch and steps; the first two steps are warm-up.
Memory on the CPU is the growth of the process's peak resident set over its value just
before training (``ru_maxrss``); on CUDA it is ``torch.cuda.max_memory_allocated`` during
training. Ratios RA^2 / RMU are the result; absolute times depend on the machine.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import sys
import time
from typing import Any

from paperstack.contract import Report, Run

__all__ = ["measure", "run_bench"]


def measure(method: str, preset: str, steps: int, seed: int, device: str = "cpu") -> dict[str, Any]:
    """Per-step seconds and peak memory growth (MiB) of ``steps`` unlearning steps."""
    import copy

    import torch
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback

    from paperstack import tiny
    from paperstack.tasks import FactWorld
    from ra2_unlearn.config import UnlearnConfig
    from ra2_unlearn.data import ForgetRetainCollator, ForgetRetainDataset, encode, fact_splits
    from ra2_unlearn.trainer import UnlearnTrainer, build_anchor_bank, training_arguments

    torch.set_num_threads(1)
    tok = tiny.build_tokenizer()
    model: Any = tiny.build_model(preset, tok, seed=seed)
    model = model.to(device)
    ref = copy.deepcopy(model)
    splits = fact_splits(FactWorld(n_entities=40))
    layer = min(1, len(model.model.layers) - 1)
    cfg = UnlearnConfig(method=method, layer=layer)  # type: ignore[arg-type]
    anchors = build_anchor_bank(ref, tok, splits.retain, cfg) if method == "ra2" else None
    data = ForgetRetainDataset(encode(tok, splits.forget), encode(tok, splits.retain))
    times: list[float] = []
    cuda = device.startswith("cuda")

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            if cuda:
                torch.cuda.synchronize()
            self.t = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.t)

    args = training_arguments(steps + 2, 5e-5, 16, seed, device)
    trainer = UnlearnTrainer(
        model, ref, cfg, args, data, ForgetRetainCollator(int(tok.pad_token_id)), anchors=anchors
    )
    trainer.remove_callback(PrinterCallback)  # the Trainer's end-of-run dict is not ours to print
    trainer.add_callback(Clock())
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    trainer.train()
    if cuda:
        return {
            "step_seconds": times[2:],
            "peak_mib": (torch.cuda.max_memory_allocated() - base) / 2**20,
        }
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return {"step_seconds": times[2:], "peak_mib": (after - before) * 1024 / scale / 1024}


def _child(method: str, preset: str, steps: int, seed: int, device: str, queue: Any) -> None:
    try:
        queue.put(measure(method, preset, steps, seed, device))
    except BaseException as exc:  # pragma: no cover - reported by the parent
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def _in_process(method: str, preset: str, steps: int, seed: int, device: str) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(method, preset, steps, seed, device, queue))
    proc.start()
    result: dict[str, Any] = queue.get()
    proc.join()
    return result


def run_bench(run: Run) -> Report:
    """The ``bench`` command: per-method step times and memory, and the RA^2/RMU ratios.

    The methods alternate over ``run.seeds`` (one process per method and seed), so each
    seed's time ratio is measured under the same machine load; the ratio row holds the
    per-seed ratios.
    """
    from paperstack.errors import PaperstackError
    from paperstack.records import Row

    steps = 3 if run.quick else run.args.steps
    if steps < 3:
        raise PaperstackError(f"--steps {steps}: needs at least 3 timed steps")
    preset = "micro" if run.quick else run.args.preset
    measured: dict[int, dict[str, dict[str, Any]]] = {}
    with run.progress(2 * len(run.seeds), "bench") as bar:
        for seed in run.seeds:
            measured[seed] = {}
            for m in ("rmu", "ra2"):
                res = _in_process(m, preset, steps, seed, run.device)
                if "error" in res:
                    raise PaperstackError(f"bench {m}: {res['error']}")
                measured[seed][m] = res
                bar.advance(method=m)
    rows = []
    for m in ("rmu", "ra2"):
        per_seed = {s: sum(v[m]["step_seconds"]) / len(v[m]["step_seconds"]) for s, v in
                    measured.items()}  # fmt: skip
        rows.append(Row.from_seeds(m, "step_seconds", per_seed, unit="s"))
        mem = {s: v[m]["peak_mib"] for s, v in measured.items()}
        rows.append(Row.from_seeds(m, "peak_memory_growth", mem, unit="MiB"))
    ratio = {s: (sum(v["ra2"]["step_seconds"]) / max(sum(v["rmu"]["step_seconds"]), 1e-12))
             for s, v in measured.items()}  # fmt: skip
    rows.append(Row.from_seeds("ra2/rmu", "time_ratio", ratio))
    if all(v["rmu"]["peak_mib"] > 0 for v in measured.values()):
        mem_ratio = {s: v["ra2"]["peak_mib"] / v["rmu"]["peak_mib"] for s, v in measured.items()}
        rows.append(Row.from_seeds("ra2/rmu", "memory_ratio", mem_ratio))
    t_row = next(r for r in rows if r.metric == "time_ratio")
    summary = f"RA^2 step time {t_row.value:.2f}x RMU's ({run.device})"
    config = {"preset": preset, "steps": steps, "batch_size": 16, "threads": 1}
    return Report(rows, [], intro="RA^2 vs RMU per unlearning step.", config=config,
                  summary=summary)  # fmt: skip
