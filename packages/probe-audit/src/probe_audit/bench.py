"""``probe bench`` on :mod:`paperstack.bench`: what PROBE's parts cost over their references.

Four interleaved comparisons (:func:`paperstack.bench.compare_speed`: one warm-up round, then
``--repeats`` repeats in which every system runs once in a shuffled order; one torch thread,
set and recorded). Every speed row is the **median** of per-repeat ratios with its
order-statistic 95% interval (never a mean of ratios), and every system's output is checked
against its reference's in the same run, on the same input:

1. **Rule game**: 32 scenarios per domain played by the random-template auditor against the
   buggy rule targets (``rule-game``, the environment alone), against the same games followed
   by PROBE's rule judge on every episode (``rule-game+judge``). The judge reads the episodes
   after play and must not change them: the check is that every episode's id, turns, calls,
   events and end are identical (the difference counts the episodes that differ).
   ``episodes_per_second`` stays as a median row of each.
2. **PROBE step over a plain GRPO step**: one GRPO step (rollout + update) of the pre-trained
   auditor with a plain reward (the number of violations) against the same step with PROBE's
   composite reward (violations, plausibility, novelty), each from its own copy of the same
   model with the same seed, built before the timing. The rewards legitimately differ, so the
   check states what must agree: the same episodes are played and the judge finds the same
   violations in each (the difference counts the episodes whose rule ids differ).
3. and 4. **Through trl against the package's own loss**, GRPO and DPO: ``--trl-steps`` steps of
   the demo's step shape (2 scenarios x 4 episodes per domain) through trl's trainers against
   :class:`~probe_audit.training.AuditorTrainer`, trainer construction included in both. The
   two sample in a different order (trl's sampler), so their rollouts and losses are not
   comparable here (``tests/test_trl_losses.py`` pins the losses to trl's on identical inputs);
   the check is the budget: the same number of optimizer steps and of episodes played and
   judged (the difference counts the two that differ).

``time_ratio_to_plain_grpo`` and ``time_ratio_to_own_loss`` (the rows of earlier versions)
are the medians of the inverse per-repeat ratios ``t_system / t_reference``, with the
interval mapped by the same monotone map.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from typing import Any

from paperstack.bench import SpeedComparison, compare_speed, median_ci, set_threads
from paperstack.contract import Run
from paperstack.errors import PaperstackError
from paperstack.records import Claim, Row
from probe_audit.evaluate import make_reward
from probe_audit.policy import check_episode
from probe_audit.trl_training import TRL_OBJECTIVES, train_with_trl

__all__ = ["MIN_REPEATS", "THREADS", "measure"]

#: Fewer than six repeats give no 95% order-statistic interval narrower than [min, max].
MIN_REPEATS = 6
#: One torch thread: the committed timings come from a shared 2-core CPU.
THREADS = 1
SCENARIOS_PER_DOMAIN = 32
#: The step shapes: PROBE vs plain GRPO (as in 0.2), and the demo's step for trl vs own loss.
#: Module constants so the fast tests can shrink them.
STEP_SHAPE: dict[str, int] = {"scenarios_per_step": 2, "group_size": 2}
TRL_SHAPE: dict[str, int] = {"scenarios_per_step": 2, "group_size": 4}
#: Tokens per auditor turn: ModelAuditor's default (the committed benches' setting); a module
#: constant, like the shapes, so the fast tests can shrink it.
TURN_TOKENS = 64


def _count_differing(out: Any, ref: Any) -> float:
    """Entries of two equally keyed dicts that differ; ``inf`` when the keys differ (the two
    systems did not cover the same episodes or quantities)."""
    if set(out) != set(ref):
        return math.inf
    return float(sum(1 for k in ref if out[k] != ref[k]))


def _inverse_row(cmp: SpeedComparison, system: str, row_system: str, metric: str) -> Row:
    """The median of per-repeat ``t_system / t_baseline`` with its order-statistic interval."""
    med, ci = median_ci([1.0 / r for r in cmp.ratios(system)])
    return Row(system=row_system, metric=metric, value=med, ci95=ci, n=cmp.repeats, unit="x")


def _rule_game(seed: int, repeats: int, worlds: dict[str, Any], targets: dict[str, Any]) -> Any:
    from probe_audit.game import GameConfig, play
    from probe_audit.strategies import RandomTemplateAuditor

    def games() -> list[tuple[Any, Any]]:
        played = []
        for name, domain in worlds.items():
            db = domain.database(seed)
            scenarios = domain.make_scenarios(db, SCENARIOS_PER_DOMAIN, seed)
            auditor = RandomTemplateAuditor(seed)
            for ep in play(domain, scenarios, auditor, targets[name], db, GameConfig()):
                played.append((ep, domain))
        return played

    def summary(played: list[tuple[Any, Any]]) -> dict[str, Any]:
        return {
            f"{ep.domain}/{ep.id}": (
                ep.turns,
                ep.target_calls,
                ep.auditor_calls,
                len(ep.events),
                ep.ended_by,
            )
            for ep, _ in played
        }

    def game() -> dict[str, Any]:
        return summary(games())

    def judged() -> dict[str, Any]:
        played = games()
        for ep, domain in played:
            ep.violations = check_episode(ep, domain)
        return summary(played)

    episodes = len(game())
    cmp = compare_speed(
        {"rule-game": game, "rule-game+judge": judged}, baseline="rule-game", repeats=repeats,
        warmup=1, check=_count_differing, tolerance=0.0, seed=seed, threads=THREADS,
    )  # fmt: skip
    return cmp, episodes


def _recording(reward: Callable[..., dict[str, float]], log: dict[str, Any]) -> Any:
    """``reward`` that also logs each episode's violations (rule ids) under its id."""

    def wrapped(episode: Any, domain: Any, target: Any) -> dict[str, float]:
        terms = reward(episode, domain, target)
        log[f"{episode.domain}/{episode.id}"] = tuple(sorted(v.rule_id for v in episode.violations))
        return terms

    return wrapped


