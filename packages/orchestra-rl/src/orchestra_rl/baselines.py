"""The paper's baselines, run by the same runtime under the same call budget.

- :class:`SingleShot`: every agent answers once, plurality vote (N calls; the rest of the
  budget is left unspent, as in the paper's single-shot baseline);
- :class:`SelfConsistency`: every agent is resampled independently until the budget is spent,
  plurality over every sample (spends the whole budget, with no communication at all);
- :class:`RandomBroadcast`: each round every agent speaks with probability ``p`` and a
  speaker's full output goes to everyone (spends the budget, communication without a policy);
- :class:`FixedTopology`: every agent sends its full output along a fixed topology every round
  (the star's hub is the agent that reported the highest confidence, the most sensible fixed
  choice; the lowest-numbered one when nobody reports a confidence).

:func:`fill_to_floor` holds a policy that spends less to a share of the budget (the learned
orchestrator's ``spend_floor``): what it leaves unspent goes to independent resamples of the
least confident agents, so a comparison at one budget is one at (nearly) one spend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from orchestra_rl.errors import OrchestraError
from orchestra_rl.swarm import Delivery, Episode, Observation, Plan
from orchestra_rl.topology import TOPOLOGIES, adjacency

__all__ = [
    "FixedTopology",
    "RandomBroadcast",
    "SelfConsistency",
    "SingleShot",
    "fill_to_floor",
    "hub_of",
]


def hub_of(obs: Observation) -> int:
    """The most confident agent (ties and no confidences: the lowest-numbered)."""
    conf = [c if c is not None else -1.0 for c in obs.confidences]
    return int(np.argmax(conf)) if conf else 0


def fill_to_floor(obs: Observation, plan: Plan, share: float) -> Plan:
    """``plan``, topped up so that the episode can still spend ``ceil(share * budget)`` calls.

    Each round the plan's own calls (every agent that receives a message from an agent with an
    output, plus its resamples) are counted; while the episode is below the floor, agents
    that make no call this round are resampled independently, the least confident first (no
    confidence counts as 0, ties to the lowest number), up to what the floor still needs. A
    plan that stops is turned into such a resample round. Filling every round as far as the
    floor needs reaches it whenever ``(max_rounds - 1) * N >= floor - N``, as at the default
    budget of 3 N calls in 4 rounds."""
    if not 0.0 <= share <= 1.0:
        raise OrchestraError(f"spend floor must be in [0, 1], got {share}")
    floor = math.ceil(share * obs.budget - 1e-9)
    spent = obs.budget - obs.budget_left
    need = min(floor, obs.budget) - spent
    if need <= 0:
        return plan
    busy = set(plan.resample) if not plan.stop else set()
    if not plan.stop:
        busy |= {d.recipient for d in plan.deliveries if obs.outputs[d.sender] is not None}
    if len(busy) >= need:
        return plan
    conf = [c if c is not None else 0.0 for c in obs.confidences]
    idle = sorted((i for i in range(len(obs.outputs)) if i not in busy), key=lambda i: (conf[i], i))
    extra = tuple(idle[: need - len(busy)])
    deliveries = [] if plan.stop else list(plan.deliveries)
    resample = tuple(sorted(set(() if plan.stop else plan.resample) | set(extra)))
    return Plan(deliveries, resample=resample, stop=False, mode=plan.mode,
                topology=plan.topology, hub=plan.hub)  # fmt: skip


class _Base:
    name = "policy"
    needs_entropy = False
    vote = "final"

    def begin(self, episodes: Sequence[Episode], seed: int) -> None:
        self._rng = np.random.default_rng(seed)


class SingleShot(_Base):
    """No communication: round 0 only."""

    name = "single_shot"

    def plan(self, observations: Sequence[Observation], index: Sequence[int]) -> list[Plan]:
        return [Plan(stop=True, mode="silent", topology="none") for _ in observations]


class SelfConsistency(_Base):
    """Independent resamples of every agent, then a plurality over all samples."""

    name = "self_consistency"
    vote = "all"

    def plan(self, observations: Sequence[Observation], index: Sequence[int]) -> list[Plan]:
        return [
            Plan(resample=tuple(range(len(o.outputs))), mode="resample", topology="none")
            for o in observations
        ]


class RandomBroadcast(_Base):
    """Each agent speaks with probability ``p`` per round; speakers broadcast in full."""

    name = "random_broadcast"

    def __init__(self, p: float = 0.5) -> None:
        if not 0.0 < p <= 1.0:
            raise OrchestraError(f"random broadcast: p must be in (0, 1], got {p}")
        self.p = p

    def plan(self, observations: Sequence[Observation], index: Sequence[int]) -> list[Plan]:
        plans = []
        for obs in observations:
            n = len(obs.outputs)
            speakers = np.flatnonzero(self._rng.random(n) < self.p)
            deliveries = [Delivery(int(s), r, "full") for s in speakers for r in range(n) if r != s]
            plans.append(Plan(deliveries, mode="open", topology="complete"))
        return plans


class FixedTopology(_Base):
    """Every agent sends its full output along ``topology`` every round."""

    def __init__(self, topology: str) -> None:
        if topology not in TOPOLOGIES:
            raise OrchestraError(f"unknown topology {topology!r}; known: {', '.join(TOPOLOGIES)}")
        self.topology = topology
        self.name = f"fixed_{topology}"

    def plan(self, observations: Sequence[Observation], index: Sequence[int]) -> list[Plan]:
        plans = []
        for obs in observations:
            n = len(obs.outputs)
            if self.topology == "none":
                plans.append(Plan(stop=True, mode="silent", topology="none"))
                continue
            hub = hub_of(obs) if self.topology == "star" else None
            a = adjacency(self.topology, n, hub or 0)
            senders, recipients = np.nonzero(a)
            deliveries = [
                Delivery(int(s), int(r), "full") for s, r in zip(senders, recipients, strict=True)
            ]
            plans.append(Plan(deliveries, mode="open", topology=self.topology, hub=hub))
        return plans
