"""The demo's reward-model half on a user's multilingual preference JSONL (``--pairs``).

There is no true reward on user data, so only reward accuracy is measured (on a held-out 30%
of the target language's pairs, drawn per seed); the DPO half needs a judge and is not run.
The models are the toy world's tiny ones over characters (:mod:`meta_pref.models`): this path
checks the pipeline on real text, it does not scale it.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from typing import Any

from meta_pref.data import by_language, check_pairs, load_pairs
from meta_pref.errors import MetaPrefError
from meta_pref.train import split_languages
from paperstack.contract import Report, Run
from paperstack.records import Claim, Row


def demo(run: Run, config: Any) -> Report:
    import copy

    from meta_pref import models as m
    from meta_pref.adapt import adapt_reward_model, reward_accuracy
    from meta_pref.meta import bradley_terry_objective, joint_train, meta_train

    path = run.args.pairs
    if run.args.target is None:
        found = ", ".join(by_language(check_pairs(load_pairs(path), f"{path} pair")))
        raise MetaPrefError(f"--pairs needs --target CODE; {path} has: {found}")
    target_code = run.args.target
    target, sources = split_languages(load_pairs(path), target_code, run.args.sources, str(path))
    codes = list(sources)
    held = max(1, round(0.3 * len(target)))
    pool_size = len(target) - held
    sizes = tuple(n for n in config.sizes if n <= pool_size)
    if not sizes:
        raise MetaPrefError(
            f"target {target_code!r} has {len(target)} pairs: after holding out {held} for "
            f"evaluation, {pool_size} are left, fewer than the smallest budget "
            f"{min(config.sizes)} (set --sizes)"
        )
    tok = m.tokenizer()
    rm_tasks = {c: m.encode_rewards(tok, p) for c, p in sources.items()}
    collate = functools.partial(m.collate_rewards, pad_id=tok.pad_token_id)
    values: dict[str, dict[str, dict[int, float]]] = {}

    def put(where: str, system: str, seed: int, value: float) -> None:
        values.setdefault(where, {}).setdefault(system, {})[seed] = value

    with run.progress(len(run.seeds) * (1 + len(sizes)), "seeds x budgets") as bar:
        for seed in run.seeds:
            order = list(range(len(target)))
            random.Random(seed).shuffle(order)
            test = [target[i] for i in order[:held]]
            pool = [target[i] for i in order[held:]]
            init = m.reward_model(tok, seed)
            meta = copy.deepcopy(init)
            meta_train(meta, rm_tasks, bradley_terry_objective, collate,
                       dataclasses.replace(config.meta, seed=seed))  # fmt: skip
            joint = copy.deepcopy(init)
            joint_train(joint, rm_tasks, bradley_terry_objective, collate,
                        steps=config.joint_steps, batch=config.joint_batch_size,
                        lr=config.joint_lr, seed=seed)  # fmt: skip
            put(f"{target_code}/0", "zero-shot", seed, reward_accuracy(joint, tok, test))
            bar.advance()
            settings = dataclasses.replace(config.rm_adapt, seed=seed)
            for n in sizes:
                for system, start in (("meta", meta), ("joint", joint), ("target-only", init)):
                    model, _ = adapt_reward_model(copy.deepcopy(start), tok, pool[:n], settings)
                    put(f"{target_code}/{n}", system, seed, reward_accuracy(model, tok, test))
                bar.advance()
    rows = [
        Row.from_seeds(system, "rm_accuracy", per_seed, split=where)
        for where, systems in values.items()
        for system, per_seed in systems.items()
    ]
    claims = []
    if 100 in sizes and max(sizes) > 100:
        big = max(sizes)
        premise = Claim.compare(
            "premise_headroom",
            f"premise: target-only at 100 pairs is clearly (by > 0.02) below target-only at {big}",
            rows, ("target-only", "rm_accuracy", f"{target_code}/{big}"), "gt",
            ("target-only", "rm_accuracy", f"{target_code}/100"), margin=0.02,
        )  # fmt: skip
        claims = [premise, Claim.compare(
            "meta_rm_beats_joint_at_100",
            "with 100 target pairs the meta-learned reward model beats the joint one",
            rows, ("meta", "rm_accuracy", f"{target_code}/100"), "gt",
            ("joint", "rm_accuracy", f"{target_code}/100"), requires=[premise],
        )]  # fmt: skip
    intro = (
        f"Your pairs from {path}: target {target_code!r} ({len(target)} pairs, {held} held out "
        f"per seed), sources {', '.join(codes)}; reward accuracy only (no true reward, so no "
        "DPO win rate). Toy-scale character models."
    )
    return Report(rows, claims, title="meta-pref: demo on your pairs", intro=intro,
                  config={"pairs": str(path), "target": target_code, "sources": codes,
                          "sizes": list(sizes), "held_out": held})  # fmt: skip
