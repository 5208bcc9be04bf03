"""Scoring cost: progress advantage (policy + reference passes) against a confidence baseline
(policy pass only), in one run, as tokens per second and their ratio.

The method needs one extra forward pass of a model of the same size, so its cost should be
about twice the confidence pass, not more; the bench checks that claim on the toy models (random
weights: speed does not depend on what the weights know).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from paperstack.records import Claim, Manifest, Results, Row, prepare_out_dir, write_results
from paperstack.stats import mean_ci
from progress_advantage import __version__

__all__ = ["run_bench"]

PA_SYSTEM = "progress-advantage (policy + reference)"
CONF_SYSTEM = "confidence (policy only)"


def run_bench(
    out_dir: str | Path, preset: str, n_trajectories: int, repeats: int, seed: int = 0
) -> Results:
    import torch

    from paperstack import tasks, tiny
    from progress_advantage.scoring import LogRatioScorer
    from progress_advantage.trajectory import Trajectory

    out = prepare_out_dir(out_dir)
    manifest = Manifest.collect(
        "progress-advantage",
        __version__,
        seed=seed,
        config={"preset": preset, "trajectories": n_trajectories, "repeats": repeats},
    )
    tok = tiny.build_tokenizer()
    policy = tiny.build_model(preset, tok, seed)
    reference = tiny.build_model(preset, tok, seed + 1)
    task = tasks.get("arithmetic")
    trajs = [
        Trajectory.from_lines(e.prompt, e.answer)
        for e in task.generate(n_trajectories, seed=seed, split="test")
    ]
    scorer = LogRatioScorer(policy, reference, tok, batch_size=64)
    tokens = sum(int(ts.step.size) for ts in scorer.score(trajs[:4])) and sum(
        int(ts.step.size) for ts in scorer.score(trajs, with_reference=False)
    )
    pa_rate, conf_rate, ratio = [], [], []
    with torch.inference_mode():
        for _ in range(repeats):
            t0 = time.perf_counter()
            scorer.score(trajs, with_reference=False)
            t1 = time.perf_counter()
            scorer.score(trajs)
            t2 = time.perf_counter()
            conf_rate.append(tokens / (t1 - t0))
            pa_rate.append(tokens / (t2 - t1))
            ratio.append((t2 - t1) / (t1 - t0))
    rows = []
    for system, values in ((CONF_SYSTEM, conf_rate), (PA_SYSTEM, pa_rate)):
        mean, ci = mean_ci(values)
        rows.append(
            Row(system=system, metric="tokens_per_s", value=mean, ci95=ci, n=repeats, unit="tok/s")
        )
    mean, ci = mean_ci(ratio)
    rows.append(Row(system=CONF_SYSTEM, metric="time_ratio", value=1.0, n=repeats))
    rows.append(Row(system=PA_SYSTEM, metric="time_ratio", value=mean, ci95=ci, n=repeats))
    claims = [
        Claim.compare(
            "pa_cost_about_two_passes",
            "Scoring with progress advantage costs at most about twice a single-model "
            "confidence pass (time ratio <= 2.25).",
            rows,
            (PA_SYSTEM, "time_ratio"),
            "le",
            2.25,
        )
    ]
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    path = write_results(out / "bench.json", results)
    print(
        f"progress-advantage: wrote {path}: {np.mean(pa_rate):.0f} vs {np.mean(conf_rate):.0f} "
        f"scored tokens/s, time ratio {mean:.2f}x ({tokens} tokens, {repeats} repeats)"
    )
    return results
