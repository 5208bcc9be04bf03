"""How the demo's hyper-parameters were chosen: on the validation language ``val``
(distance 0.375, never a reported target) and a validation seed (99, never a reported seed).

:func:`tune_grids` (0.3): the meta-learned and the joint initialisation are tuned the same way,
on validation seeds 98 and 99: a 3 x 3 grid each (:data:`META_GRID`, :data:`JOINT_GRID`), the
same budget per point, the same score (reward accuracy on held-out ``val`` pairs after trl
adaptation on 100 of them), and the same edge rule (a best value on an axis' edge extends that
axis once). Its best points are what :data:`meta_pref.demo.FULL` uses. The 0.2 search
(:func:`tune`: α alone, FOMAML's outer lr borrowed from joint training, best on the grid's
edge) is kept for its record. Grids, budget and rules were fixed before either search ran.

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

#: The 0.2 search (inner lr α only, 3 inner steps, FOMAML's outer lr borrowed from joint
#: training): kept for :func:`tune`'s record; its best, 0.01, was on the grid's edge.
GRID: tuple[tuple[float, int], ...] = ((0.01, 3), (0.03, 3), (0.1, 3))

#: The 0.3 search, the same shape and budget for both initialisations: a 3 x 3 grid over each
#: one's two step sizes, spaced x3 around the 0.2 values. FOMAML: the inner SGD lr α and the
#: outer Adam lr β. Joint: the Adam lr and the batch size, at the same number of training pairs
#: seen (steps = the compute-matched steps x 32 / batch), so no configuration gets more data.
META_GRID: dict[str, tuple[float, ...]] = {
    "inner_lr": (0.003, 0.01, 0.03),
    "outer_lr": (1.5e-4, 5e-4, 1.5e-3),
}
JOINT_GRID: dict[str, tuple[float, ...]] = {
    "lr": (1.5e-4, 5e-4, 1.5e-3),
    "batch": (16, 32, 64),
}


def tune(out: Path, seed: int = 99, grid: tuple[tuple[float, int], ...] = GRID) -> str:
    """The 0.2 search of α alone (one validation seed); :func:`tune_grids` replaces it."""
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


def _extended(axis: tuple[float, ...], best: float) -> tuple[float, ...] | None:
    """The axis with one more value beyond the edge (x3 for a step size, x2 for an integer
    axis such as a batch size) when ``best`` is on its edge; None when it is interior."""
    integer = all(isinstance(v, int) for v in axis)
    if best == axis[0]:
        lower = max(1, axis[0] // 2) if integer else axis[0] / 3
        return None if lower == axis[0] else (lower, *axis)
    if best == axis[-1]:
        return (*axis, axis[-1] * 2 if integer else axis[-1] * 3)
    return None


def search(
    grid: dict[str, tuple[float, ...]],
    evaluate: Any,
    extensions: int = 1,
    log: Any = print,
) -> dict[str, Any]:
    """Evaluate every point of ``grid`` (``evaluate(point) -> score``, higher is better); while
    the best point lies on an axis' edge and ``extensions`` rounds are left, extend that axis
    by one value beyond the edge and evaluate the new points. Returns every evaluated point,
    the best, the final grid and whether the best is interior on every axis."""
    import itertools

    grid = dict(grid)
    scores: dict[tuple[float, ...], float] = {}
    names = list(grid)

    def run_all() -> None:
        for values in itertools.product(*(grid[n] for n in names)):
            if values not in scores:
                scores[values] = evaluate(dict(zip(names, values, strict=True)))
                log(f"  {dict(zip(names, values, strict=True))}: {scores[values]:.4f}")

    run_all()
    rounds = 0
    while True:
        best = max(scores, key=lambda v: scores[v])
        extended = {n: _extended(grid[n], best[i]) for i, n in enumerate(names)}
        edges = {n: a for n, a in extended.items() if a is not None}
        if not edges or rounds >= extensions:
            break
        rounds += 1
        grid.update(edges)
        run_all()
    best = max(scores, key=lambda v: scores[v])
    return {
        "grid": {n: list(grid[n]) for n in names},
        "points": [dict(zip(names, v, strict=True)) | {"score": s} for v, s in scores.items()],
        "best": dict(zip(names, best, strict=True)) | {"score": scores[best]},
        "configs": len(scores),
        "extension_rounds": rounds,
        "interior": all(grid[n][0] < best[i] < grid[n][-1] for i, n in enumerate(names)),
    }


def tune_grids(
    out: Path,
    seeds: tuple[int, ...] = (98, 99),
    meta_grid: dict[str, tuple[float, ...]] = META_GRID,
    joint_grid: dict[str, tuple[float, ...]] = JOINT_GRID,
    extensions: int = 1,
    budget: Any = None,
    log: Any = print,
) -> dict[str, Any]:
    """The 0.3 tuning of both initialisations on the validation language ``val`` and
    validation seeds (never a reported seed or target), with the same grid shape, the same
    budget, the same selection score and the same edge rule (:func:`search`): for each point,
    a reward model from each seed's random init is meta-trained (FOMAML) or jointly trained at
    the demo's compute-matched budget, adapted with trl on 100 ``val`` pairs under the demo's
    budget rule, and scored by reward accuracy on held-out ``val`` pairs; the score is the mean
    over the seeds. ``budget``: a :class:`meta_pref.demo.DemoConfig` (default the full demo's;
    tests pass a tiny one). Writes ``tune-grids.json``."""
    from meta_pref import models as m
    from meta_pref.adapt import adapt_reward_model, reward_accuracy, rng_subset
    from meta_pref.demo import FULL
    from meta_pref.meta import bradley_terry_objective, joint_train, meta_train
    from meta_pref.world import SOURCES, default_world
    from paperstack.records import atomic_write_json

    config = FULL if budget is None else budget
    world = default_world()
    tok = m.tokenizer()
    collate = functools.partial(m.collate_rewards, pad_id=tok.pad_token_id)
    per_seed: dict[int, dict[str, Any]] = {}
    for seed in seeds:
        per_seed[seed] = {
            "tasks": {c: m.encode_rewards(tok, world.pairs(c, config.source_pairs, seed=seed))
                      for c in SOURCES},
            "train": rng_subset(world.pairs("val", 100, seed=1000 + seed), 100, seed),
            "test": world.pairs("val", config.eval_pairs, seed=5000 + seed),
            "init": m.reward_model(tok, seed),
        }  # fmt: skip
    passes = config.meta.outer_steps * config.meta.passes_per_step
    examples = passes * config.meta.support

    def score(train_init: Any) -> float:
        values = []
        for seed, data in per_seed.items():
            model = copy.deepcopy(data["init"])
            train_init(model, data["tasks"], seed)
            adapted, _ = adapt_reward_model(
                model, tok, data["train"], dataclasses.replace(config.rm_adapt, seed=seed)
            )
            values.append(reward_accuracy(adapted, tok, data["test"]))
        return sum(values) / len(values)

    def meta_point(point: dict[str, float]) -> float:
        def train(model: Any, tasks: Any, seed: int) -> None:
            meta_train(
                model,
                tasks,
                bradley_terry_objective,
                collate,
                dataclasses.replace(
                    config.meta, inner_lr=point["inner_lr"], outer_lr=point["outer_lr"], seed=seed
                ),
            )

        return score(train)

    def joint_point(point: dict[str, float]) -> float:
        batch = int(point["batch"])

        def train(model: Any, tasks: Any, seed: int) -> None:
            joint_train(
                model,
                tasks,
                bradley_terry_objective,
                collate,
                steps=max(1, examples // batch),
                batch=batch,
                lr=point["lr"],
                seed=seed,
            )

        return score(train)

    log("meta (FOMAML) grid:")
    meta = search(meta_grid, meta_point, extensions, log)
    log("joint grid:")
    joint = search(joint_grid, joint_point, extensions, log)
    report = {"seeds": list(seeds), "language": "val", "pairs": 100, "passes": passes,
              "examples": examples, "meta": meta, "joint": joint}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "tune-grids.json", report)
    return report


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
