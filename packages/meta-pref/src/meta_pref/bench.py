"""The bench: wall time of one meta outer step over one joint step, in the same process.

Both run the Bradley-Terry objective on the demo's reward model and batch size; a FOMAML
outer step does ``meta_batch x (inner_steps + 1)`` forward/backward passes (Reptile's
``meta_batch x inner_steps``), a joint step one, so the expected ratio is about that count;
the measured ratio shows the functional (``torch.func``) overhead on top.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from paperstack.records import Row


def bench_steps(
    repeats: int, steps: int, seed: int, advance: Callable[[], None] = lambda: None
) -> tuple[list[Row], str, dict[str, Any]]:
    from meta_pref import models as m
    from meta_pref.meta import MetaConfig, bradley_terry_objective, joint_train, meta_train
    from meta_pref.world import SOURCES, default_world

    world = default_world()
    tok = m.tokenizer()
    tasks = {c: m.encode_rewards(tok, world.pairs(c, 200, seed=seed)) for c in SOURCES}
    collate = functools.partial(m.collate_rewards, pad_id=tok.pad_token_id)
    base = m.reward_model(tok, seed)
    configs = {
        alg: dataclasses.replace(MetaConfig(algorithm=alg), outer_steps=steps, seed=seed)
        for alg in ("fomaml", "reptile")
    }
    times: dict[str, dict[int, float]] = {"fomaml": {}, "reptile": {}, "joint": {}}
    for i in range(repeats):
        for alg, config in configs.items():
            result = meta_train(copy.deepcopy(base), tasks, bradley_terry_objective, collate,
                                config)  # fmt: skip
            times[alg][i] = result.seconds / result.steps
        batch = configs["fomaml"].support
        result = joint_train(copy.deepcopy(base), tasks, bradley_terry_objective, collate,
                             steps=steps * 4, batch=batch, seed=seed)  # fmt: skip
        times["joint"][i] = result.seconds / result.steps
        advance()
    rows = [Row.from_seeds(name, "step_seconds", t, unit="s") for name, t in times.items()]
    for alg in ("fomaml", "reptile"):
        ratio = {i: times[alg][i] / times["joint"][i] for i in range(repeats)}
        rows.append(Row.from_seeds(f"{alg}/joint", "step_time_ratio", ratio))
    passes = {alg: c.passes_per_step for alg, c in configs.items()}
    summary = (
        f"a FOMAML outer step takes {rows[3].value:.1f}x a joint step "
        f"({passes['fomaml']} passes), a Reptile step {rows[4].value:.1f}x ({passes['reptile']} "
        f"passes); {repeats} repeats of {steps} outer steps, batch {configs['fomaml'].support} "
        "pairs, on a shared 2-core CPU"
    )
    out: dict[str, Any] = {"repeats": repeats, "steps": steps, "passes_per_outer_step": passes,
              "meta": dataclasses.asdict(configs["fomaml"])}  # fmt: skip
    return rows, summary, out
