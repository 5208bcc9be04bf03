"""The demo's experiment: meta-learned vs joint vs target-only vs zero-shot initialisations,
adapted with trl on a held-out target language's few pairs.

Protocol, fixed before any claim was looked at:

1. The world (:func:`meta_pref.world.default_world`): six source languages at distances 0.25
   to 0.5 from the base grammar (the farthest with reversed word order), a *near* target
   (0.25, same order) and a *far* target (0.75, reversed), and a validation language ``val``
   that only served to choose hyper-parameters.
2. Per seed: ``source_pairs`` pairs per source language; a reward model (random init of the
   seed) meta-trained with FOMAML (:mod:`meta_pref.meta`) and, from the same init, trained
   jointly on the pooled sources, compute-matched (the same number of forward/backward passes
   of the same batch size); a reference policy π_ref trained on behaviour text in every
   language (:func:`meta_pref.models.train_sft`), then meta-DPO and joint-DPO initialisations
   from it, compute-matched likewise.
3. Per target and budget n in 25/100/1000 (nested: the first n of one shuffle): each
   initialisation adapts with trl (``RewardTrainer`` / ``DPOTrainer``) under one budget rule,
   the same for every system (:class:`meta_pref.adapt.AdaptSettings`): 20% of the n pairs are
   held out as a validation split, trl trains for 20 epochs over the rest (so the number of
   steps grows with n: 20, 60 and 500 steps of 32 pairs), and the state with the lowest
   held-out loss (before training or after any epoch) is kept. Target-only adapts from the
   random init (reward model) or from π_ref (DPO); zero-shot is the joint initialisation with
   no target data. To fit the CPU budget, the far target runs only target-only at 1000 pairs
   (the premise's arm), and DPO runs at 100 pairs at both targets.
4. Metrics: reward accuracy on ``eval_pairs`` held-out target pairs; DPO win rate of a sampled
   response against π_ref's on ``eval_prompts`` held-out target prompts, judged by the world's
   true reward r* (ties count half). Rows are per seed, so systems compare paired by seed. The
   head-to-head win rate (the meta-DPO policy's response against the joint-DPO policy's on
   each prompt) is judged per training seed too: each seed's rate over its prompts is one value
   (row ``dpo_h2h_winrate_per_seed``) and the claim's interval is Student t over the seeds,
   because the two policies differ between training seeds far more than prompt noise says (the
   0.3 run: 0.635, 0.223, 0.963 on seeds 0-2). The pooled per-(seed, prompt) row
   ``dpo_h2h_winrate`` is reported, not judged.
5. Premise (gates every method claim): target-only at 100 pairs is clearly (by > 0.02)
   below target-only at 1000 pairs, at each distance, so there is headroom to transfer into.

The budget rule was chosen with ``meta-pref headroom`` on validation seeds 98 and 99 from
target-only learning curves alone (no method arm was trained for it): the first design's
rule (4 epochs, at most 80 steps of 16 pairs) left target-only at 1000 pairs on its loss
plateau, which is why its premise failed; of 4 to 24 epochs (lr 2e-3, batch 32), 20 is the
fewest at which both validation seeds show a headroom over 0.1 at both targets (measured again
after adaptation was made fp32 on 2026-12-06; under trl's bf16 autocast it was 24). The step
sizes were chosen alike for both initialisations with ``meta-pref tune`` (0.3) on the
validation language ``val`` and validation seeds 98 and 99, which no reported run uses:
FOMAML's inner SGD lr α and outer Adam lr β, and joint training's Adam lr and batch (at as
many training pairs), each on a 3 x 3 grid with the same budget per point and the same score
(``val`` reward accuracy after trl adaptation on 100 pairs); :data:`FULL` takes each one's
best point, for the reward model and the DPO policy alike (the DPO step sizes were not
searched separately, for either). The model shape and the world's difficulty were set on
validation seed 99 by looking at training curves of the joint baseline only; budgets were
sized to the 15-minute CPU limit at 3 seeds (5 seeds since 2026-12-06: 737 s on one thread in fp32).
Nothing was chosen by looking at a target language's method arms or a reported seed (the
2026-12-06 move of the head-to-head claims to the seed unit and to 5 seeds came after the 0.3
run's per-seed values were seen: exploratory).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

from meta_pref.adapt import AdaptSettings, rng_subset
from meta_pref.meta import MetaConfig
from meta_pref.world import SOURCES, MultilingualWorld
from paperstack.records import Claim, Row, save_figure

__all__ = ["FULL", "QUICK", "REAL", "REAL_QUICK", "DemoConfig", "claims_for", "run_seed"]

SYSTEMS = ("meta", "joint", "target-only")


@dataclass(frozen=True)
class DemoConfig:
    """Budgets of one demo run (:data:`FULL` by default; :data:`QUICK` for ``--quick``)."""

    sizes: tuple[int, ...] = (25, 100, 1000)
    targets: tuple[str, ...] = ("near", "far")
    dpo_targets: tuple[str, ...] = ("near", "far")
    dpo_sizes: tuple[int, ...] = (100,)
    reduced_targets: tuple[str, ...] = ("far",)
    source_pairs: int = 2000
    eval_pairs: int = 400
    eval_prompts: int = 200
    sft_steps: int = 300
    sft_texts: int = 20000
    meta: MetaConfig = field(default_factory=MetaConfig)
    dpo_meta: MetaConfig = field(default_factory=lambda: MetaConfig(outer_steps=20))
    joint_lr: float = 5e-4
    rm_adapt: AdaptSettings = field(default_factory=AdaptSettings)
    dpo_adapt: AdaptSettings = field(default_factory=AdaptSettings)
    beta: float = 0.1
    #: Joint training's batch (its steps shrink as it grows, so it sees as many pairs as the
    #: meta-learner: ``joint_steps``); the meta-learner's support size by default.
    joint_batch: int | None = None
    #: None: the toy's tiny Llama models (random init; π_ref trained by SFT on behaviour
    #: text). A checkpoint folder or preset: the real-model arm (``demo --real``): the reward
    #: model is its body with a new head (target-only starts there), π_ref is the model.
    model: str | None = None
    #: The real arm's longest prompt + response in tokens (the model's context bounds it too).
    max_length: int = 128

    @property
    def joint_batch_size(self) -> int:
        return self.joint_batch or self.meta.support

    @property
    def joint_steps(self) -> int:
        """Joint steps that see as many pairs as meta-training's passes (compute-matched)."""
        passes = self.meta.outer_steps * self.meta.passes_per_step
        return max(1, passes * self.meta.support // self.joint_batch_size)

    @property
    def dpo_joint_steps(self) -> int:
        passes = self.dpo_meta.outer_steps * self.dpo_meta.passes_per_step
        return max(1, passes * self.dpo_meta.support // self.joint_batch_size)


#: The full demo. Step sizes from ``meta-pref tune`` (validation language ``val``, seeds 98 and
#: 99; reports/meta-pref/validation/tune-grids.json), the same rule for both: each
#: initialisation takes its own best grid point, for the reward model and the DPO policy alike.
#: Searched again on 2026-12-06 after adaptation was made fp32 (it ran under trl's bf16
#: autocast before), on the full 3 x 3 grids with one edge extension each, 12 points a side:
#: FOMAML α = 0.03, β = 5e-4 (0.588; α's axis extended to 0.09, 0.576 at best); joint lr 5e-4,
#: batch 16 (0.653, tied with batch 64; the batch axis extended to 8, 0.643 at best). Both
#: bests are interior points of the searched grids.
FULL = DemoConfig(
    meta=MetaConfig(inner_lr=0.03, outer_lr=5e-4),
    dpo_meta=MetaConfig(outer_steps=20, inner_lr=0.03, outer_lr=5e-4),
    joint_lr=5e-4,
    joint_batch=16,
)

#: ``--quick``: a few steps of everything, two seeds; it exercises every part, it measures
#: nothing (read the full demo's report). Sized to the fast test suite (its module fixture
#: runs it in 33 s beside a CI run, trl's trainer stack frozen out of the collector): half of
#: 0.3's adaptation steps and evaluation pairs.
QUICK = DemoConfig(
    sizes=(25, 100, 1000),
    source_pairs=200,
    eval_pairs=120,
    eval_prompts=50,
    sft_steps=20,
    sft_texts=1000,
    meta=MetaConfig(outer_steps=3, inner_steps=2, support=16, query=16),
    dpo_meta=MetaConfig(outer_steps=2, inner_steps=2, support=16, query=16),
    dpo_sizes=(100,),
    rm_adapt=AdaptSettings(epochs=1, max_steps=4),
    dpo_adapt=AdaptSettings(epochs=1, max_steps=3),
)


#: ``demo --real``: SmolLM2-135M-Instruct as the base of both models, on the toy world's
#: languages, at 100 target pairs (near target; 400 for the premise's target-only arm), 5 seeds
#: (the ``demo`` command's one seed count, 0-4, as the toy arm).
#: Budgets were set before any run from what fits a CPU; step sizes are ``meta-pref train``'s
#: defaults for a pretrained model (not tuned: no validation search was run at this scale).
REAL = DemoConfig(
    sizes=(100, 400), targets=("near",), dpo_targets=("near",), dpo_sizes=(100,),
    reduced_targets=("near",), source_pairs=200, eval_pairs=200, eval_prompts=100,
    sft_steps=0, sft_texts=0,
    meta=MetaConfig(outer_steps=20, inner_steps=2, inner_lr=1e-4, outer_lr=1e-5, support=8,
                    query=8),
    dpo_meta=MetaConfig(outer_steps=10, inner_steps=2, inner_lr=1e-4, outer_lr=1e-5,
                        support=8, query=8),
    joint_lr=1e-5,
    rm_adapt=AdaptSettings(learning_rate=1e-5, batch_size=8, epochs=4),
    dpo_adapt=AdaptSettings(learning_rate=1e-5, batch_size=8, epochs=4),
    model="smollm2-135m-instruct",
)  # fmt: skip


#: ``demo --real --quick``: the real arm's every part on a few pairs and steps (measures nothing).
REAL_QUICK = dataclasses.replace(
    REAL,
    sizes=(8, 16),
    dpo_sizes=(8,),
    source_pairs=20,
    eval_pairs=8,
    eval_prompts=4,
    meta=MetaConfig(
        outer_steps=1, meta_batch=2, inner_steps=1, inner_lr=1e-4, outer_lr=1e-5, support=4, query=4
    ),
    dpo_meta=MetaConfig(
        outer_steps=1, meta_batch=2, inner_steps=1, inner_lr=1e-4, outer_lr=1e-5, support=4, query=4
    ),
    rm_adapt=AdaptSettings(learning_rate=1e-5, batch_size=4, epochs=1, max_steps=1),
    dpo_adapt=AdaptSettings(learning_rate=1e-5, batch_size=4, epochs=1, max_steps=1),
    max_length=64,
)


def split(target: str, n: int) -> str:
    return f"{target}/{n}"


def _seeded(config: MetaConfig, seed: int) -> MetaConfig:
    return dataclasses.replace(config, seed=seed)


def train_inits(
    world: MultilingualWorld, config: DemoConfig, seed: int, tok: Any, log: Callable[[str], None]
) -> dict[str, Any]:
    """The per-seed initialisations: meta and joint reward models (and their random init),
    π_ref, and meta-DPO and joint-DPO policies."""
    from meta_pref import models as m
    from meta_pref.meta import bradley_terry_objective, dpo_objective, joint_train, meta_train

    pad = tok.pad_token_id
    sources = {c: world.pairs(c, config.source_pairs, seed=seed) for c in SOURCES}
    rm_tasks = {c: m.encode_rewards(tok, p) for c, p in sources.items()}
    rm_collate = functools.partial(m.collate_rewards, pad_id=pad)
    out: dict[str, Any] = {"seconds": {}}
    random_rm = _reward_init(config, tok, seed)
    out["rm/random"] = random_rm
    start = time.perf_counter()
    out["rm/meta"] = copy.deepcopy(random_rm)
    meta_train(out["rm/meta"], rm_tasks, bradley_terry_objective, rm_collate,
               _seeded(config.meta, seed))  # fmt: skip
    out["seconds"]["rm/meta"] = time.perf_counter() - start
    start = time.perf_counter()
    out["rm/joint"] = copy.deepcopy(random_rm)
    joint_train(out["rm/joint"], rm_tasks, bradley_terry_objective, rm_collate,
                steps=config.joint_steps, batch=config.joint_batch_size, lr=config.joint_lr,
                seed=seed)  # fmt: skip
    out["seconds"]["rm/joint"] = time.perf_counter() - start
    log(f"seed {seed}: reward-model inits in {out['seconds']['rm/meta']:.0f} s (meta) and "
        f"{out['seconds']['rm/joint']:.0f} s (joint)")  # fmt: skip

    if config.dpo_targets:
        start = time.perf_counter()
        ref = _reference(config, world, tok, seed)
        ref.requires_grad_(False)
        out["dpo/ref"] = ref
        dpo_tasks = {c: m.add_reference_logps(ref, m.encode_policy(tok, p), pad)
                     for c, p in sources.items()}  # fmt: skip
        dpo_collate = functools.partial(m.collate_policy, pad_id=pad)
        objective = dpo_objective(config.beta)
        for name in ("meta", "joint"):
            policy = copy.deepcopy(ref).requires_grad_(True)
            if name == "meta":
                meta_train(policy, dpo_tasks, objective, dpo_collate,
                           _seeded(config.dpo_meta, seed))  # fmt: skip
            else:
                joint_train(policy, dpo_tasks, objective, dpo_collate,
                            steps=config.dpo_joint_steps, batch=config.joint_batch_size,
                            lr=config.joint_lr, seed=seed)  # fmt: skip
            out[f"dpo/{name}"] = policy
        out["seconds"]["dpo"] = time.perf_counter() - start
        log(f"seed {seed}: π_ref and DPO inits in {out['seconds']['dpo']:.0f} s")
    return out


def _tokenizer(config: DemoConfig) -> Any:
    from meta_pref import models as m

    if config.model is None:
        return m.tokenizer()
    from meta_pref.hf import load_tokenizer

    return load_tokenizer(config.model, config.max_length)


def _reward_init(config: DemoConfig, tok: Any, seed: int) -> Any:
    """The seed's reward-model start: the toy's random tiny Llama, or the checkpoint's body
    with a reward head initialised from the seed."""
    import torch

    from meta_pref import models as m

    if config.model is None:
        return m.reward_model(tok, seed)
    from meta_pref.hf import load_reward_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return load_reward_model(config.model, tok)


def _reference(config: DemoConfig, world: MultilingualWorld, tok: Any, seed: int) -> Any:
    """π_ref: the toy policy trained by SFT on behaviour text, or the checkpoint itself (an
    instruct model is already the SFT model the paper starts DPO from)."""
    from meta_pref import models as m

    if config.model is None:
        ref = m.policy_model(tok, seed)
        m.train_sft(ref, tok, world.sft_texts(world.codes, config.sft_texts, seed),
                    steps=config.sft_steps, seed=seed)  # fmt: skip
        return ref
    from meta_pref.hf import load_policy

    return load_policy(config.model, tok)


def run_seed(
    world: MultilingualWorld,
    config: DemoConfig,
    seed: int,
    log: Callable[[str], None] = lambda _: None,
    advance: Callable[[], None] = lambda: None,
) -> dict[str, dict[str, float]]:
    """One seed of the protocol: ``{(metric, split): {system: value}}`` in a plain dict of
    dicts keyed ``metric|split``; per-prompt values (the head-to-head DPO win rate) are keyed
    ``items:metric|split`` and hold ``{prompt index: value}``."""
    from meta_pref.adapt import (
        adapt_policy,
        adapt_reward_model,
        head_to_head,
        reward_accuracy,
        win_rate,
    )

    tok = _tokenizer(config)
    inits = train_inits(world, config, seed, tok, log)
    advance()
    values: dict[str, dict[str, float]] = {}

    def put(metric: str, where: str, system: str, value: float) -> None:
        values.setdefault(f"{metric}|{where}", {})[system] = value

    rm_settings = dataclasses.replace(config.rm_adapt, seed=seed)
    dpo_settings = dataclasses.replace(config.dpo_adapt, seed=seed, beta=config.beta)
    for target in config.targets:
        pool = world.pairs(target, max(config.sizes), seed=1000 + seed)
        test = world.pairs(target, config.eval_pairs, seed=5000 + seed)
        put("rm_accuracy", split(target, 0), "zero-shot",
            reward_accuracy(inits["rm/joint"], tok, test))  # fmt: skip
        put("rm_accuracy", split(target, 0), "meta-zero-shot",
            reward_accuracy(inits["rm/meta"], tok, test))  # fmt: skip
        for n in config.sizes:
            train = rng_subset(pool, n, seed)
            starts = {"meta": inits["rm/meta"], "joint": inits["rm/joint"],
                      "target-only": inits["rm/random"]}  # fmt: skip
            if target in config.reduced_targets and n == max(config.sizes):
                starts = {"target-only": inits["rm/random"]}  # the premise's arm only
            for system, init in starts.items():
                model, result = adapt_reward_model(copy.deepcopy(init), tok, train, rm_settings)
                put("rm_accuracy", split(target, n), system, reward_accuracy(model, tok, test))
                put("rm_adapt_steps", split(target, n), system, float(result.steps))
                put("rm_kept_step", split(target, n), system, float(result.best_step))
            advance()
        if target not in config.dpo_targets:
            continue
        prompts = world.eval_prompts(target, config.eval_prompts, seed=5000 + seed)

        def judge(prompt: str, response: str, code: str = target) -> float:
            return world.reward_of_text(code, prompt, response)

        ref = inits["dpo/ref"]
        wins = win_rate(inits["dpo/joint"], ref, tok, prompts, judge, seed)
        put("dpo_winrate", split(target, 0), "zero-shot", mean(wins.values()))
        for n in config.dpo_sizes:
            train = rng_subset(pool, n, seed)
            starts = {"meta": inits["dpo/meta"], "joint": inits["dpo/joint"], "target-only": ref}
            adapted = {}
            for system, init in starts.items():
                policy = copy.deepcopy(init).requires_grad_(True)
                policy, result = adapt_policy(policy, ref, tok, train, dpo_settings)
                wins = win_rate(policy, ref, tok, prompts, judge, seed)
                put("dpo_winrate", split(target, n), system, mean(wins.values()))
                put("dpo_adapt_steps", split(target, n), system, float(result.steps))
                put("dpo_kept_step", split(target, n), system, float(result.best_step))
                adapted[system] = policy
            # the paper's comparison: the meta-initialised policy against the joint one, head
            # to head on the same prompts, judged by the true reward
            values[f"items:dpo_h2h_winrate|{split(target, n)}"] = head_to_head(
                adapted["meta"], adapted["joint"], tok, prompts, judge, seed + 104729
            )
            advance()
    for name, seconds in inits["seconds"].items():
        put("init_seconds", "seeds", name, seconds)
    return values


def progress_total(config: DemoConfig, seeds: int) -> int:
    dpo = sum(t in config.targets for t in config.dpo_targets)
    per_seed = 1 + len(config.sizes) * len(config.targets) + len(config.dpo_sizes) * dpo
    return per_seed * seeds


def rows_for(per_seed: dict[int, dict[str, dict[str, float]]]) -> list[Row]:
    """Per-seed rows of every (metric, split, system), plus the meta-minus-joint gap rows."""
    seeds = sorted(per_seed)
    keys = per_seed[seeds[0]]
    rows = []
    for key in [k for k in keys if k.startswith("items:")]:
        metric, where = key.removeprefix("items:").split("|")
        # every (seed, prompt) is one paired comparison of the two policies' responses: pooled
        # over seeds, reported only (its bootstrap over prompts ignores the seed-to-seed spread)
        items = {f"s{s}/p{i}": v for s in seeds for i, v in per_seed[s][key].items()}
        rows.append(Row.from_items("meta-vs-joint", metric, items, split=where))
        # one win rate per training seed: what the head-to-head claims are judged on
        means = {s: mean(per_seed[s][key].values()) for s in seeds}
        rows.append(Row.from_seeds("meta-vs-joint", f"{metric}_per_seed", means, split=where))
    for key, systems in keys.items():
        if key.startswith("items:"):
            continue
        metric, where = key.split("|")
        unit = "s" if metric == "init_seconds" else "steps" if "step" in metric else None
        for system in systems:
            values = {s: per_seed[s][key][system] for s in seeds}
            rows.append(Row.from_seeds(system, metric, values, split=where, unit=unit))
        if "meta" in systems and "joint" in systems:
            gap = {s: per_seed[s][key]["meta"] - per_seed[s][key]["joint"] for s in seeds}
            rows.append(Row.from_seeds("meta-joint", f"{metric}_gap", gap, split=where))
    return rows


def claims_for(rows: Sequence[Row], config: DemoConfig) -> list[Claim]:
    """The premises first, then the issue's four claims, each gated on its premise."""
    small, large = 100, max(config.sizes)

    def r(system: str, metric: str, target: str, n: int) -> tuple[str, str, str]:
        return (system, metric, split(target, n))

    premise = Claim.compare(
        "premise_headroom",
        f"premise: at the near target, a reward model trained on {small} target pairs alone "
        f"orders held-out pairs clearly (by > 0.02) worse than one trained on {large}",
        rows, r("target-only", "rm_accuracy", "near", large), "gt",
        r("target-only", "rm_accuracy", "near", small), margin=0.02,
    )  # fmt: skip
    premise_far = Claim.compare(
        "premise_headroom_far",
        f"premise: the same headroom at the far target ({small} vs {large} target pairs)",
        rows, r("target-only", "rm_accuracy", "far", large), "gt",
        r("target-only", "rm_accuracy", "far", small), margin=0.02,
    )  # fmt: skip
    return [
        premise,
        premise_far,
        Claim.compare(
            "meta_rm_beats_joint_at_100",
            "with 100 near-target pairs, the meta-learned (FOMAML) reward-model initialisation "
            "adapted with trl's RewardTrainer orders held-out target pairs better than the "
            "joint multi-task initialisation adapted the same way",
            rows, r("meta", "rm_accuracy", "near", small), "gt",
            r("joint", "rm_accuracy", "near", small), requires=[premise],
        ),
        Claim.compare(
            "meta_dpo_winrate_beats_joint_at_100",
            "with 100 near-target pairs, DPO (trl's DPOTrainer) from the meta-DPO "
            "initialisation wins more often against π_ref under the true reward than DPO from "
            "the joint initialisation",
            rows, r("meta", "dpo_winrate", "near", small), "gt",
            r("joint", "dpo_winrate", "near", small), requires=[premise],
        ),
        Claim.compare(
            "meta_dpo_beats_joint_head_to_head_at_100",
            "with 100 near-target pairs, the policy DPO-adapted from the meta-DPO "
            "initialisation wins head to head against the one adapted from the joint "
            "initialisation more than half the time (the paper's win rate: both sample a "
            "response to the same held-out prompt, the true reward judges, ties half; one win "
            "rate per training seed, Student t over the seeds)",
            rows, r("meta-vs-joint", "dpo_h2h_winrate_per_seed", "near", small), "gt", 0.5,
            requires=[premise],
        ),
        Claim.compare(
            "gap_closes_with_data",
            f"the reward-accuracy gap meta - joint at the near target is smaller with {large} "
            f"target pairs than with {small}",
            rows, r("meta-joint", "rm_accuracy_gap", "near", large), "lt",
            r("meta-joint", "rm_accuracy_gap", "near", small), requires=[premise],
        ),
        Claim.compare(
            "holds_at_far_distance",
            "with 100 far-target pairs (distance 0.75, reversed word order), the meta-learned "
            "reward-model initialisation still beats the joint one after adaptation",
            rows, r("meta", "rm_accuracy", "far", small), "gt",
            r("joint", "rm_accuracy", "far", small), requires=[premise_far],
        ),
        Claim.compare(
            "meta_dpo_holds_at_far_distance",
            "with 100 far-target pairs, DPO from the meta-DPO initialisation still wins more "
            "often against π_ref under the true reward than DPO from the joint initialisation",
            rows, r("meta", "dpo_winrate", "far", small), "gt",
            r("joint", "dpo_winrate", "far", small), requires=[premise_far],
        ),
        Claim.compare(
            "meta_dpo_beats_joint_head_to_head_far",
            "with 100 far-target pairs, the meta-initialised DPO policy still wins head to "
            "head against the joint-initialised one more than half the time (one win rate per "
            "training seed, Student t over the seeds)",
            rows, r("meta-vs-joint", "dpo_h2h_winrate_per_seed", "far", small), "gt", 0.5,
            requires=[premise_far],
        ),
    ]  # fmt: skip


def real_claims_for(rows: Sequence[Row], config: DemoConfig) -> list[Claim]:
    """``demo --real``: the premise at the real model's scale first (target-only reward
    accuracy grows from 100 to the larger budget), then meta vs joint at 100 target pairs."""
    small, large = min(config.sizes), max(config.sizes)
    premise = Claim.compare(
        "real_premise_headroom",
        f"premise: with SmolLM2's body, a reward model trained on {small} near-target pairs "
        f"alone orders held-out pairs clearly (by > 0.02) worse than one trained on {large}",
        rows, ("target-only", "rm_accuracy", split("near", large)), "gt",
        ("target-only", "rm_accuracy", split("near", small)), margin=0.02,
    )  # fmt: skip
    return [
        premise,
        Claim.compare(
            "real_meta_rm_beats_joint_at_100",
            "SmolLM2 reward model: with 100 near-target pairs, the meta-learned initialisation "
            "adapted with trl orders held-out target pairs better than the joint one",
            rows, ("meta", "rm_accuracy", split("near", small)), "gt",
            ("joint", "rm_accuracy", split("near", small)), requires=[premise],
        ),
        Claim.compare(
            "real_meta_dpo_beats_joint_head_to_head_at_100",
            "SmolLM2 policy: with 100 near-target pairs, the meta-initialised DPO policy wins "
            "head to head against the joint-initialised one more than half the time (true "
            "reward judges; one win rate per training seed, Student t over the seeds)",
            rows, ("meta-vs-joint", "dpo_h2h_winrate_per_seed", split("near", small)), "gt", 0.5,
            requires=[premise],
        ),
    ]  # fmt: skip


def config_dict(config: DemoConfig) -> dict[str, Any]:
    out = dataclasses.asdict(config)
    out["joint_steps"] = config.joint_steps
    out["dpo_joint_steps"] = config.dpo_joint_steps
    return out


def premise_note(claims: Sequence[Claim]) -> str:
    premises = [c for c in claims if c.id.startswith("premise_")]
    missing = [c.id for c in premises if not c.held]
    if not missing:
        return "Both premises held: target-only training has headroom at 100 pairs."
    held = [c.id for c in premises if c.held]
    gated = [c.id for c in claims if set(c.requires or ()) & set(missing)]
    return (
        (f"Premise held: {', '.join(held)}. " if held else "")
        + "Premise not established ("
        + ", ".join(missing)
        + "): without headroom at 100 target pairs an initialisation has nothing to add, so "
        + "the claims resting on it ("
        + (", ".join(gated) or "none")
        + ") are inconclusive whatever their intervals say."
    )


def intro(config: DemoConfig, seeds: Sequence[int], quick: bool, claims: Sequence[Claim]) -> str:
    meta, rm = config.meta, config.rm_adapt
    stop = (
        f", early stop after {rm.patience} epochs without improvement."
        if rm.patience
        else " (no early termination)."
    )
    text = (
        (
            "**--quick smoke run: a few steps of everything; nothing is measured here, read the "
            "full demo's report.** "
            if quick
            else ""
        )
        + f"Six source languages (s1-s6), held-out targets near (distance 0.25) and far (0.75, "
        f"reversed word order); {config.source_pairs} pairs per source language; target budgets "
        f"{', '.join(map(str, config.sizes))} pairs; seeds {', '.join(map(str, seeds))}. "
        f"Reward model and policy: a {meta.algorithm.upper()} meta-initialisation "
        f"({meta.outer_steps} outer steps of {meta.meta_batch} languages, {meta.inner_steps} inner "
        f"SGD steps at lr {meta.inner_lr:g}, support/query {meta.support}/{meta.query} pairs) "
        f"(outer Adam lr {meta.outer_lr:g}) against joint multi-task training on as many "
        f"pairs ({config.joint_steps} Adam steps of {config.joint_batch_size} pairs at lr "
        f"{config.joint_lr:g}); all adapt with trl "
        f"(RewardTrainer / DPOTrainer, β={config.beta:g}) under the same budget rule: "
        f"{rm.val_fraction:.0%} of the n target pairs held out for validation, up to "
        f"{rm.epochs} epochs over the rest (steps grow with n), the state with the best "
        f"held-out loss kept{stop} "
        f"At {', '.join(config.reduced_targets) or 'no target'}, only target-only runs at "
        f"{max(config.sizes)} pairs (the premise's arm; CPU budget). DPO budgets: "
        f"{', '.join(map(str, config.dpo_sizes))} pairs at "
        f"{', '.join(config.dpo_targets)}. Reward "
        f"accuracy on {config.eval_pairs} held-out target pairs; DPO win rate against π_ref on "
        f"{config.eval_prompts} held-out target prompts under the true reward (ties half), "
        "and head to head: the meta-DPO policy's response against the joint-DPO policy's on "
        "each prompt. The head-to-head claims are judged over training seeds: one win rate per "
        "seed (`meta-vs-joint` / `dpo_h2h_winrate_per_seed`), Student t over the seeds against "
        "0.5; `dpo_h2h_winrate` pools the (seed, prompt) judgements and is reported, not "
        "judged. "
        "Split `T/n` = target T with n target pairs (n = 0: zero-shot). Rows are per seed and "
        "compare paired by seed. Both initialisations' step sizes (FOMAML's inner and outer lr; "
        "joint's lr and batch) were chosen alike on the validation language and validation "
        "seeds 98 and 99 (`meta-pref tune`: a 3 x 3 grid each, the same budget and score), "
        "never on a reported seed or target. Toy scale: "
        "~90k-parameter Llama models on a shared 2-core CPU. "
    )
    return text + (premise_note(claims) if claims else "")


def real_intro(
    config: DemoConfig, seeds: Sequence[int], quick: bool, claims: Sequence[Claim]
) -> str:
    """The real arm's report text: what ran, at what budget, and the premise first."""
    meta = config.meta
    premise = next((c for c in claims if c.id == "real_premise_headroom"), None)
    return (
        ("**--quick smoke run of the real arm: nothing is measured here.** " if quick else "")
        + f"Real-model arm: {config.model} is the base of the reward model (its body with a "
        "new one-output head; target-only starts there) and of the policy (π_ref is the "
        "model itself), on the toy world's languages rendered with the model's chat template "
        f"(truncated to {config.max_length} tokens). {config.source_pairs} pairs per source "
        f"language; near target at {', '.join(map(str, config.sizes))} pairs (the larger "
        f"budget for the premise's target-only arm only); seeds {', '.join(map(str, seeds))}. "
        f"{meta.algorithm.upper()} ({meta.outer_steps} outer steps, {meta.inner_steps} inner "
        f"SGD steps at lr {meta.inner_lr:g}, outer Adam lr {meta.outer_lr:g}) against joint "
        f"training at lr {config.joint_lr:g} on as many pairs; trl adaptation for "
        f"{config.rm_adapt.epochs} epochs at lr {config.rm_adapt.learning_rate:g}, best "
        "held-out state kept. Metrics: reward accuracy on held-out target pairs; the DPO "
        "policies' head-to-head win rate (meta against joint, per prompt, the true reward "
        "judges; the claim is judged on one rate per training seed, Student t over the seeds) "
        "and each one's win rate against π_ref. Step sizes are `meta-pref train`'s "
        "defaults, not tuned at this scale. "
        + (f"Premise `{premise.id}`: {premise.verdict.replace('_', ' ')}." if premise else "")
    )


def figures(rows: Sequence[Row], config: DemoConfig, out: Any) -> list[Any]:
    """Reward accuracy and DPO win rate against the target budget, one panel per target."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    paths = []
    dpo_targets = tuple(t for t in config.dpo_targets if t in config.targets)
    for metric, targets, sizes, label in (
        ("rm_accuracy", config.targets, config.sizes, "reward accuracy (held-out target pairs)"),
        ("dpo_winrate", dpo_targets, config.dpo_sizes, "DPO win rate vs π_ref (true reward)"),
    ):
        if not targets:
            continue
        fig, axes = plt.subplots(1, len(targets), figsize=(4.4 * len(targets), 3.3), dpi=120)
        panels = list(getattr(axes, "flat", [axes]))
        for ax, target in zip(panels, targets, strict=True):
            for system in SYSTEMS:
                xs, ys, lo, hi = [], [], [], []
                for n in sizes:
                    row = next((r for r in rows if r.system == system and r.metric == metric
                                and r.split == split(target, n)), None)  # fmt: skip
                    if row is None:
                        continue
                    xs.append(n)
                    ys.append(row.value)
                    ci = row.ci95 or (row.value, row.value)
                    lo.append(row.value - ci[0])
                    hi.append(ci[1] - row.value)
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=system)
            zero = next((r for r in rows if r.system == "zero-shot" and r.metric == metric
                         and r.split == split(target, 0)), None)  # fmt: skip
            if zero is not None:
                ax.axhline(zero.value, color="grey", linestyle="--", label="zero-shot")
            ax.set_xscale("log")
            ax.set_xlabel("target pairs")
            ax.set_title(f"{target} target")
            ax.set_ylabel(label, fontsize=8)
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / f"{metric}.png"
        try:
            # rendered in memory, then written atomically: a full disk or a kill mid-write
            # leaves no 0-byte or torn png at the final name (savefig(path) did, issue #46)
            save_figure(fig, path)
        finally:
            plt.close(fig)
        paths.append(path)
    return paths
