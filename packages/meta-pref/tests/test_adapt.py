"""The adaptation budget rule every system shares: a held-out validation split of the target's
pairs, epochs over the rest (steps grow with the data), the best held-out state kept, early
stopping."""

import copy

import pytest
import torch
from meta_pref.adapt import (
    AdaptSettings,
    adapt_policy,
    adapt_reward_model,
    reward_accuracy,
    reward_validation_loss,
    sample_responses,
)
from meta_pref.errors import MetaPrefError
from meta_pref.models import policy_model, reward_model


def test_steps_grow_with_the_data_and_the_split_holds_out_a_fraction():
    rule = AdaptSettings(batch_size=16, epochs=12, val_fraction=0.2)
    train, val = rule.split(list(range(1000)))
    assert (len(train), len(val)) == (800, 200)
    assert rule.split(list(range(25)))[1] == list(range(20, 25))
    assert rule.steps(1000) == 12 * 50
    assert rule.steps(100) == 12 * 5
    assert rule.steps(1000) > rule.steps(100) > rule.steps(25)
    assert AdaptSettings(max_steps=8).steps(1000) == 8
    assert AdaptSettings(val_fraction=0.0).split([1, 2, 3]) == ([1, 2, 3], [])


def test_impossible_settings_are_one_error():
    with pytest.raises(MetaPrefError, match="val_fraction"):
        AdaptSettings(val_fraction=1.0)
    with pytest.raises(MetaPrefError, match="epochs"):
        AdaptSettings(epochs=0)
    with pytest.raises(MetaPrefError, match="patience=0"):
        AdaptSettings(patience=0)


def test_early_stopping_keeps_the_best_held_out_state(world, tok):
    pairs = world.pairs("near", 60, seed=3)
    # a learning rate that wrecks the model: the kept state must be the best one seen
    rule = AdaptSettings(learning_rate=0.5, epochs=6, patience=2, seed=0)
    start = reward_model(tok, seed=0)
    _, val = rule.split(pairs)
    model, result = adapt_reward_model(copy.deepcopy(start), tok, pairs, rule)
    losses = dict(result.validation)
    assert result.validation[0][0] == 0  # scored before training
    assert min(losses.values()) == pytest.approx(losses[result.best_step])
    assert reward_validation_loss(model, tok, val) == pytest.approx(losses[result.best_step])
    assert result.steps <= rule.steps(len(pairs))
    if result.best_step == 0:
        for a, b in zip(model.state_dict().values(), start.state_dict().values(), strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("objective", ["reward", "dpo"])
def test_adaptation_runs_in_fp32_without_recomputing_the_forward(world, tok, objective):
    """trl 1.16's configs default to bf16 autocast and activation checkpointing, even on a
    CPU; adaptation must turn both off (they slowed a SmolLM2 epoch some tenfold)."""
    model = reward_model(tok, seed=0) if objective == "reward" else policy_model(tok, seed=0)
    seen: list[tuple[bool, bool]] = []
    layer = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
    layer.register_forward_pre_hook(
        lambda module, args: seen.append(
            (
                torch.is_autocast_enabled("cpu"),
                bool(getattr(model, "is_gradient_checkpointing", False)),
            )
        )
    )
    pairs = world.pairs("near", 10, seed=3)
    rule = AdaptSettings(epochs=1, max_steps=1, batch_size=4, seed=0)
    if objective == "reward":
        adapted, _ = adapt_reward_model(model, tok, pairs, rule)
    else:
        adapted, _ = adapt_policy(model, copy.deepcopy(model).eval(), tok, pairs, rule)
    assert seen, "the adapted model never ran"
    assert not any(autocast for autocast, _ in seen)
    assert not any(recompute for _, recompute in seen)
    # accelerate leaves a bf16 run's model.forward wrapped in autocast: every evaluation after
    # adaptation (accuracy, sampling) would then run in bf16 too
    seen.clear()
    if objective == "reward":
        reward_accuracy(adapted, tok, world.pairs("near", 4, seed=4))
    else:
        sample_responses(adapted, tok, [p.prompt for p in pairs[:2]], seed=0)
    assert seen
    assert not any(autocast for autocast, _ in seen)


def test_patience_stops_training_early(world, tok):
    pairs = world.pairs("near", 60, seed=3)
    rule = AdaptSettings(learning_rate=0.5, epochs=40, patience=1, seed=0)
    _, result = adapt_reward_model(reward_model(tok, seed=0), tok, pairs, rule)
    epochs_run = len(result.validation) - 1
    assert epochs_run < rule.epochs  # stopped at the first epoch without improvement
    assert result.steps < rule.steps(len(pairs))


def test_simulated_rule_keeps_the_first_best_held_out_epoch_within_its_budget():
    from meta_pref.tune import simulate_rule

    curve = [
        {"epoch": e, "step": 10 * e, "val_loss": v, "test_accuracy": a}
        for e, (v, a) in enumerate([(0.7, 0.5), (0.6, 0.55), (0.65, 0.5), (0.66, 0.5), (0.5, 0.8)])
    ]
    assert simulate_rule(curve, epochs=4, patience=None)["kept_epoch"] == 4
    assert simulate_rule(curve, epochs=3, patience=None)["test_accuracy"] == 0.55
    assert simulate_rule(curve, epochs=4, patience=2)["kept_epoch"] == 1  # stopped at epoch 3


def test_the_grid_search_extends_an_edge_and_treats_both_methods_alike():
    from meta_pref.tune import JOINT_GRID, META_GRID, search

    # same shape for both initialisations: two axes of three values each
    assert [len(v) for v in META_GRID.values()] == [len(v) for v in JOINT_GRID.values()] == [3, 3]
    calls = []

    def peak_low(point):  # best at the low edge of `lr`, inside `batch`
        calls.append(point)
        return -abs(point["lr"] - 1e-5) - abs(point["batch"] - 32) / 1000

    result = search({"lr": (1e-4, 3e-4, 1e-3), "batch": (16, 32, 64)}, peak_low, 1, lambda *_: None)
    assert result["grid"]["lr"][0] == pytest.approx(1e-4 / 3)
    assert result["grid"]["batch"] == [16, 32, 64]
    assert result["configs"] == 12 == len(calls)
    assert result["extension_rounds"] == 1
    assert result["best"]["lr"] == pytest.approx(1e-4 / 3)
    assert not result["interior"]
    inside = search(
        {"a": (1.0, 2.0, 3.0), "b": (16, 32, 64)},
        lambda p: -abs(p["a"] - 2.0) - abs(p["b"] - 32),
        1,
        lambda *_: None,
    )
    assert inside["configs"] == 9
    assert inside["interior"]
    assert inside["extension_rounds"] == 0
    wide = search(
        {"a": (1.0, 2.0, 3.0), "b": (16, 32, 64)}, lambda p: p["a"] + p["b"], 1, lambda *_: None
    )
    assert wide["grid"] == {"a": [1.0, 2.0, 3.0, 9.0], "b": [16, 32, 64, 128]}
