"""FOMAML and Reptile over languages as tasks: the inner loop is plain SGD through torch.func,
Reptile moves φ toward the adapted parameters, the LoRA-only option touches only the adapter,
and bad tasks are one clear error each."""

import copy
import functools

import pytest
import torch
from meta_pref import MetaConfig, MetaPrefError, bradley_terry_objective, meta_train
from meta_pref.meta import adapt_functional, joint_train
from meta_pref.models import collate_rewards, encode_rewards, reward_model


@pytest.fixture
def setup(world, tok):
    tasks = {c: encode_rewards(tok, world.pairs(c, 40, seed=0)) for c in ("s1", "s4")}
    collate = functools.partial(collate_rewards, pad_id=tok.pad_token_id)
    return reward_model(tok, seed=0), tasks, collate


def test_inner_loop_equals_autograd_sgd(setup):
    model, tasks, collate = setup
    batch = collate(tasks["s1"][:16])
    start = dict(model.named_parameters())
    fast = adapt_functional(model, start, batch, bradley_terry_objective, steps=2, lr=0.5)
    manual = copy.deepcopy(model)
    opt = torch.optim.SGD(manual.parameters(), lr=0.5)
    for _ in range(2):
        opt.zero_grad()
        bradley_terry_objective(manual, dict(manual.named_parameters()), batch).backward()
        opt.step()
    for name, p in manual.named_parameters():
        assert torch.allclose(fast[name], p, atol=1e-6), name
    # φ itself is untouched by the functional inner loop
    assert torch.equal(start["score.weight"], model.score.weight)
    assert not torch.allclose(fast["score.weight"], model.score.weight)


def test_reptile_with_step_one_lands_on_the_adapted_parameters(setup):
    model, tasks, collate = setup
    one = {"s1": tasks["s1"]}
    config = MetaConfig(algorithm="reptile", outer_steps=1, meta_batch=1, inner_steps=2,
                        inner_lr=0.5, reptile_step=1.0, support=16, query=16, seed=5)  # fmt: skip
    before = copy.deepcopy(model)
    meta_train(model, one, bradley_terry_objective, collate, config)
    import random

    rng = random.Random(5)
    rng.sample(["s1"], 1)
    picked = rng.sample(range(len(one["s1"])), 32)
    support = collate([one["s1"][i] for i in picked[:16]])
    fast = adapt_functional(before, dict(before.named_parameters()), support,
                            bradley_terry_objective, steps=2, lr=0.5)  # fmt: skip
    for name, p in model.named_parameters():
        assert torch.allclose(p, fast[name], atol=1e-6), name


def test_fomaml_and_joint_lower_the_source_loss(setup):
    model, tasks, collate = setup
    batch = collate(tasks["s1"] + tasks["s4"])
    start = float(bradley_terry_objective(model, dict(model.named_parameters()), batch))
    meta = copy.deepcopy(model)
    result = meta_train(meta, tasks, bradley_terry_objective, collate,
                        MetaConfig(outer_steps=15, meta_batch=2, inner_steps=2, outer_lr=3e-3,
                                   support=16, query=16))  # fmt: skip
    assert result.steps == 15
    assert len(result.losses) == 15
    joint = copy.deepcopy(model)
    joint_train(joint, tasks, bradley_terry_objective, collate, steps=40, batch=16, lr=3e-3)
    for trained in (meta, joint):
        after = float(bradley_terry_objective(trained, dict(trained.named_parameters()), batch))
        assert after < start


def test_lora_only_meta_learning_changes_only_the_adapter(setup):
    pytest.importorskip("peft")
    from meta_pref import lora_only

    model, tasks, collate = setup
    wrapped = lora_only(model, rank=4)
    frozen = {n: p.detach().clone() for n, p in wrapped.named_parameters() if not p.requires_grad}
    trained = {n: p.detach().clone() for n, p in wrapped.named_parameters() if p.requires_grad}
    assert frozen
    assert trained
    assert all("lora_" in n or "score" in n for n in trained)
    config = MetaConfig(outer_steps=3, meta_batch=2, inner_steps=1, support=8, query=8)
    meta_train(wrapped, tasks, bradley_terry_objective, collate, config)
    now = dict(wrapped.named_parameters())
    for n, p in frozen.items():
        assert torch.equal(now[n], p), n
    assert any(not torch.equal(now[n], p) for n, p in trained.items())


def test_a_language_with_no_pairs_is_one_error(setup):
    model, tasks, collate = setup
    with pytest.raises(MetaPrefError, match="source language 'empty' has no pairs"):
        meta_train(model, {**tasks, "empty": []}, bradley_terry_objective, collate)
    with pytest.raises(MetaPrefError, match="at least one source language"):
        meta_train(model, {}, bradley_terry_objective, collate)
    with pytest.raises(MetaPrefError, match="needs at least 64"):
        meta_train(model, {"s1": tasks["s1"][:10]}, bradley_terry_objective, collate,
                   MetaConfig(support=32, query=32))  # fmt: skip


def test_meta_config_rejects_impossible_values():
    with pytest.raises(MetaPrefError, match="algorithm"):
        MetaConfig(algorithm="maml2")  # type: ignore[arg-type]
    with pytest.raises(MetaPrefError, match="inner_steps=0"):
        MetaConfig(inner_steps=0)
    with pytest.raises(MetaPrefError, match="inner_lr"):
        MetaConfig(inner_lr=0.0)
