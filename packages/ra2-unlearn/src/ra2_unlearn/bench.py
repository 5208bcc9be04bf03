"""``ra2 bench``: wall time and peak memory per unlearning step, RA^2 vs RMU, in one run.

Time (:func:`paperstack.bench.compare_speed`): per seed, both methods train a fresh copy of the
same model on the same data, batch and number of steps; after one warm-up round, ``repeats``
rounds run each method once in a shuffled order, and the ``time_ratio`` RA^2 / RMU is the
**median** of the per-round ratios with its order-statistic 95% interval (per seed, and pooled
over the rounds of every seed). RA^2's anchor bank is built once per seed before timing (it is
built once per unlearning run, not per step). One torch thread on a CPU, recorded.

Output check: RA^2 and RMU optimise different objectives, so their weights legitimately differ
(on a random model RA^2 may attract no position and move nothing at all); what must agree is
*which* weights an unlearning step may touch: both train the same parameters (the MLP
down-projections of the configured layers), RA^2 moves none outside that set, and every weight
stays finite. The check counts the parameters where this fails (``inf`` when a weight is not
finite): it must be 0 on every seed.

Memory, per method and seed, in its own spawned process (so one method's allocations cannot
hide the other's peak) over ``memory_steps`` steps: on the CPU the growth of the process's
peak resident set over its value just before training (``ru_maxrss``); on CUDA
``torch.cuda.max_memory_allocated`` during training. Ratios RA^2 / RMU are the result.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import resource
import shutil
import sys
import time
from typing import Any

from paperstack.bench import repeats_for
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
    shutil.rmtree(str(args.output_dir), ignore_errors=True)  # training_arguments' temporary folder
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


Touched = tuple[frozenset[str], frozenset[str], bool]


def _touched(model: Any, base: dict[str, Any], trainable: frozenset[str]) -> Touched:
    """(parameters that differ from ``base``, those the trainer trained, all weights finite)."""
    import torch

    params = dict(model.named_parameters())
    moved = frozenset(n for n, p in params.items() if not torch.equal(p.detach(), base[n]))
    return moved, trainable, all(bool(torch.isfinite(p).all()) for p in params.values())


def touched_difference(out: Touched, ref: Touched) -> float:
    """The output check: parameters trained by one method only, plus those ``out`` moved
    outside the baseline's trained set; ``inf`` when a weight of either is not finite."""
    if not (out[2] and ref[2]):
        return math.inf
    return float(len(out[1] ^ ref[1]) + len(out[0] - ref[1]))


def timed_methods(preset: str, steps: int, seed: int, device: str) -> dict[str, Any]:
    """Zero-argument callables, one per method: train a fresh copy of the seed's model for
    ``steps`` steps and return what :func:`touched_difference` compares."""
    import copy

    import torch
    from transformers.trainer_callback import PrinterCallback

    from paperstack import tiny
    from paperstack.tasks import FactWorld
    from ra2_unlearn.config import UnlearnConfig
    from ra2_unlearn.data import ForgetRetainCollator, ForgetRetainDataset, encode, fact_splits
    from ra2_unlearn.trainer import UnlearnTrainer, build_anchor_bank, training_arguments

    tok = tiny.build_tokenizer()
    model: Any = tiny.build_model(preset, tok, seed=seed)
    model = model.to(device)
    ref = copy.deepcopy(model)
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    splits = fact_splits(FactWorld(n_entities=40))
    layer = min(1, len(model.model.layers) - 1)
    data = ForgetRetainDataset(encode(tok, splits.forget), encode(tok, splits.retain))
    collator = ForgetRetainCollator(int(tok.pad_token_id))
    configs = {m: UnlearnConfig(method=m, layer=layer) for m in ("rmu", "ra2")}  # type: ignore[arg-type]
    anchors = build_anchor_bank(ref, tok, splits.retain, configs["ra2"])

    def method(name: str) -> Any:
        def run() -> Touched:
            net = copy.deepcopy(model)
            args = training_arguments(steps, 5e-5, 16, seed, device)
            trainer = UnlearnTrainer(net, ref, configs[name], args, data, collator,
                                     anchors=anchors if name == "ra2" else None)  # fmt: skip
            trainer.remove_callback(PrinterCallback)
            trainable = frozenset(n for n, p in net.named_parameters() if p.requires_grad)
            trainer.train()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            shutil.rmtree(str(args.output_dir), ignore_errors=True)  # the same cost for both
            return _touched(net, base, trainable)

        return run

    return {"rmu": method("rmu"), "ra2": method("ra2")}


