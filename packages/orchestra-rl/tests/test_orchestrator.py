"""The learned orchestrator: ordered thresholds, REINFORCE gradients, a policy that learns."""

import numpy as np
import pytest
import torch
from orchestra_rl.agents import scripted_swarm
from orchestra_rl.errors import OrchestraError
from orchestra_rl.orchestrator import LearnedOrchestrator, TrainConfig, train_orchestrator
from orchestra_rl.swarm import Swarm, SwarmConfig
from orchestra_rl.tasks import KINDS, builtin_evaluator, instance_pool

EVAL = builtin_evaluator(KINDS)


class HashEmbedder:
    """A deterministic stand-in for MiniLM in unit tests (the demo uses the real one)."""

    def encode(self, texts):
        out = np.zeros((len(texts), 16))
        for k, t in enumerate(texts):
            out[k, hash(t.split("\n")[0]) % 16] = 1.0
        return out


@pytest.fixture(scope="module")
def pools():
    train = instance_pool("facts-mc", 24, "train", 0) + instance_pool("addition", 24, "train", 0)
    test = instance_pool("facts-mc", 16, "test", 0) + instance_pool("addition", 16, "test", 0)
    return train, test


def test_mode_probabilities_are_an_ordered_logit():
    policy = LearnedOrchestrator(KINDS)
    t1, t2 = policy.thresholds()
    assert t1 < t2
    h = torch.linspace(0, 1, 11)
    p = policy.macro.mode_probs(h, torch.zeros(11, len(KINDS) + 4))
    assert torch.allclose(p.sum(1), torch.ones(11), atol=1e-4)
    assert (p[:, 0].diff() <= 1e-6).all()  # settling gets less likely as H grows
    assert (p[:, 2].diff() >= -1e-6).all()  # discussing more likely


def test_training_gives_gradients_to_every_part(pools):
    train, _ = pools
    swarm = Swarm(scripted_swarm(train, 4, 0), EVAL, SwarmConfig(budget=12), HashEmbedder())
    policy = LearnedOrchestrator(KINDS)
    policy.train()
    episodes = swarm.run(train, policy, seed=0)
    loss = policy.loss(episodes, cost=0.05, entropy_bonus=0.01)
    loss.backward()
    for name in (
        "macro.theta1",
        "macro.topology.weight",
        "macro.value.0.weight",
        "micro.speak.weight",
        "micro.address.0.weight",
    ):
        grad = dict(policy.named_parameters())[name].grad
        assert grad is not None, name
        assert grad.abs().sum() > 0, name


def test_a_high_call_cost_teaches_the_policy_to_settle(pools):
    """With a cost far above any accuracy gain, the learned policy must spend less than the
    untrained one: the REINFORCE loop really changes behaviour."""
    train, test = pools
    swarm = Swarm(scripted_swarm(train + test, 4, 0), EVAL, SwarmConfig(budget=12), HashEmbedder())
    untrained = LearnedOrchestrator(KINDS)
    untrained.eval()
    before = np.mean([e.calls for e in swarm.run(test, untrained, seed=1)])
    cfg = TrainConfig(iterations=25, batch=16, lr=0.1, cost=3.0)
    policy, rewards = train_orchestrator(swarm, train, cfg, seed=0, kinds=KINDS)
    after = np.mean([e.calls for e in swarm.run(test, policy, seed=1)])
    assert after < before - 1.0
    assert np.mean(rewards[-5:]) > np.mean(rewards[:5])
    assert sum(policy.choices.values()) > 0  # eval-mode choices are counted


def test_without_entropy_the_policy_asks_for_no_embedder(pools):
    train, test = pools
    swarm = Swarm(scripted_swarm(train + test, 2, 0), EVAL, SwarmConfig(budget=6))
    policy = LearnedOrchestrator(KINDS, use_entropy=False)
    policy.eval()
    assert all(e.calls <= 6 for e in swarm.run(test, policy, seed=0))
    with pytest.raises(OrchestraError, match="embedder"):
        swarm.run(test, LearnedOrchestrator(KINDS).eval(), seed=0)


def test_bad_train_config_is_an_error():
    with pytest.raises(OrchestraError):
        TrainConfig(iterations=0)


def test_saved_policy_loads_and_plans_the_same(tmp_path):
    import torch
    from orchestra_rl.orchestrator import LearnedOrchestrator, load_orchestrator

    torch.manual_seed(3)
    policy = LearnedOrchestrator(("facts-mc", "addition"), spend_floor=0.95)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    policy.eval()
    policy.save(tmp_path / "p")
    loaded = load_orchestrator(tmp_path / "p")
    assert loaded.kinds == policy.kinds
    assert loaded.spend_floor == 0.95
    for a, b in zip(policy.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert loaded.thresholds() == policy.thresholds()


def test_loading_a_missing_or_foreign_policy_is_one_error(tmp_path):
    from orchestra_rl.errors import OrchestraError
    from orchestra_rl.orchestrator import load_orchestrator

    with pytest.raises(OrchestraError, match=r"no policy\.json"):
        load_orchestrator(tmp_path)
    (tmp_path / "policy.json").write_text('{"format": "something-else"}')
    with pytest.raises(OrchestraError, match="not an orchestra-rl policy"):
        load_orchestrator(tmp_path)
    (tmp_path / "policy.json").write_text(
        '{"format": "orchestra-rl-policy/1", "kinds": ["addition"], "use_entropy": true}'
    )
    with pytest.raises(OrchestraError, match=r"policy\.safetensors is missing"):
        load_orchestrator(tmp_path)


def test_spend_floor_holds_the_learned_policy_to_95_percent_of_the_budget():
    """Untrained (and so often settling), the policy spends at least ceil(0.95 B) calls on
    every instance with the floor, and less without it."""
    from orchestra_rl.agents import scripted_swarm
    from orchestra_rl.entropy import CachedEmbedder
    from orchestra_rl.orchestrator import LearnedOrchestrator
    from orchestra_rl.swarm import Swarm, SwarmConfig
    from orchestra_rl.tasks import KINDS, builtin_evaluator, instance_pool

    from paperstack.embed import Embedder

    inst = instance_pool("facts-mc", 12, "test", 0) + instance_pool("addition", 12, "test", 0)
    swarm = Swarm(
        scripted_swarm(inst, 4, 0),
        builtin_evaluator(KINDS),
        SwarmConfig(budget=12, max_rounds=4),
        embedder=CachedEmbedder(Embedder()),
    )
    free = LearnedOrchestrator(KINDS).eval()
    held = LearnedOrchestrator(KINDS, spend_floor=0.95).eval()
    held.load_state_dict(free.state_dict())
    spend_free = [e.calls for e in swarm.run(inst, free, seed=0)]
    spend_held = [e.calls for e in swarm.run(inst, held, seed=0)]
    assert min(spend_held) >= 12  # ceil(0.95 * 12) = 12
    assert sum(spend_free) < sum(spend_held)
