"""Timed slice of ``meta-pref demo --real`` (issue #51: its cost on a CPU, to size the arm).

On validation seed 98 (the tuning seed, never reported), with ``demo.REAL``'s models and
settings: one FOMAML outer step of the reward model (3 languages x (2 inner + 1 query) passes
of 8 pairs), the compute-matched joint steps, one trl adaptation epoch on 70 target pairs, and
the reward accuracy on 200 evaluation pairs; wall seconds of each into OUT, and the per-seed
reward-model cost they imply (the DPO half is not timed: it runs a policy and its reference).
Run from a checkout with the meta-pref venv, two threads (PYTHONPATH=shared/src:packages/
meta-pref/src):

    OMP_NUM_THREADS=2 python packages/meta-pref/benchmarks/real_cost_slice.py slice.json [--dpo]

``--dpo`` also times the DPO half's parts (π_ref's reference log-probs, a meta-DPO outer step,
the matched joint DPO steps, a DPO adaptation epoch on 100 pairs, a win rate on 100 prompts).
"""

import copy
import dataclasses
import functools
import json
import sys
import time

import torch
from meta_pref import demo
from meta_pref import models as m
from meta_pref.adapt import adapt_reward_model, reward_accuracy, rng_subset
from meta_pref.meta import bradley_terry_objective, joint_train, meta_train
from meta_pref.world import SOURCES, default_world

SEED = 98


def _note(out: dict[str, float], key: str, start: float) -> None:
    """Record one timing and print it at once (a slice cut short still tells what it timed)."""
    out[key] = time.perf_counter() - start
    print(f"{key}: {out[key]:.1f} s", flush=True)


def main(out_path: str) -> None:
    torch.set_num_threads(2)
    config = demo.REAL
    world = default_world()
    tok = demo._tokenizer(config)
    out: dict[str, float] = {}
    start = time.perf_counter()
    init = demo._reward_init(config, tok, SEED)
    _note(out, "load", start)
    tasks = {c: m.encode_rewards(tok, world.pairs(c, config.source_pairs, seed=SEED))
             for c in SOURCES}  # fmt: skip
    collate = functools.partial(m.collate_rewards, pad_id=tok.pad_token_id)
    model = copy.deepcopy(init)
    start = time.perf_counter()
    meta_train(model, tasks, bradley_terry_objective, collate,
               dataclasses.replace(config.meta, outer_steps=1, seed=SEED))  # fmt: skip
    _note(out, "meta_outer_step", start)
    steps = config.meta.passes_per_step * config.meta.support // config.joint_batch_size
    model = copy.deepcopy(init)
    start = time.perf_counter()
    joint_train(model, tasks, bradley_terry_objective, collate, steps=steps,
                batch=config.joint_batch_size, lr=config.joint_lr, seed=SEED)  # fmt: skip
    _note(out, "joint_matched_steps", start)
    pool = world.pairs("near", 100, seed=1000 + SEED)
    test = world.pairs("near", config.eval_pairs, seed=5000 + SEED)
    settings = dataclasses.replace(config.rm_adapt, epochs=1, seed=SEED)
    start = time.perf_counter()
    adapted, _ = adapt_reward_model(copy.deepcopy(init), tok, rng_subset(pool, 100, SEED), settings)
    _note(out, "adapt_epoch_100_pairs", start)
    start = time.perf_counter()
    reward_accuracy(adapted, tok, test)
    _note(out, "reward_accuracy_200", start)
    # the reward-model half of one seed: 20 outer steps each for meta and joint; adaptation of
    # 3 systems at 100 pairs and target-only at 400 for 4 epochs; 8 accuracy evaluations
    out["rm_half_per_seed_estimate"] = (
        config.meta.outer_steps * (out["meta_outer_step"] + out["joint_matched_steps"])
        + config.rm_adapt.epochs * out["adapt_epoch_100_pairs"] * (3 + 4)
        + 8 * out["reward_accuracy_200"]
    )
    if "--dpo" in sys.argv:
        _dpo_half(config, world, tok, pool, out)
    print(json.dumps(out, indent=1))
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)


def _dpo_half(config, world, tok, pool, out) -> None:  # type: ignore[no-untyped-def]
    """``--dpo``: the DPO half's parts on the same seed: π_ref's reference log-probs of the
    source pairs, one meta-DPO outer step, the matched joint DPO steps, one trl DPO adaptation
    epoch on 100 pairs, and the win rate of 100 sampled responses against π_ref's."""
    from meta_pref.adapt import adapt_policy, win_rate
    from meta_pref.meta import dpo_objective

    pad = tok.pad_token_id
    start = time.perf_counter()
    ref = demo._reference(config, world, tok, SEED).requires_grad_(False)
    tasks = {c: m.add_reference_logps(ref, m.encode_policy(tok, world.pairs(
        c, config.source_pairs, seed=SEED)), pad) for c in SOURCES}  # fmt: skip
    _note(out, "dpo_reference_logps", start)
    collate = functools.partial(m.collate_policy, pad_id=pad)
    policy = copy.deepcopy(ref).requires_grad_(True)
    start = time.perf_counter()
    meta_train(policy, tasks, dpo_objective(config.beta), collate,
               dataclasses.replace(config.dpo_meta, outer_steps=1, seed=SEED))  # fmt: skip
    _note(out, "dpo_meta_outer_step", start)
    steps = config.dpo_meta.passes_per_step * config.dpo_meta.support // config.joint_batch_size
    policy = copy.deepcopy(ref).requires_grad_(True)
    start = time.perf_counter()
    joint_train(policy, tasks, dpo_objective(config.beta), collate, steps=steps,
                batch=config.joint_batch_size, lr=config.joint_lr, seed=SEED)  # fmt: skip
    _note(out, "dpo_joint_matched_steps", start)
    settings = dataclasses.replace(config.dpo_adapt, epochs=1, seed=SEED, beta=config.beta)
    start = time.perf_counter()
    adapted, _ = adapt_policy(copy.deepcopy(ref).requires_grad_(True), ref, tok,
                              rng_subset(pool, 100, SEED), settings)  # fmt: skip
    _note(out, "dpo_adapt_epoch_100_pairs", start)
    prompts = world.eval_prompts("near", config.eval_prompts, seed=5000 + SEED)
    start = time.perf_counter()
    win_rate(adapted, ref, tok, prompts,
             lambda p, r: world.reward_of_text("near", p, r), SEED)  # fmt: skip
    _note(out, "dpo_win_rate_100_prompts", start)
    # the DPO half of one seed: 10 outer steps each for meta and joint, 3 adaptations of 4
    # epochs, 4 win rates against π_ref and one head to head (about as many samples again)
    out["dpo_half_per_seed_estimate"] = (
        out["dpo_reference_logps"]
        + config.dpo_meta.outer_steps * (out["dpo_meta_outer_step"]
                                         + out["dpo_joint_matched_steps"])
        + config.dpo_adapt.epochs * out["dpo_adapt_epoch_100_pairs"] * 3
        + 5 * out["dpo_win_rate_100_prompts"]
    )  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "slice.json")