def run_bench(run: Run) -> Report:
    """The ``bench`` command: per-seed interleaved timings, the output check, and memory."""
    import torch

    from paperstack.bench import compare_speed, median_ci, set_threads
    from paperstack.errors import PaperstackError
    from paperstack.records import Claim, Row

    steps = 3 if run.quick else run.args.steps
    repeats = repeats_for(run, default=7, quick=6)
    memory_steps = 3
    preset = "micro" if run.quick else run.args.preset
    threads = set_threads(1) if run.device == "cpu" else torch.get_num_threads()
    rows: list[Row] = []
    pooled: list[float] = []
    matched = 0
    memory: dict[int, dict[str, float]] = {}
    timing: dict[str, Any] = {}
    with run.progress(3 * len(run.seeds), "bench") as bar:
        for seed in run.seeds:
            cmp = compare_speed(timed_methods(preset, steps, seed, run.device), baseline="rmu",
                                repeats=repeats, warmup=1, check=touched_difference,
                                tolerance=0.0, seed=seed)  # fmt: skip
            timing[str(seed)] = cmp.to_dict() | {"moved_difference": cmp.diff["ra2"]}
            ratios = [a / b for a, b in zip(cmp.times["ra2"], cmp.times["rmu"], strict=True)]
            pooled += ratios
            med, ci = median_ci(ratios)
            rows += cmp.rows(split=f"seed {seed}")
            rows.append(Row(system="ra2/rmu", metric="time_ratio", value=med, ci95=ci,
                            n=len(ratios), split=f"seed {seed}"))  # fmt: skip
            matched += int(cmp.matches("ra2"))
            bar.advance(method="timed")
            memory[seed] = {}
            for m in ("rmu", "ra2"):
                res = _in_process(m, preset, memory_steps, seed, run.device)
                if "error" in res:
                    raise PaperstackError(f"bench {m}: {res['error']}")
                memory[seed][m] = float(res["peak_mib"])
                bar.advance(method=m)
    med, ci = median_ci(pooled)
    rows.append(Row(system="ra2/rmu", metric="time_ratio", value=med, ci95=ci, n=len(pooled),
                    unit="x RMU (median of every round)"))  # fmt: skip
    rows.append(Row.proportion("ra2", "matches_rmu", matched, len(run.seeds)))
    for m in ("rmu", "ra2"):
        mem = {s: v[m] for s, v in memory.items()}
        rows.append(Row.from_seeds(m, "peak_memory_growth", mem, unit="MiB"))
    if all(v["rmu"] > 0 for v in memory.values()):
        mem_ratio = {s: v["ra2"] / v["rmu"] for s, v in memory.items()}
        rows.append(Row.from_seeds("ra2/rmu", "memory_ratio", mem_ratio))
    claims = [
        Claim.compare(
            "ra2_trains_the_same_parameters_as_rmu",
            "RA^2 trains the parameters RMU trains (the configured MLP down-projections), moves "
            "no other (bit-identical to the base) and keeps every weight finite, on every seed",
            rows, ("ra2", "matches_rmu"), "ge", 1.0, exact=True,
        )
    ]  # fmt: skip
    summary = (
        f"RA^2 step time {med:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}] RMU's (median of {len(pooled)} "
        f"interleaved rounds over {len(run.seeds)} seed(s), {run.device}); same parameters "
        f"trained, none other moved, on {matched}/{len(run.seeds)} seeds"
    )
    intro = (
        f"RA^2 vs RMU, {steps} unlearning steps of the `{preset}` model per timed call: per seed, "
        f"one warm-up round, then {repeats} interleaved rounds (shuffled order); time ratios are "
        "medians of per-round ratios with order-statistic 95% intervals, per seed and pooled. "
        "Output check in the same run: both methods train the same parameters and move no "
        f"other, all finite. Memory from one spawned process per method and seed "
        f"({memory_steps} steps)."
        + (f" CPU, {threads} torch thread, on a shared 2-core machine loaded by other jobs."
           if run.device == "cpu" else "")
    )  # fmt: skip
    config = {"preset": preset, "steps": steps, "repeats": repeats, "batch_size": 16,
              "threads": threads, "memory_steps": memory_steps, "timing": timing}  # fmt: skip
    return Report(rows, claims, intro=intro, config=config, summary=summary)
