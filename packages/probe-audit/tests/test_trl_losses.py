"""The package's own GRPO and DPO losses against trl's trainers on the same inputs.

The demo trains GRPO and DPO through trl's trainers (:mod:`probe_audit.trl_training`);
:mod:`probe_audit.training` keeps the same losses as the fast path (no Trainer around them).
These tests pin them to trl 1.16's:
the GRPO gradient equals ``GRPOTrainer._compute_loss`` with ``loss_type="bnpo"``, ``beta=0``
(one on-policy step, so the clipped ratio is 1) and the episode's ``env_mask`` as trl's
``tool_mask``; the DPO loss equals ``DPOTrainer._compute_loss`` (sigmoid loss) with the
sampled-token mask as trl's ``completion_mask``.
"""

import copy

import datasets
import torch
import trl
from probe_audit import domains
from probe_audit.auditors import ModelAuditor, Trajectory
from probe_audit.training import AuditorTrainer, TrainConfig

from paperstack import tiny

PROMPT = [5, 9, 11, 7, 8]


def _trajectories(vocab: int, lengths, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in lengths:
        ids = torch.randint(8, vocab, (n,), generator=g).tolist()
        mask = [1] * n
        for k in range(2, n - 1, 4):  # environment tokens in the middle, as after a reply
            mask[k] = mask[k + 1] = 0
        out.append(Trajectory(list(PROMPT), ids, mask))
    return out


def _setup(objective: str):
    tok = tiny.build_tokenizer()
    model = tiny.build_model("micro", tok, 0)
    auditor = ModelAuditor(model, tok, seed=0)
    worlds = {n: domains.get(n) for n in domains.NAMES}
    targets = {n: domains.rule_target(n) for n in domains.NAMES}
    config = TrainConfig(objective=objective, dpo_beta=0.1)
    trainer = AuditorTrainer(auditor, worlds, targets, lambda *a: {"total": 0.0}, config)
    return tok, model, trainer


def _right_pad(rows, value):
    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long)


def test_grpo_gradient_equals_trl_grpo_trainer_bnpo(tmp_path):
    tok, model, trainer = _setup("grpo")
    trajs = _trajectories(len(tok), [9, 14, 6, 11])
    rewards = [1.0, 0.0, 0.5, 2.0]
    loss = trainer.loss(trajs, rewards, [[0, 1, 2, 3]])
    model.zero_grad()
    loss.backward()
    ours = [p.grad.detach().clone() for p in model.parameters()]

    r = torch.tensor(rewards)
    advantages = (r - r.mean()) / (r.std(unbiased=False) + 1e-4)  # the package's advantages
    args = trl.GRPOConfig(
        output_dir=str(tmp_path), loss_type="bnpo", beta=0.0, per_device_train_batch_size=4,
        num_generations=4, max_completion_length=16, report_to="none", use_cpu=True,
        bf16=False, save_strategy="no",
    )  # fmt: skip
    grpo = trl.GRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
        args=args,
        train_dataset=datasets.Dataset.from_dict({"prompt": ["hi"] * 4}),
        processing_class=tok,
    )
    grpo.current_gradient_accumulation_steps = 1
    lengths = [len(t.completion_ids) for t in trajs]
    width = max(lengths)
    inputs = {
        "prompt_ids": torch.tensor([t.prompt_ids for t in trajs]),
        "prompt_mask": torch.ones((4, len(PROMPT)), dtype=torch.long),
        "completion_ids": _right_pad([t.completion_ids for t in trajs], tok.pad_token_id),
        "completion_mask": torch.tensor([[1] * n + [0] * (width - n) for n in lengths]),
        "tool_mask": _right_pad([t.env_mask for t in trajs], 1),
        "advantages": advantages,
    }
    model.train()
    model.zero_grad()
    grpo._compute_loss(model, inputs).backward()
    theirs = [p.grad.detach().clone() for p in model.parameters()]
    assert any(bool(g.abs().sum() > 0) for g in ours)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_dpo_loss_equals_trl_dpo_trainer_sigmoid(tmp_path):
    tok, model, trainer = _setup("dpo")
    with torch.no_grad():  # move the policy away from the frozen reference
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    trajs = _trajectories(len(tok), [9, 14, 6, 11], seed=1)
    rewards = [1.0, 0.0, 0.5, 2.0]  # groups: (0 best, 1 worst), (3 best, 2 worst)
    ours = trainer.loss(trajs, rewards, [[0, 1], [2, 3]])

    args = trl.DPOConfig(
        output_dir=str(tmp_path), beta=0.1, loss_type="sigmoid", report_to="none",
        use_cpu=True, bf16=False, save_strategy="no",
    )  # fmt: skip
    dpo = trl.DPOTrainer(
        model=model,
        ref_model=copy.deepcopy(trainer.reference),
        args=args,
        train_dataset=datasets.Dataset.from_dict(
            {"prompt": ["hi"], "chosen": ["yes"], "rejected": ["no"]}
        ),
        processing_class=tok,
    )
    order = [0, 3, 1, 2]  # trl's batch: every chosen, then every rejected
    seqs = [trajs[i].prompt_ids + trajs[i].completion_ids for i in order]
    masks = [[0] * len(PROMPT) + trajs[i].env_mask for i in order]
    inputs = {
        "input_ids": _right_pad(seqs, tok.pad_token_id),
        "attention_mask": _right_pad([[1] * len(s) for s in seqs], 0),
        "completion_mask": _right_pad(masks, 0),
    }
    model.train()
    theirs = dpo._compute_loss(model, inputs, return_outputs=False)
    assert float(ours.detach()) > 0
    torch.testing.assert_close(ours.detach(), theirs.detach(), rtol=1e-5, atol=1e-6)