def measure(
    run: Run, *, repeats: int, pretrain_steps: int, trl_steps: int
) -> tuple[list[Row], list[Claim], dict[str, Any]]:
    """The bench's rows, correctness claims and configuration (timings included)."""
    from probe_audit.auditors import ModelAuditor
    from probe_audit.cli import _plausibility, _worlds
    from probe_audit.toy import pretrained_auditor
    from probe_audit.training import AuditorTrainer, TrainConfig

    if repeats < MIN_REPEATS:
        raise PaperstackError(
            f"--repeats {repeats}: needs at least {MIN_REPEATS} (a median's 95% interval)"
        )
    threads = set_threads(THREADS)
    seed = run.seed
    worlds, targets = _worlds(bugs=True)
    run.log(f"rule game: {repeats} interleaved repeats, without and with the judge")
    game, episodes = _rule_game(seed, repeats, worlds, targets)

    model, tokenizer = pretrained_auditor(pretrain_steps, progress=run.show_progress)
    plaus = _plausibility("trigram")

    def plain(episode: Any, domain: Any, target: Any) -> dict[str, float]:
        episode.violations = check_episode(episode, domain)
        return {"total": float(len(episode.violations))}

    calls = 1 + repeats  # the warm-up round, then the timed ones

    def step_system(reward: Callable[..., dict[str, float]]) -> Callable[[], dict[str, Any]]:
        """One GRPO step per call, each on its own trainer built here, before the timing."""
        step_config = TrainConfig(
            steps=1,
            seed=seed,
            scenarios_per_step=STEP_SHAPE["scenarios_per_step"],
            group_size=STEP_SHAPE["group_size"],
        )
        built = []
        for _ in range(calls):
            log: dict[str, Any] = {}
            auditor = ModelAuditor(
                copy.deepcopy(model), tokenizer, seed=seed, max_turn_tokens=TURN_TOKENS
            )
            trainer = AuditorTrainer(auditor, worlds, targets, _recording(reward, log), step_config)
            built.append((trainer, log))
        pool: Iterator[tuple[Any, dict[str, Any]]] = iter(built)

        def step() -> dict[str, Any]:
            trainer, log = next(pool)
            trainer.step(0)
            return log

        return step

    run.log(f"PROBE step vs plain GRPO step: {repeats} interleaved repeats")
    steps = compare_speed(
        {"plain-grpo": step_system(plain), "probe-step": step_system(make_reward(plaus))},
        baseline="plain-grpo", repeats=repeats, warmup=1, check=_count_differing,
        tolerance=0.0, seed=seed, threads=threads,
    )  # fmt: skip

    _import_trl()
    trl_cmp: dict[str, SpeedComparison] = {}
    probe_reward = make_reward(plaus)
    for objective in TRL_OBJECTIVES:
        shape = TrainConfig(objective=objective, steps=trl_steps, seed=seed, **TRL_SHAPE)
        copies = {k: iter([copy.deepcopy(model) for _ in range(calls)]) for k in ("own", "trl")}
        judged = [0]  # episodes the reward has judged, both systems

        def counting(episode: Any, domain: Any, target: Any, _n: list[int] = judged) -> Any:
            _n[0] += 1
            return probe_reward(episode, domain, target)

        def own(shape: Any = shape, copies: Any = copies, n: list[int] = judged) -> dict[str, int]:
            start = n[0]
            auditor = ModelAuditor(
                next(copies["own"]), tokenizer, seed=seed, max_turn_tokens=TURN_TOKENS
            )
            trainer = AuditorTrainer(auditor, worlds, targets, counting, shape)
            history = trainer.train()
            return {"steps": len(history), "episodes": n[0] - start}

        def through(
            shape: Any = shape, copies: Any = copies, n: list[int] = judged
        ) -> dict[str, int]:
            start = n[0]
            auditor = ModelAuditor(
                next(copies["trl"]), tokenizer, seed=seed, max_turn_tokens=TURN_TOKENS
            )
            out = train_with_trl(auditor, worlds, targets, counting, shape)
            return {"steps": int(out["trainer"].state.global_step), "episodes": n[0] - start}

        run.log(f"trl {objective} vs own loss: {repeats} interleaved repeats")
        trl_cmp[objective] = compare_speed(
            {f"own-{objective}": own, f"trl-{objective}": through},
            baseline=f"own-{objective}", repeats=repeats, warmup=1, check=_count_differing,
            tolerance=0.0, seed=seed, threads=threads,
        )  # fmt: skip

    rows = game.rows() + steps.rows()
    for cmp in trl_cmp.values():
        rows += cmp.rows()
    for system in game.times:
        med, ci = median_ci([episodes / t for t in game.times[system]])
        rows.append(Row(system=system, metric="episodes_per_second", value=med, ci95=ci,
                        n=game.repeats, unit="episodes/s"))  # fmt: skip
    rows.append(_inverse_row(steps, "probe-step", "probe-step", "time_ratio_to_plain_grpo"))
    for o, cmp in trl_cmp.items():
        rows.append(_inverse_row(cmp, f"trl-{o}", f"trl-{o}", "time_ratio_to_own_loss"))
    claims = [
        game.correctness_claim("rule-game+judge", rows, id="judge_keeps_the_episodes"),
        steps.correctness_claim("probe-step", rows, id="probe_step_same_violations"),
        *(cmp.correctness_claim(f"trl-{o}", rows, id=f"trl_{o}_same_budget")
          for o, cmp in trl_cmp.items()),
    ]  # fmt: skip
    config = {
        "repeats": repeats,
        "trl_steps": trl_steps,
        "threads": threads,
        "episodes": episodes,
        "timing": {"rule_game": game.to_dict(), "step": steps.to_dict(),
                   **{f"trl_{o}": c.to_dict() for o, c in trl_cmp.items()}},
    }  # fmt: skip
    return rows, claims, config


def _import_trl() -> None:
    """Import trl once before the timing, so no repeat pays for the import (seconds)."""
    import trl  # noqa: F401
