"""How the demo's inner-loop hyper-parameters were chosen: on the validation language ``val``
(distance 0.375, never a reported target) and a validation seed (99, never a reported seed).

For each (inner lr α, inner steps k) of :data:`GRID`, a FOMAML reward-model initialisation is
meta-trained on the six sources at the demo's budget, adapted with trl on 100 ``val`` pairs,
and scored on held-out ``val`` pairs; the best (α, k) is what :data:`meta_pref.demo.FULL` uses.
The grid, the budget and the selection rule were fixed before the search ran.

:func:`headroom` measures the demo's premise the same way, on validation seeds 98 and 99:
target-only reward models only, accuracy recorded after every epoch at 25/100/1000 target
pairs, and what each candidate adaptation budget rule (:data:`RULES`) would keep. The demo's
rule (:class:`meta_pref.adapt.AdaptSettings`) is the fewest epochs at which both validation
seeds show a 1000-vs-100 headroom over 0.1 at both targets.
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


#: Candidate budget rules (epochs, patience) the headroom measurement compares; the demo's
#: :class:`meta_pref.adapt.AdaptSettings` default is the one chosen from them.
RULES: tuple[tuple[int, int | None], ...] = (
    (4, None), (8, None), (12, None), (16, None), (20, None), (24, None), (20, 3), (20, 6)
)  # fmt: skip


def simulate_rule(
    curve: list[dict[str, float]], epochs: int, patience: int | None
) -> dict[str, Any]:
    """What the budget rule (``epochs``, ``patience``) would have kept from one recorded
    training curve (``{"epoch", "step", "val_loss", "test_accuracy"}`` after each epoch, epoch
    0 = before training): the first best validation loss before the rule stops."""
    best, bad, kept = float("inf"), 0, curve[0]
    for point in curve:
        if point["epoch"] > epochs:
            break
        if point["val_loss"] < best - 1e-6:
            best, bad, kept = point["val_loss"], 0, point
        else:
            bad += 1
            if patience is not None and bad >= patience:
                break
    return {"epochs": epochs, "patience": patience, "kept_epoch": kept["epoch"],
            "kept_step": kept["step"], "test_accuracy": kept["test_accuracy"]}  # fmt: skip


def headroom(
    out: Path,
    seeds: tuple[int, ...] = (98, 99),
    targets: tuple[str, ...] = ("near", "far"),
    sizes: tuple[int, ...] = (25, 100, 1000),
    max_epochs: int = 24,
    learning_rate: float | None = None,
    rules: tuple[tuple[int, int | None], ...] = RULES,
    log: Any = print,
) -> dict[str, Any]:
    """The premise measured on validation seeds (never reported): target-only reward models
    trained with trl on n target pairs for ``max_epochs`` epochs, the held-out validation
    loss and the test accuracy recorded after every epoch; then, for each candidate budget
    rule, the test accuracy of the state that rule keeps, and the 1000-vs-100 headroom.
    Only the target-only arm is trained: no method arm is looked at to choose the rule."""
    from meta_pref import models as m
    from meta_pref.adapt import (
        _train,
        encode_rewards,
        reward_accuracy,
        reward_validation_loss,
        rng_subset,
    )
    from meta_pref.demo import FULL
    from meta_pref.world import default_world
    from paperstack.records import atomic_write_json

    world = default_world()
    tok = m.tokenizer()
    base = dataclasses.replace(FULL.rm_adapt, epochs=max_epochs, patience=None)
    if learning_rate is not None:
        base = dataclasses.replace(base, learning_rate=learning_rate)
    curves: dict[str, list[dict[str, float]]] = {}
    for seed in seeds:
        settings = dataclasses.replace(base, seed=seed)
        for target in targets:
            pool = world.pairs(target, max(sizes), seed=1000 + seed)
            test = world.pairs(target, FULL.eval_pairs, seed=5000 + seed)
            for n in sizes:
                train, val = settings.split(rng_subset(pool, n, seed))
                model = m.reward_model(tok, seed)
                curve: list[dict[str, float]] = []

                def score(model: Any = model, val: Any = val, test: Any = test,
                          curve: list = curve) -> float:  # fmt: skip
                    loss = reward_validation_loss(model, tok, val)
                    curve.append({"epoch": len(curve), "val_loss": loss,
                                  "test_accuracy": reward_accuracy(model, tok, test)})  # fmt: skip
                    return loss

                from trl import RewardConfig, RewardTrainer

                _, result = _train(RewardTrainer, RewardConfig, model, {},
                                   encode_rewards(tok, train), tok, settings, score)  # fmt: skip
                for point, (step, _) in zip(curve, result.validation, strict=True):
                    point["step"] = step
                curves[f"{seed}|{target}|{n}"] = curve
                log(f"seed {seed} {target}/{n}: test accuracy by epoch "
                    + " ".join(f"{p['test_accuracy']:.2f}" for p in curve))  # fmt: skip
    table = []
    for epochs, patience in rules:
        for target in targets:
            kept = {(s, n): simulate_rule(curves[f"{s}|{target}|{n}"], epochs, patience)
                    for s in seeds for n in sizes}  # fmt: skip
            row: dict[str, Any] = {"epochs": epochs, "patience": patience, "target": target}
            for n in sizes:
                row[f"acc_{n}"] = sum(kept[s, n]["test_accuracy"] for s in seeds) / len(seeds)
                row[f"steps_{n}"] = sum(kept[s, n]["kept_step"] for s in seeds) / len(seeds)
            row["headroom_1000_vs_100"] = {
                s: kept[s, max(sizes)]["test_accuracy"] - kept[s, 100]["test_accuracy"]
                for s in seeds
            } if 100 in sizes else None  # fmt: skip
            table.append(row)
    report = {"seeds": list(seeds), "max_epochs": max_epochs, "settings": dataclasses.asdict(base),
              "rules": table, "curves": curves}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "headroom.json", report)
    return report
