"""Time a slice of ``demo --real`` on VALIDATION seed 100 (never reported) to size the arm.

    python benchmarks/real_cost_slice.py --out DIR [--steps 3] [--mc-trajectories 4]

SmolLM2-135M-Instruct on the ``one-op-chat`` task: ``--steps`` RLOO steps of a LoRA (r 16)
policy at beta 0.1 (4 prompts x 4 completions, 16 new tokens), timed per step by a callback,
and the MC soft-advantage data of ``--mc-trajectories`` reference samples x their step
prefixes x 8 rollouts (``prepare_mc``), timed. One torch thread. Writes ``cost.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from progress_advantage.experiment import LMSetup, lm_task, prepare_mc, reference_model
from progress_advantage.policy import RLSettings, train_rl_policy
from transformers import TrainerCallback


class Clock(TrainerCallback):  # type: ignore[misc]
    def __init__(self) -> None:
        self.ticks = [time.perf_counter()]

    def on_step_end(self, args, state, control, **kw):  # type: ignore[no-untyped-def]
        self.ticks.append(time.perf_counter())
        print(f"step {len(self.ticks) - 1}: {self.ticks[-1] - self.ticks[-2]:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--mc-trajectories", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    seed = 100
    rl = RLSettings(
        learning_rate=2e-4,
        prompts_per_step=4,
        num_generations=4,
        max_completion_length=16,
        train_prompts=64,
        min_steps=args.steps,
        max_steps=args.steps,
        window=1,
        lora_r=16,
    )
    setup = LMSetup(
        model="smollm2-135m-instruct",
        task="one-op-chat",
        rl=rl,
        betas=(0.1,),
        mc_trajectories=args.mc_trajectories,
        mc_rollouts=8,
        max_new_tokens=16,
        batch_size=64,
    )
    reference, tok = reference_model(setup, progress=False)
    clock = Clock()
    print("model loaded", flush=True)
    t0 = time.perf_counter()
    _, result = train_rl_policy(reference, tok, lm_task(setup), rl, seed=seed, callbacks=[clock])
    rl_wall = time.perf_counter() - t0
    steps = [b - a for a, b in zip(clock.ticks, clock.ticks[1:], strict=False)]
    t0 = time.perf_counter()
    mc = prepare_mc(reference, tok, setup, seed)
    mc_wall = time.perf_counter() - t0
    n_prefixes = int(mc.rewards.shape[0]) if hasattr(mc, "rewards") else None
    out = {
        "seed": seed,
        "rl_wall_s": rl_wall,
        "rl_step_s": steps,
        "rl_objective": list(result.objective),
        "mc_wall_s": mc_wall,
        "mc_trajectories": args.mc_trajectories,
        "mc_rollouts": 8,
        "mc_prefixes": n_prefixes,
    }
    print(json.dumps(out), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cost.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
