"""Each objective trains a few steps on audit episodes: GRPO through trl's GRPOTrainer with a
multi-turn ``rollout_func``, DPO through trl's DPOTrainer on episode pairs, trajectory balance
with the package's own loss; only the auditor's own tokens carry gradient."""

import copy

import pytest
import torch
import trl
from probe_audit import domains
from probe_audit.auditors import ModelAuditor
from probe_audit.errors import ProbeError
from probe_audit.reward import ViolationArchive
from probe_audit.training import AuditorTrainer, TrainConfig
from probe_audit.trl_training import (
    EpisodePairCollator,
    EpisodeRollout,
    scenario_keys,
    train_with_trl,
)

from paperstack import tiny


def _world():
    worlds = {n: domains.get(n) for n in domains.NAMES}
    targets = {n: domains.rule_target(n) for n in domains.NAMES}
    return worlds, targets


def _auditor(seed=0):
    tok = tiny.build_tokenizer()
    model = tiny.build_model("micro", tok, 0)
    return ModelAuditor(model, tok, seed=seed, max_turn_tokens=6)


def _config(objective):
    return TrainConfig(objective=objective, steps=2, scenarios_per_step=1, group_size=2,
                       max_turns=2, seed=0)  # fmt: skip


def _reward(episode, domain, target):
    # a reward that differs between episodes: their length in auditor characters, so no ties
    from probe_audit.policy import check_episode

    episode.violations = check_episode(episode, domain)
    return {"total": float(sum(len(e.text) for e in episode.events if e.kind == "user"))}


def _weights(model):
    return [p.detach().clone() for p in model.parameters()]


def _moved(before, model):
    return any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_scenario_keys_cover_every_step_and_domain():
    worlds, _ = _world()
    keys = scenario_keys(worlds, _config("grpo"))
    assert len(keys) == 2 * len(worlds)
    assert len(set(keys)) == len(keys)


def test_rollout_returns_masked_trajectories_in_key_order():
    worlds, targets = _world()
    auditor = _auditor()
    archive = ViolationArchive()
    rollout = EpisodeRollout(auditor, worlds, targets, _reward, 2, archive)
    keys = scenario_keys(worlds, _config("grpo"))
    trajs, rewards = rollout([keys[0], keys[0], keys[1]], "t")
    assert len(trajs) == len(rewards) == 3
    for t in trajs:
        assert len(t.env_mask) == len(t.completion_ids)
        assert 1 in t.env_mask
        assert 0 in t.env_mask
    with pytest.raises(ProbeError, match="not a scenario key"):
        rollout(["{}"], "t")


def test_grpo_trains_through_trl_with_the_env_mask_as_tool_mask(monkeypatch):
    seen = []
    original = trl.GRPOTrainer._compute_loss

    def spy(self, model, inputs):
        seen.append((inputs["tool_mask"].clone(), inputs["completion_mask"].clone()))
        return original(self, model, inputs)

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", spy)
    worlds, targets = _world()
    auditor = _auditor()
    before = _weights(auditor.model)
    result = train_with_trl(auditor, worlds, targets, _reward, _config("grpo"))
    assert isinstance(result["trainer"], trl.GRPOTrainer)
    assert result["trainer"].state.global_step == 2
    assert len(seen) == 2
    for tool_mask, completion_mask in seen:
        inside = tool_mask[completion_mask.bool()]
        assert bool((inside == 0).any())
        assert bool((inside == 1).any())
    assert _moved(before, auditor.model)


def test_dpo_trains_through_trl_on_episode_pairs():
    worlds, targets = _world()
    auditor = _auditor()
    before = _weights(auditor.model)
    result = train_with_trl(auditor, worlds, targets, _reward, _config("dpo"))
    trainer = result["trainer"]
    assert isinstance(trainer, trl.DPOTrainer)
    assert trainer.state.global_step == 2
    assert sum(trainer.pairs_per_step) >= 1
    losses = [h["loss"] for h in result["history"] if "loss" in h]
    assert len(losses) == 2
    assert _moved(before, auditor.model)


def test_episode_pair_collator_scores_only_the_auditors_tokens():
    collate = EpisodePairCollator(pad_token_id=0)
    batch = collate([{
        "prompt_ids": [5, 6], "chosen_ids": [7, 8, 9], "chosen_mask": [1, 0, 1],
        "rejected_ids": [7], "rejected_mask": [1],
    }])  # fmt: skip
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]]
    assert batch["completion_mask"].tolist() == [[0, 0, 1, 0, 1], [0, 0, 1, 0, 0]]


def test_gflownet_trains_with_the_package_loss_on_the_same_model():
    worlds, targets = _world()
    auditor = _auditor()
    before = _weights(auditor.model)
    trainer = AuditorTrainer(auditor, worlds, targets, _reward, _config("gflownet"))
    history = trainer.train()
    assert len(history) == 2
    assert all(h["loss"] == h["loss"] for h in history)  # not NaN: every step updated
    assert _moved(before, auditor.model)


def test_a_tied_dpo_batch_gives_no_gradient():
    worlds, targets = _world()
    auditor = _auditor()
    model = auditor.model
    result = train_with_trl(
        ModelAuditor(copy.deepcopy(model), auditor.tokenizer, seed=0, max_turn_tokens=6),
        worlds, targets, lambda ep, d, t: {"total": 0.0}, _config("dpo"),
    )  # fmt: skip
    assert result["trainer"].pairs_per_step == [0, 0]
    assert all(h.get("grad_norm", 0.0) == pytest.approx(0.0, abs=1e-6)
               for h in result["history"] if "loss" in h)  # fmt: skip


def test_gflownet_has_no_trl_trainer():
    worlds, targets = _world()
    with pytest.raises(ProbeError, match="no trl trainer"):
        train_with_trl(_auditor(), worlds, targets, _reward, _config("gflownet"))
