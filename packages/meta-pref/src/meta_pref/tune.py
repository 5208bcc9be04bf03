"""How the demo's inner-loop hyper-parameters were chosen: on the validation language ``val``
(distance 0.375, never a reported target) and a validation seed (99, never a reported seed).

For each (inner lr α, inner steps k) of :data:`GRID`, a FOMAML reward-model initialisation is
meta-trained on the six sources at the demo's budget, adapted with trl on 100 ``val`` pairs,
and scored on held-out ``val`` pairs; the best (α, k) is what :data:`meta_pref.demo.FULL` uses.
The grid, the budget and the selection rule were fixed before the search ran.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

GRID: tuple[tuple[float, int], ...] = ((0.01, 3), (0.03, 3), (0.1, 3))


def tune(out: Path, seed: int = 99, grid: tuple[tuple[float, int], ...] = GRID) -> str:
    from meta_pref import models as m
    from meta_pref.adapt import adapt_reward_model, reward_accuracy, rng_subset
    from meta_pref.demo import FULL
    from meta_pref.meta import bradley_terry_objective, meta_train
    from meta_pref.world import SOURCES, default_world
    from paperstack.records import atomic_write_json

    world = default_world()
    tok = m.tokenizer()
    tasks = {c: m.encode_rewards(tok, world.pairs(c, FULL.source_pairs, seed=seed))
             for c in SOURCES}  # fmt: skip
    collate = functools.partial(m.collate_rewards, pad_id=tok.pad_token_id)
    train = rng_subset(world.pairs("val", 100, seed=1000 + seed), 100, seed)
    test = world.pairs("val", FULL.eval_pairs, seed=5000 + seed)
    passes = FULL.meta.outer_steps * FULL.meta.passes_per_step
    results: list[dict[str, Any]] = []
    for inner_lr, inner_steps in grid:
        steps = max(1, passes // (FULL.meta.meta_batch * (inner_steps + 1)))
        config = dataclasses.replace(FULL.meta, inner_lr=inner_lr, inner_steps=inner_steps,
                                     outer_steps=steps, seed=seed)  # fmt: skip
        model = m.reward_model(tok, seed)
        meta_train(model, tasks, bradley_terry_objective, collate, config)
        adapted, _ = adapt_reward_model(copy.deepcopy(model), tok, train,
                                        dataclasses.replace(FULL.rm_adapt, seed=seed))  # fmt: skip
        results.append({"inner_lr": inner_lr, "inner_steps": inner_steps, "outer_steps": steps,
                        "val_accuracy_at_100": reward_accuracy(adapted, tok, test)})  # fmt: skip
    best = max(results, key=lambda r: r["val_accuracy_at_100"])
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "tune.json", {"seed": seed, "results": results, "best": best})
    return json.dumps({"best": best, "results": results})
