"""``opct bench``: wall time of OPCT training over SFT (BCT) training, on :mod:`paperstack.bench`.

Both methods train a fresh copy of the same base model on the same pairs for ``steps`` steps of
the same batch size; BCT's targets (the base model's own responses to the clean prompts) are
sampled once before timing, as the method does offline, so the SFT side times its training
only. :func:`paperstack.bench.compare_speed` warms both up (one round), then runs ``repeats``
rounds calling each once in a shuffled order; ``step_time_ratio`` is the **median** of the
per-round ratios ``t_opct / t_sft`` with its order-statistic 95% interval (the copy of the
small base model sits in both sides alike). On CUDA, peak memory is measured per method in
one further call each.

Output check: OPCT and SFT optimise different losses, so their weights legitimately differ;
what must agree for the ratio to compare equal work is the number of optimiser steps taken
(``steps`` of ``batch_size`` pairs each), and both must end with finite weights and a finite
loss on every logged step. The check is the difference in steps taken (``inf`` when a weight
or loss is not finite): it must be 0.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from paperstack.bench import repeats_for
from paperstack.contract import Report, Run
from paperstack.records import Claim, Row

__all__ = ["run_bench", "work_difference"]

#: (optimiser steps taken, every weight and logged loss finite)
Work = tuple[int, bool]


def work_difference(out: Work, ref: Work) -> float:
    """The output check: |steps taken - the baseline's|, ``inf`` if either is not finite."""
    if not (out[1] and ref[1]):
        return math.inf
    return float(abs(out[0] - ref[0]))


def timed_systems(base: Any, tok: Any, pairs: Any, settings: Any, targets: Any) -> dict[str, Any]:
    """``{"sft": ..., "opct": ...}``: each trains a fresh copy of ``base`` and returns
    :data:`Work` (BCT from the ``targets`` sampled before timing)."""
    import torch

    from opct import harness

    def finished(net: Any, result: Any) -> Work:
        finite = all(bool(torch.isfinite(p).all()) for p in net.parameters())
        finite = finite and all(math.isfinite(v) for v in result.losses)
        return int(result.steps), finite

    def opct() -> Work:
        net = copy.deepcopy(base)
        return finished(net, harness.train_opct(net, tok, pairs, settings))

    def sft() -> Work:
        net = copy.deepcopy(base)
        return finished(net, harness.train_bct(net, tok, pairs, settings, targets=targets))

    return {"sft": sft, "opct": opct}


def run_bench(run: Run) -> Report:
    """The ``bench`` command (see the module docstring)."""
    import torch

    from opct import demo as d
    from opct import harness
    from opct.pairs import mixed_pairs
    from opct.world import AlignmentWorld
    from paperstack.bench import compare_speed, median_ci, set_threads

    threads = set_threads(torch.get_num_threads())
    config = d.QUICK if run.quick else d.DemoConfig()
    repeats = repeats_for(run, default=7, quick=6)
    world = AlignmentWorld()
    pairs = mixed_pairs(world, max(64, config.batch_size * run.args.steps), seed=run.seed)
    settings = harness.TrainSettings(steps=run.args.steps, batch_size=config.batch_size,
                                     max_completion_length=config.max_completion_length,
                                     seed=run.seed, device=run.device)  # fmt: skip
    cuda = run.device.startswith("cuda")
    base, tok = d.load_base(config, run.model, world)
    base.to(run.device)
    targets = harness.bct_targets(base, tok, pairs, seed=run.seed,
                                  max_new_tokens=config.max_completion_length)  # fmt: skip

    systems = timed_systems(base, tok, pairs, settings, targets)
    opct, sft = systems["opct"], systems["sft"]
    sync = torch.cuda.synchronize if cuda else None
    with run.progress(1, "warm-up + interleaved rounds") as bar:
        cmp = compare_speed(systems, baseline="sft", repeats=repeats,
                            warmup=1, check=work_difference, tolerance=0.0, sync=sync,
                            seed=run.seed)  # fmt: skip
        bar.advance()
    rows = cmp.rows()
    ratio, ci = median_ci([o / s for o, s in zip(cmp.times["opct"], cmp.times["sft"], strict=True)])
    rows.append(Row(system="opct/sft", metric="step_time_ratio", value=ratio, ci95=ci,
                    n=cmp.repeats, unit="x an SFT step (median)"))  # fmt: skip
    memory = ""
    if cuda:
        peaks = {}
        for name, fn in (("opct", opct), ("sft", sft)):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            fn()
            torch.cuda.synchronize()
            peaks[name] = float(torch.cuda.max_memory_allocated())
        rows.append(Row(system="opct/sft", metric="peak_memory_ratio",
                        value=peaks["opct"] / peaks["sft"], n=1))  # fmt: skip
        memory = f"; peak memory {peaks['opct'] / peaks['sft']:.2f}x"
    claims: list[Claim] = [cmp.correctness_claim("opct", rows, id="opct_takes_the_same_steps")]
    summary = (
        f"an OPCT step takes {ratio:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}] an SFT step (median of "
        f"{cmp.repeats} interleaved rounds of {settings.steps} steps, batch "
        f"{settings.batch_size}, device {run.device}"
        + (memory or "; memory not measured on CPU")
        + ")"
    )
    intro = (
        f"OPCT vs SFT (BCT) consistency training of the `{config.preset}` base, {settings.steps} "
        f"steps of {settings.batch_size} pairs per timed call, BCT's targets sampled once "
        f"before timing; one warm-up round, then {cmp.repeats} interleaved rounds (shuffled "
        "order); the ratio is the median of per-round ratios with its order-statistic 95% "
        "interval. Output check in the same run: both take the same number of steps and end "
        f"with finite weights and losses. {threads} torch thread(s)"
        + (", on a shared 2-core CPU loaded by other jobs." if not cuda else ".")
    )
    return Report(rows, claims, summary=summary, intro=intro,
                  config={"repeats": repeats, "steps": settings.steps, "threads": threads,
                          "batch_size": settings.batch_size, "preset": config.preset,
                          "timing": cmp.to_dict()})  # fmt: skip
