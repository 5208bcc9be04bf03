#!/usr/bin/env bash
# progress-advantage on a lent GPU, one step of tools/gpu-sweep (budget GPU_BUDGET_S, 40 s
# there): the scoring cost of progress advantage (policy + reference forward passes) against a
# confidence pass (policy only), both through the package's LogRatioScorer, on Qwen2-0.5B-shaped
# random-weight models in bf16 (built on the GPU: no download), timed interleaved with
# paperstack.bench (median of per-repeat ratios, 95% interval).
#
#   bash packages/progress-advantage/benchmarks/gpu.sh     # alone: GPU_BUDGET_S defaults to 480
#   python3 tools/gpu-sweep --only progress-advantage      # as the sweep runs it
#
# Claims: the method needs exactly one extra forward pass of a same-size model, so its cost is
# at most about twice the confidence pass (speed ratio >= 1/2.25, the package's bound; the paper
# gives no time); and its policy log-probs are bit-identical to the confidence pass's (the same
# forward, so the extra pass cannot change what is scored). Writes $OUT/bench.json + bench.md.
# The gpu-marked tests are not run here (the budget); `pytest -m gpu` runs them.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" progress-advantage
"$PY" - "$ROOT" "$OUT" "$(gpu_left)" <<'PY'
import sys
import time

start = time.monotonic()
root, out, left = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = start + left - 4
sys.path.insert(0, f"{root}/tools")

import numpy as np
import torch
from _gpu import write_bench
from paperstack import tasks, tiny
from paperstack.bench import compare_speed
from progress_advantage.bench import build_bench_model
from progress_advantage.scoring import LogRatioScorer
from progress_advantage.trajectory import Trajectory

dev, shape, n, lines = "cuda", "0.5b", 64, 16
tok = tiny.build_tokenizer(model_max_length=4096)
with torch.device(dev):
    policy = build_bench_model(shape, tok, 0).to(torch.bfloat16)
    reference = build_bench_model(shape, tok, 1).to(torch.bfloat16)
task = tasks.get("arithmetic", min_ops=lines, max_ops=lines)
trajs = [Trajectory.from_lines(e.prompt, e.answer) for e in task.generate(n, seed=0, split="test")]
scorer = LogRatioScorer(policy, reference, tok, batch_size=64)


def policy_logp(scores):
    return np.concatenate([s.policy_logp for s in scores])


cmp = compare_speed(
    {
        "confidence": lambda: scorer.score(trajs, with_reference=False),
        "progress-advantage": lambda: scorer.score(trajs),
    },
    baseline="confidence", repeats=15, warmup=2, sync=torch.cuda.synchronize, seed=0,
    check=lambda o, r: float(np.max(np.abs(policy_logp(o) - policy_logp(r)))), tolerance=0.0,
    budget_s=max(2.0, deadline - time.monotonic() - 3), min_repeats=6,
)
tokens = int(sum(s.step.size for s in scorer.score(trajs, with_reference=False)))
rows = cmp.rows(split=shape)
claims = [
    cmp.correctness_claim("progress-advantage", rows, split=shape,
                          id="pa_policy_logp_identical_to_confidence"),
    cmp.speedup_claim(
        "pa_cost_at_most_2_25x",
        "progress advantage (policy + reference passes) costs at most 2.25x a confidence "
        "pass (one extra same-size forward): speed ratio >= 1/2.25",
        "progress-advantage", at_least=1 / 2.25, rows=rows, split=shape),
]
config = {"shape": shape, "trajectories": n, "solution_lines": lines, "scored_tokens": tokens,
          "dtype": "bfloat16", "bench": cmp.to_dict()}
write_bench(out, "progress-advantage", rows, claims, config,
            f"{n} arithmetic solutions of {lines} lines ({tokens} scored tokens), Qwen2-0.5B-"
            "shaped random models in bf16; `speedup_vs_confidence` = t_confidence / t_pa "
            "(0.5 = exactly twice the cost).")
print(f"gpu.sh: pa/confidence speed {cmp.speedup('progress-advantage')[0]:.3f} "
      f"({cmp.repeats} repeats) in {time.monotonic() - start:.0f} s", flush=True)
PY
