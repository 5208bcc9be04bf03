"""The swarm runtime: topologies, context entropy, budget accounting, failures, baselines."""

import dataclasses
import time

import numpy as np
import pytest
from orchestra_rl.agents import AgentSpec, ScriptedAgent, draw_profiles, scripted_swarm
from orchestra_rl.baselines import FixedTopology, RandomBroadcast, SelfConsistency, SingleShot
from orchestra_rl.entropy import CachedEmbedder, spectral_entropy
from orchestra_rl.errors import OrchestraError
from orchestra_rl.swarm import Swarm, SwarmConfig, plurality
from orchestra_rl.tasks import KINDS, builtin_evaluator, instance_pool
from orchestra_rl.topology import TOPOLOGIES, adjacency

EVAL = builtin_evaluator(KINDS)


@pytest.fixture(scope="module")
def instances():
    return instance_pool("facts-mc", 12, "test", 0) + instance_pool("addition", 12, "test", 0)


def test_spectral_entropy_bounds():
    same = np.tile(np.array([[1.0, 0.0, 0.0, 0.0]]), (4, 1))
    assert spectral_entropy(same) == pytest.approx(0.0, abs=1e-9)
    assert spectral_entropy(np.eye(4)) == pytest.approx(1.0)
    assert spectral_entropy(np.eye(3)[:1]) == 0.0  # one agent: no spread
    two_groups = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    assert spectral_entropy(two_groups) == pytest.approx(np.log(2) / np.log(4))
    batch = spectral_entropy(np.stack([same, np.eye(4)]))
    assert batch.shape == (2,)
    assert batch[0] < batch[1]


def test_cached_embedder_counts_hits():
    class Fake:
        calls = 0

        def encode(self, texts):
            Fake.calls += 1
            return np.ones((len(texts), 3))

    emb = CachedEmbedder(Fake())
    emb.encode(["a", "b", "a"])
    emb.encode(["a", "b"])
    assert (emb.misses, emb.hits, Fake.calls, len(emb)) == (2, 3, 1, 2)


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_topologies_have_no_self_loops(name):
    a = adjacency(name, 6, hub=2)
    assert a.shape == (6, 6)
    assert not a.diagonal().any()
    if name == "star":
        assert a[2].sum() == 5
        assert a[:, 2].sum() == 5
        assert a.sum() == 10
    if name == "pipeline":
        assert a.sum() == 5
        assert a[0, 1]
        assert not a[1, 0]
    if name == "clusters":
        assert a[0, 2]
        assert not a[0, 3]


def test_unknown_topology_and_bad_hub_are_errors():
    with pytest.raises(OrchestraError, match="unknown topology"):
        adjacency("mesh", 4)
    with pytest.raises(OrchestraError, match="hub 4"):
        adjacency("star", 4, hub=4)


def test_plurality_ties_go_to_the_first():
    assert plurality(["b", "a", "a", "b", None]) == "b"
    assert plurality([None, None]) is None


def test_budget_below_n_is_refused(instances):
    with pytest.raises(OrchestraError, match="budget 3 is below the number of agents 4"):
        Swarm(scripted_swarm(instances, 4, 0), EVAL, SwarmConfig(budget=3))


@pytest.mark.parametrize(
    "policy",
    [SingleShot(), SelfConsistency(), RandomBroadcast(), FixedTopology("complete")],
    ids=lambda p: p.name,
)
def test_budget_is_exact_and_traced(instances, policy):
    n, budget = 4, 10
    swarm = Swarm(scripted_swarm(instances, n, 1), EVAL, SwarmConfig(budget=budget, max_rounds=4))
    episodes = swarm.run(instances, policy, seed=3)
    assert [e.instance.id for e in episodes] == [i.id for i in instances]
    for ep in episodes:
        assert n <= ep.calls <= budget
        assert ep.calls == len(ep.trace)
        assert ep.messages == sum(len(c.received) for c in ep.trace)
        js = ep.to_json()
        assert js["calls"] == ep.calls
        assert len(js["calls_trace"]) == ep.calls
    if policy.name in ("self_consistency", "fixed_complete"):
        # both spend everything they are given: 4 + 4 + 2 (denied 2) = 10
        assert all(ep.calls == budget for ep in episodes)
        assert all(ep.denied == 2 for ep in episodes)
    if policy.name == "single_shot":
        assert all(ep.calls == n for ep in episodes)


def test_runs_are_deterministic_by_seed(instances):
    swarm = Swarm(scripted_swarm(instances, 4, 2), EVAL, SwarmConfig(budget=12))
    a = [e.to_json() for e in swarm.run(instances, RandomBroadcast(), seed=5)]
    b = [e.to_json() for e in swarm.run(instances, RandomBroadcast(), seed=5)]
    for x, y in zip(a, b, strict=True):
        for c in (*x["calls_trace"], *y["calls_trace"]):
            c.pop("seconds")
    assert a == b


