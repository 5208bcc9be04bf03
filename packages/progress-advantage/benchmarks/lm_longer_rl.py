"""Does more RL lift Spearman(PA, MC) toward the gate? One run per RL design, on a VALIDATION seed.

    nice -n 10 python benchmarks/lm_longer_rl.py --out benchmarks/validation/longer_rl \\
        [--seed 100] [--designs a:0.1:8:8:200,b:0.1:16:8:100] [--every 25]

The 0.2.1 demo's LM claims are inconclusive because the policies' step log-ratios do not rank
the (prefix, step) pairs as the Monte-Carlo soft advantage does (Spearman 0.21 / 0.13 against a
gate of 0.5) after 40-80 RLOO steps of 8 prompts x 8 completions. This script measures, on
validation seed 100 only (never a reported seed, no claim computed), whether a longer run or a
larger batch moves that number, without retraining once per length: each design
(``name:beta:prompts:completions:steps``) is one RLOO run with the demo's settings otherwise
(lr 1e-4, KL in the reward, no std scaling, no early stop), and a callback measures the policy
every ``--every`` steps:

- Spearman(β·log π/π_ref summed per step, MC soft advantage) on the demo's MC pairs (68
  reference samples of the validation seed's test problems, 12 reference rollouts per prefix);
- every second checkpoint, ``J = r − β·KL`` on the demo's fresh training-split prompts (32
  prompts x 4 samples), against the reference's, per prompt (a paired mean and t interval),
  and the policy's sample accuracy there.

It also measures how far the MC estimate itself can be trusted: the Spearman between the soft
advantages of the two halves of the 12 rollouts (split-half reliability, stepped up to 12
rollouts by Spearman-Brown). A perfect scorer's expected Spearman with a noisy estimate is
bounded by about the square root of that reliability, so if it is low the gate of 0.5 cannot
be passed by longer RL alone. Torch's RNG and the tokenizer's padding side are restored after
each measurement, so measuring does not change the training run. Writes ``longer_rl.json``
after every checkpoint (a killed run keeps what it measured).

``--real`` asks the same of ``demo --real``'s setup (``DemoConfig.real().lm``: SmolLM2 as the
reference, the ``one-op-chat`` task, a LoRA policy) and adds what gates that arm: the gap of
the policy's ``J`` to the optimum's value ``V*(x) = β log E_ref exp(r/β)`` on the same fresh
prompts (``premise_near_optimum``, the demo's estimator: reference samples per prompt,
log-mean-exp), measured at every ``--objective-every`` steps, so how many RLOO steps bring the
gap under the bar is read from one run on a validation seed::

    OMP_NUM_THREADS=1 python benchmarks/lm_longer_rl.py --real --out DIR --seed 100 \
        --designs real:0.1:4:4:40 --every 10 --objective-every 10 --objective-prompts 16
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from progress_advantage.experiment import (
    LMSetup,
    MCData,
    _label,
    _sample,
    _score,
    chat_prompt,
    lm_task,
    prepare_mc,
    reference_model,
)
from progress_advantage.metrics import spearman
from progress_advantage.policy import train_rl_policy
from progress_advantage.scoring import LogRatioScorer, progress_advantage
from progress_advantage.soft_advantage import mc_soft_advantages, soft_value
from transformers import TrainerCallback

from paperstack.stats import mean_ci


def mc_reliability(mc: MCData, beta: float) -> dict[str, float]:
    """Split-half Spearman of the MC soft advantages, and its Spearman-Brown step-up."""
    m = mc.rewards.shape[1]
    halves = [
        np.concatenate(mc_soft_advantages(mc.prefixes, mc.rewards[:, part], beta))
        for part in (slice(0, m // 2), slice(m // 2, m))
    ]
    r = spearman(halves[0], halves[1])
    full = np.concatenate(mc.advantages(beta))
    return {
        "split_half_spearman": r,
        "spearman_brown_full": 2 * r / (1 + r) if r > -1 else float("nan"),
        "pairs": int(full.size),
        "pairs_with_zero_mc_advantage": int((np.abs(full) < 1e-12).sum()),
    }


def fresh_objective(
    policy: Any, reference: Any, tok: Any, setup: LMSetup, beta: float, seed: int
) -> tuple[dict[str, float], float]:
    """Per-prompt ``J = r − β·Σ log π/π_ref`` of the policy on the demo's fresh prompts, and
    its sample accuracy (``run_lm_seed``'s premise measurement, same prompts and seeds)."""
    task: Any = lm_task(setup)
    obj_ex = task.generate(setup.n_objective, seed=30_000 + seed, split="train")
    prompts = [chat_prompt(task, e) for e in obj_ex]
    data = _label(
        task, obj_ex, _sample(policy, tok, prompts, setup.objective_samples, seed + 4, setup)
    )
    scored = _score(LogRatioScorer(policy, reference, tok, batch_size=setup.batch_size), data.trajs)
    j = {}
    for q, g in enumerate(data.groups):
        vals = [
            float(data.success[i])
            - beta * (0.0 if scored[i] is None else float(scored[i].log_ratio.sum()))
            for i in g
        ]
        j[str(q)] = float(np.mean(vals))
    return j, float(data.success.mean())


def reference_objective(
    reference: Any, tok: Any, setup: LMSetup, seed: int, beta: float
) -> tuple[dict[str, float], dict[str, float]]:
    """Per prompt: the reference's ``J`` (its success rate; its KL to itself is 0) and the
    optimum's value ``V* = β log mean exp(r/β)`` over the same samples (``run_lm_seed``'s
    estimator: a log-mean-exp of m samples underestimates ``V*`` a little, never over)."""
    task: Any = lm_task(setup)
    obj_ex = task.generate(setup.n_objective, seed=30_000 + seed, split="train")
    prompts = [chat_prompt(task, e) for e in obj_ex]
    data = _label(
        task, obj_ex, _sample(reference, tok, prompts, setup.objective_samples, seed + 3, setup)
    )
    j = {str(q): float(data.success[g].mean()) for q, g in enumerate(data.groups)}
    v = {
        str(q): float(soft_value(data.success[g].astype(float), beta))
        for q, g in enumerate(data.groups)
    }
    return j, v


class Checkpoints(TrainerCallback):  # type: ignore[misc]
    """Measures the policy every ``every`` steps (RNG and tokenizer state restored)."""

    def __init__(self, measure: Any, every: int) -> None:
        self.measure, self.every = measure, every

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> Any:
        if model is not None and state.global_step % self.every == 0:
            rng = torch.get_rng_state()
            was_training = model.training
            model.eval()
            try:
                self.measure(model, state.global_step)
            finally:
                torch.set_rng_state(rng)
                model.train(was_training)
        return control


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=100)
    p.add_argument("--designs", default="a:0.1:8:8:200,b:0.1:16:8:100")
    p.add_argument("--every", type=int, default=25)
    p.add_argument("--smoke", action="store_true", help="the quick demo's sizes: a pipeline check")
    p.add_argument("--real", action="store_true", help="demo --real's setup (SmolLM2, LoRA)")
    p.add_argument("--objective-every", type=int, default=None, help="default: 2 x --every")
    p.add_argument("--objective-prompts", type=int, default=None, help="default: the setup's")
    args = p.parse_args()
    if args.seed in (0, 1, 2, 3, 4):
        raise SystemExit("lm_longer_rl.py: seeds 0-4 are the reported seeds; use a validation seed")
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "longer_rl.json"
    setup = LMSetup()
    if args.smoke or args.real:
        from progress_advantage.demo import DemoConfig

        setup = DemoConfig.real().lm if args.real else DemoConfig.quick().lm
    if args.objective_prompts is not None:
        setup = replace(setup, n_objective=args.objective_prompts)
    objective_every = args.objective_every or 2 * args.every
    t0 = time.perf_counter()
    reference, tok = reference_model(setup, progress=False)
    out: dict[str, Any] = {
        "seed": args.seed,
        "setup": asdict(setup),
        "reference_seconds": time.perf_counter() - t0,
    }
    t = time.perf_counter()
    mc = prepare_mc(reference, tok, setup, args.seed)
    out["mc_seconds"] = time.perf_counter() - t
    betas = sorted({float(d.split(":")[1]) for d in args.designs.split(",")})
    out["mc_reliability"] = {f"{b:g}": mc_reliability(mc, b) for b in betas}
    if len(betas) != 1:
        raise SystemExit("lm_longer_rl.py: V* is per beta; give designs of one beta")
    j_ref, v_star = reference_objective(reference, tok, setup, args.seed, betas[0])
    out["J_reference_fresh"] = float(np.mean(list(j_ref.values())))
    out["V_star_fresh"] = float(np.mean(list(v_star.values())))
    out["designs"] = {}
    print(
        f"reference {out['reference_seconds']:.0f}s, MC {out['mc_seconds']:.0f}s; "
        f"MC reliability {out['mc_reliability']}; J_ref {out['J_reference_fresh']:.3f}",
        flush=True,
    )
    path.write_text(json.dumps(out, indent=1))
    task: Any = lm_task(setup)
    for design in args.designs.split(","):
        name, beta_s, prompts_s, gens_s, steps_s = design.split(":")
        beta, steps = float(beta_s), int(steps_s)
        rl = replace(
            setup.rl,
            beta=beta,
            prompts_per_step=int(prompts_s),
            num_generations=int(gens_s),
            min_steps=steps,
            max_steps=steps,
        )
        mc_adv = np.concatenate(mc.advantages(beta))
        record: dict[str, Any] = {"rl": asdict(rl), "checkpoints": []}
        out["designs"][name] = record
        started = time.perf_counter()

        def measure(
            model: Any,
            step: int,
            beta: float = beta,
            record: dict[str, Any] = record,
            started: float = started,
            mc_adv: np.ndarray = mc_adv,
            name: str = name,
        ) -> None:
            t1 = time.perf_counter()
            padding = tok.padding_side
            scorer = LogRatioScorer(model, reference, tok, batch_size=setup.batch_size)
            pa = np.concatenate(
                [progress_advantage(ts, beta, "sum") for ts in scorer.score(mc.trajs)]
            )
            point: dict[str, Any] = {
                "step": step,
                "train_seconds": t1 - started,
                "mc_spearman": spearman(pa, mc_adv),
            }
            if step % objective_every == 0:
                j_pol, acc = fresh_objective(model, reference, tok, setup, beta, args.seed)
                diff = [j_pol[k] - j_ref[k] for k in j_ref]
                _, (lo, hi) = mean_ci(diff)
                gap = [v_star[k] - j_pol[k] for k in v_star]
                _, (glo, ghi) = mean_ci(gap)
                point.update(
                    J_policy_fresh=float(np.mean(list(j_pol.values()))),
                    J_minus_reference=float(np.mean(diff)),
                    J_minus_reference_ci95=[lo, hi],
                    gap_to_optimum=float(np.mean(gap)),
                    gap_to_optimum_ci95=[glo, ghi],
                    fresh_sample_accuracy=acc,
                )
            tok.padding_side = padding
            point["measure_seconds"] = time.perf_counter() - t1
            record["checkpoints"].append(point)
            print(f"{name} step {step}: {json.dumps(point)}", flush=True)
            path.write_text(json.dumps(out, indent=1))

        _, result = train_rl_policy(
            reference,
            tok,
            task,
            rl,
            seed=args.seed,
            callbacks=[Checkpoints(measure, args.every)],
        )
        record.update(
            seconds=time.perf_counter() - started,
            objective=result.objective,
            kl_per_token=result.kl,
            reward=result.reward,
        )
        path.write_text(json.dumps(out, indent=1))
        print(f"{name}: {record['seconds']:.0f}s", flush=True)


if __name__ == "__main__":
    main()
