"""Size the LM arm on a VALIDATION seed (never a reported one) before the reported demo.

    python benchmarks/lm_validation.py --out reports/progress-advantage/validation \
        [--seed 100] [--lrs 3e-4,1e-3] [--steps 60]

For each learning rate it runs the LM arm of the demo (:func:`run_lm_seed`) on the validation
seed with RLOO for exactly ``--steps`` steps (no early stop), and records only what the design
decisions need: the reference's accuracy and headroom, the per-step objective
``J = r - beta*KL`` and per-token KL of RL, the premise (J of the policy vs the reference on
fresh training prompts), the Monte-Carlo agreement, and wall times of every phase. The plateau
rule's settings (``min_steps``, ``window``, ``plateau_tol``) are then chosen offline on the
recorded J curves. The claims' comparisons (best-of-N, AUROC, attribution) are not printed.
Writes ``validation.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from progress_advantage.experiment import LMSetup, prepare_mc, reference_model, run_lm_seed
from progress_advantage.policy import PlateauStop, RLSettings


def plateau_stop_at(objective: list[float], settings: RLSettings) -> tuple[int, bool]:
    """Where the package's plateau rule would have stopped on a recorded J curve."""
    rule = PlateauStop(settings)
    for k, j in enumerate(objective, 1):
        rule.result.objective.append(j)
        if rule.should_stop():
            return k, rule.result.plateaued
    return len(objective), False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=100)
    p.add_argument("--lrs", default="3e-4,1e-3")
    p.add_argument("--steps", type=int, default=60)
    args = p.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    base = LMSetup()
    t0 = time.perf_counter()
    reference, tok = reference_model(base, progress=False)
    out: dict[str, object] = {"seed": args.seed, "setup": asdict(base), "runs": {}}
    t = time.perf_counter()
    mc = prepare_mc(reference, tok, base, args.seed)
    out["mc_seconds"] = time.perf_counter() - t
    out["mc_prefixes"] = len(mc.prefixes)
    print(
        f"reference load {t - t0:.1f}s; MC {out['mc_seconds']:.1f}s for {len(mc.prefixes)} prefixes"
    )
    runs: dict[str, object] = {}
    for lr in [float(x) for x in args.lrs.split(",")]:
        rl = replace(base.rl, learning_rate=lr, min_steps=args.steps, max_steps=args.steps)
        setup = replace(base, rl=rl)
        t = time.perf_counter()
        outcome = run_lm_seed(reference, tok, setup, args.seed, mc, log=print)
        per_beta = {}
        for beta, b in outcome.betas.items():
            j_pol = float(np.mean(list(b.objective["RL policy"].values())))
            j_ref = float(np.mean(list(b.objective["reference"].values())))
            stops = {}
            for min_steps in (20, 30, 40):
                for window in (5, 10):
                    for tol in (0.005, 0.01, 0.02):
                        s = replace(rl, min_steps=min_steps, window=window, plateau_tol=tol)
                        stops[f"min{min_steps}-w{window}-tol{tol:g}"] = plateau_stop_at(
                            b.rl.objective, s
                        )
            per_beta[f"{beta:g}"] = {
                "objective": b.rl.objective,
                "kl_per_token": b.rl.kl,
                "reward": b.rl.reward,
                "J_policy_fresh": j_pol,
                "J_reference_fresh": j_ref,
                "mc_spearman": b.mc_spearman,
                "mc_pairs": b.mc_pairs,
                "sample_accuracy": float(np.mean(list(b.sample_accuracy.values()))),
                "plateau_stop": stops,
            }
            print(
                f"lr {lr:g} beta {beta:g}: kl/token last10 {np.mean(b.rl.kl[-10:]):.4f}, "
                f"J first10 {np.mean(b.rl.objective[:10]):.3f} last10 "
                f"{np.mean(b.rl.objective[-10:]):.3f}; fresh J pol {j_pol:.3f} ref {j_ref:.3f}; "
                f"MC spearman {b.mc_spearman:.3f} ({b.mc_pairs} pairs)"
            )
        runs[f"{lr:g}"] = {
            "seconds": time.perf_counter() - t,
            "headroom": outcome.headroom,
            "reference_accuracy": float(np.mean(list(outcome.reference_accuracy.values()))),
            "betas": per_beta,
        }
        print(f"lr {lr:g}: {runs[f'{lr:g}']['seconds']:.0f}s, headroom {outcome.headroom}")
        out["runs"] = runs
        (args.out / "validation.json").write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
