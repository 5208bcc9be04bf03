"""Run by ``accelerate launch --multi_gpu --num_processes 2`` from test_distributed.py (not a
test itself): two RLOO steps of :func:`train_rl_policy` on a micro model, on the CPU with gloo.

The micro model solves no arithmetic, so the verifier's reward is always 0 and RLOO's advantages
would vanish; a reward for the share of digits gives every group a spread, so each rank's
gradient is real and the ranks must all-reduce it to end with the same weights. Each rank writes
its world size, the objective it logged and a checksum of its weights to ``<out>/rank<r>.json``.
"""

import json
import sys
from pathlib import Path

import torch
from digit_task import DigitRewardArithmetic
from progress_advantage.policy import RLSettings, train_rl_policy

from paperstack import tiny
from paperstack.testing import end_distributed


def main(out: Path) -> None:
    torch.set_num_threads(1)
    tok = tiny.build_tokenizer()
    reference = tiny.build_model("micro", tok, seed=1)
    settings = RLSettings(beta=0.1, learning_rate=1e-2, prompts_per_step=2, num_generations=4,
                          max_completion_length=12, train_prompts=16, min_steps=2, max_steps=2,
                          window=1)  # fmt: skip
    policy, result = train_rl_policy(reference, tok, DigitRewardArithmetic(), settings, seed=0)
    moved = sum(
        float((p - q).abs().sum())
        for p, q in zip(policy.parameters(), reference.parameters(), strict=True)
    )
    record = {
        "rank": result.rank,
        "world": result.world_size,
        "steps": result.steps,
        "reward": result.reward,
        "objective": result.objective,
        "moved": moved,
        "checksum": float(sum(p.detach().double().sum() for p in policy.parameters())),
    }
    (out / f"rank{result.rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    end_distributed()  # a clean exit for every rank
