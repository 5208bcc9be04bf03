"""Auditing a target: play held-out scenarios, check them, and measure what an auditor found.

:func:`audit` plays every domain's evaluation scenarios with one auditor against the domain's
target, runs the checkers (policy as code) on each episode and, where the target is a rule
agent with planted bugs, its ground truth. :class:`AuditScore` holds what the demo reports:
distinct violations per episode, yield per auditor call, plausibility, category coverage,
distinct rules and planted bugs found, and the checker's false violations (a violation whose
rule no planted bug of that episode broke).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from probe_audit.game import Episode, GameConfig, play
from probe_audit.policy import CATEGORIES, check_episode
from probe_audit.reward import Plausibility, RewardConfig, ViolationArchive, composite_reward

__all__ = ["AuditScore", "audit", "make_reward"]


@dataclasses.dataclass
class AuditScore:
    """What one auditor found over one evaluation set."""

    episodes: int
    violations: int
    auditor_calls: int
    plausibility: float
    categories: frozenset[str]
    rules: frozenset[str]
    bugs: frozenset[str]
    planted: int
    false_violations: int
    checked: int

    @property
    def violations_per_episode(self) -> float:
        return self.violations / max(1, self.episodes)

    @property
    def yield_per_call(self) -> float:
        return self.violations / max(1, self.auditor_calls)

    @property
    def category_coverage(self) -> float:
        return len(self.categories) / len(CATEGORIES)

    @property
    def bugs_found(self) -> float:
        return len(self.bugs) / max(1, self.planted)


def make_reward(
    plausibility: Plausibility | None,
    config: RewardConfig | None = None,
    archive: ViolationArchive | None = None,
) -> Callable[[Episode, Any, Any], dict[str, float]]:
    """``reward(episode, domain, target)``: check the episode (filling ``violations`` and
    ``ground_truth``) and return its composite reward terms."""

    def reward(episode: Episode, domain: Any, target: Any) -> dict[str, float]:
        episode.violations = check_episode(episode, domain)
        if hasattr(target, "ground_truth"):
            episode.ground_truth = target.ground_truth(episode)
        episode.reward = composite_reward(episode, plausibility, config, archive)
        return episode.reward

    return reward


def _checker(reward: Callable[..., Any], domain: Any, target: Any) -> Callable[[Episode], None]:
    def check(episode: Episode) -> None:
        reward(episode, domain, target)

    return check


def audit(
    auditor: Any,
    worlds: Mapping[str, Any],
    targets: Mapping[str, Any],
    db_seeds: Sequence[int],
    per_domain: int,
    plausibility: Plausibility | None,
    *,
    max_turns: int = 3,
    on_episode: Callable[[Episode], None] | None = None,
) -> AuditScore:
    """Play ``per_domain`` scenarios of each database seed of each domain and score them."""
    reward = make_reward(plausibility)
    episodes: list[Episode] = []
    planted: set[str] = set()
    for name, domain in sorted(worlds.items()):
        target = targets[name]
        planted |= {f"{name}:{b.id}" for b in getattr(target, "planted", ())}
        for db_seed in db_seeds:
            db = domain.database(db_seed)
            scenarios = domain.make_scenarios(db, per_domain, db_seed)
            ids = [f"eval-{name}-{db_seed}-{k}" for k in range(len(scenarios))]
            if hasattr(auditor, "reset"):
                auditor.reset()
            episodes.extend(
                play(
                    domain, scenarios, auditor, target, db,
                    GameConfig(max_turns=max_turns, on_target_error="record"),
                    episode_ids=ids,
                    checker=_checker(reward, domain, target),
                    on_episode=on_episode,
                )
            )  # fmt: skip
    bugs: set[str] = set()
    false = 0
    for ep in episodes:
        truth = ep.ground_truth or []
        bugs |= {f"{ep.domain}:{g['bug']}" for g in truth}
        if ep.ground_truth is not None:
            explained = {g["rule_id"] for g in truth}
            false += sum(1 for v in ep.violations if v.rule_id not in explained)
    return AuditScore(
        episodes=len(episodes),
        violations=sum(len(ep.violations) for ep in episodes),
        auditor_calls=sum(ep.auditor_calls for ep in episodes),
        plausibility=sum(ep.reward.get("plausibility", 0.0) for ep in episodes)
        / max(1, len(episodes)),
        categories=frozenset(v.category for ep in episodes for v in ep.violations),
        rules=frozenset(f"{ep.domain}:{v.rule_id}" for ep in episodes for v in ep.violations),
        bugs=frozenset(bugs),
        planted=len(planted),
        false_violations=false,
        checked=sum(len(ep.violations) for ep in episodes if ep.ground_truth is not None),
    )
