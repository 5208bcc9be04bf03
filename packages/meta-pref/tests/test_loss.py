"""Our Bradley-Terry and DPO losses equal trl 1.16's RewardTrainer / DPOTrainer losses on the
same inputs (the trainers' own compute_loss on a batch from their own collators)."""

import pytest
import torch
from datasets import Dataset
from meta_pref import bradley_terry_loss, dpo_loss, sequence_logps
from meta_pref.adapt import dpo_texts
from meta_pref.models import (
    collate_policy,
    encode_policy,
    encode_rewards,
    policy_model,
    reward_model,
)
from trl import DPOConfig, DPOTrainer, RewardConfig, RewardTrainer


def _args(tmp_path):
    return {"output_dir": str(tmp_path), "report_to": [], "use_cpu": True,
            "per_device_train_batch_size": 8, "max_length": None}  # fmt: skip


def test_bradley_terry_loss_equals_trl_reward_trainer(tmp_path, world, tok):
    model = reward_model(tok, seed=3)
    pairs = world.pairs("s2", 8, seed=1)
    trainer = RewardTrainer(
        model=model, args=RewardConfig(**_args(tmp_path)),
        train_dataset=Dataset.from_list(encode_rewards(tok, pairs)), processing_class=tok,
    )  # fmt: skip
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
    theirs = trainer.compute_loss(trainer.model, dict(batch))
    with torch.no_grad():
        rewards = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    chosen, rejected = rewards.logits.squeeze(-1).chunk(2)
    ours = bradley_terry_loss(chosen, rejected)
    assert torch.allclose(ours, theirs.detach(), atol=1e-6, rtol=1e-6)
    margin = torch.linspace(0.0, 1.0, 8)
    with_margin = trainer.compute_loss(trainer.model, dict(batch, margin=margin))
    assert torch.allclose(bradley_terry_loss(chosen, rejected, margin), with_margin.detach(),
                          atol=1e-6)  # fmt: skip


@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_dpo_loss_equals_trl_dpo_trainer(tmp_path, world, tok, beta):
    policy = policy_model(tok, seed=1)
    ref = policy_model(tok, seed=2)  # a different reference, so the log-ratios are not zero
    pairs = world.pairs("far", 8, seed=4)
    trainer = DPOTrainer(
        model=policy, ref_model=ref, args=DPOConfig(**_args(tmp_path), beta=beta),
        train_dataset=Dataset.from_list(dpo_texts(tok, pairs)), processing_class=tok,
    )  # fmt: skip
    rows = [trainer.train_dataset[i] for i in range(8)]
    # trl tokenizes the text itself: its ids are exactly our encoding of the pairs.
    ours_rows = encode_policy(tok, pairs)
    for theirs_row, our_row in zip(rows, ours_rows, strict=True):
        for key in ("prompt_ids", "chosen_ids", "rejected_ids"):
            assert list(theirs_row[key]) == our_row[key]
    batch = trainer.data_collator(rows)
    theirs = trainer.compute_loss(trainer.model, dict(batch))
    ours_batch = collate_policy(ours_rows, tok.pad_token_id)
    assert torch.equal(ours_batch["input_ids"], batch["input_ids"])
    with torch.no_grad():
        ids, mask, comp = ours_batch["input_ids"], ours_batch["attention_mask"], ours_batch[
            "completion_mask"]  # fmt: skip
        logps = sequence_logps(policy(input_ids=ids, attention_mask=mask).logits, ids, comp)
        ref_logps = sequence_logps(ref(input_ids=ids, attention_mask=mask).logits, ids, comp)
    ours = dpo_loss(*logps.chunk(2), *ref_logps.chunk(2), beta=beta)
    assert torch.allclose(ours, theirs.detach(), atol=1e-5, rtol=1e-5)
    assert abs(float(ours) - 0.6931) > 1e-4  # not the trivial log 2 of identical models


def test_losses_prefer_the_chosen_response():
    up, down = torch.tensor([2.0, 1.0]), torch.tensor([0.0, 0.0])
    assert bradley_terry_loss(up, down) < bradley_terry_loss(down, up)
    zero = torch.zeros(2)
    assert dpo_loss(up, down, zero, zero, beta=0.5) < dpo_loss(down, up, zero, zero, beta=0.5)
    assert torch.isclose(dpo_loss(zero, zero, zero, zero), torch.log(torch.tensor(2.0)))