def test_communication_changes_answers_but_nothing_is_built_in(instances):
    """Messages reach agents and can change their answers; the profiles themselves know
    nothing of topologies (the same draw for every N)."""
    swarm = Swarm(scripted_swarm(instances, 6, 0), EVAL, SwarmConfig(budget=18))
    episodes = swarm.run(instances, FixedTopology("complete"), seed=0)
    changed = sum(
        ep.trace[i].answer != ep.answers[ep.trace[i].agent] for ep in episodes for i in range(6)
    )
    assert changed > 0
    assert [p.name for p in draw_profiles(8, 0)[:4]] == [p.name for p in draw_profiles(4, 0)]


class Broken(ScriptedAgent):
    def generate(self, prompts, **kw):
        raise RuntimeError("backend exploded")


class Slow:
    """A remote-like backend (not a rule agent): sleeps past the call timeout."""

    name = "slow"

    def generate(self, prompts, **kw):
        time.sleep(0.5)
        return [["Answer: A"] for _ in prompts]


def test_failing_and_slow_agents_are_counted_and_the_instance_continues(instances):
    facts = instances[:4]
    specs = scripted_swarm(facts, 3, 0)
    specs[1] = AgentSpec(Broken(draw_profiles(1, 0)[0], facts), name="broken")
    specs[2] = AgentSpec(Slow(), name="slow")
    swarm = Swarm(specs, EVAL, SwarmConfig(budget=9, call_timeout=0.1))
    episodes = swarm.run(facts, FixedTopology("complete"), seed=0)
    for ep in episodes:
        assert ep.errors >= 1
        assert ep.timeouts >= 1
        assert ep.final_answer is not None  # agent 0 still answered
        failures = [c.failure for c in ep.trace if c.failure]
        assert any(f.startswith("error: RuntimeError") for f in failures)
        assert any(f.startswith("timeout") for f in failures)


def test_evaluator_exceptions_are_recorded(instances):
    class Flaky:
        def extract(self, instance, text):
            return EVAL.extract(instance, text)

        def score(self, instance, answer):
            raise ValueError("harness crashed")

    swarm = Swarm(scripted_swarm(instances, 2, 0), Flaky(), SwarmConfig(budget=4))
    episodes = swarm.run(instances, SingleShot())
    assert all(ep.score == 0.0 and ep.evaluator_errors == 1 for ep in episodes)
    assert episodes[0].evaluator_error.startswith("score: ValueError: harness crashed")


def test_scripted_experts_know_their_domain():
    facts = instance_pool("facts-mc", 200, "test", 0)
    profile = next(p for p in draw_profiles(50, 0) if p.name == "expert-home")
    agent = ScriptedAgent(profile, facts, seed=0)
    home = [i for i in facts if i.meta.get("domain") == "home"]
    other = [i for i in facts if i.meta.get("domain") not in (None, "home")]
    assert home
    assert other

    def accuracy(items):
        replies = agent.generate(
            [[{"role": "user", "content": f"Question: {i.prompt}"}] for i in items]
        )
        return np.mean(
            [EVAL.score(i, EVAL.extract(i, r[0])) for i, r in zip(items, replies, strict=True)]
        )

    assert accuracy(home) > accuracy(other) + 0.2


def test_splits_are_disjoint():
    for kind in KINDS:
        train = {i.prompt for i in instance_pool(kind, 60, "train", 0)}
        test = {i.prompt for i in instance_pool(kind, 60, "test", 0)}
        assert not train & test


def test_reading_capacity_keeps_the_most_confident_messages():
    """An agent reads at most ``capacity`` messages, the most confident first: a herder told
    the truth by calibrated agents follows them, but not when louder wrong messages crowd
    theirs out of what it reads."""
    from orchestra_rl.wire import Received, build_prompt

    facts = instance_pool("facts-mc", 30, "test", 0)
    herder = next(p for p in draw_profiles(40, 0) if p.name == "herder")
    eager = dataclasses.replace(herder, herding=1.0, conviction=0.0, capacity=2)
    agent = ScriptedAgent(eager, facts, seed=0)
    inst = facts[0]
    gold = inst.meta["letter"]
    wrong = next(x for x in "ABCD" if x != gold)
    truth = Received(1, "summary", f"Answer: {gold} / Confidence: 0.6")
    loud = [Received(k, "summary", f"Answer: {wrong} / Confidence: 0.9") for k in (2, 3)]
    previous = f"Answer: {wrong}\nConfidence: 0.2\nI am guessing."

    def answer(messages):
        prompt = build_prompt(inst.prompt, previous, messages)
        return EVAL.extract(inst, agent.generate([prompt], seed=0)[0][0])

    assert answer([truth, truth]) == gold  # read: two votes for the truth against its own
    # With two louder messages the capacity of 2 is filled by them: the truth is never read.
    assert answer([truth, truth, *loud]) == wrong
    unlimited = ScriptedAgent(dataclasses.replace(eager, capacity=None), facts, seed=0)
    prompt = build_prompt(inst.prompt, previous, [truth, truth, truth, truth, *loud])
    assert EVAL.extract(inst, unlimited.generate([prompt], seed=0)[0][0]) == gold
    with pytest.raises(OrchestraError, match="capacity"):
        dataclasses.replace(herder, capacity=0)
