"""The GRPO policy's training signal: trl rewards what the verifier checks, on that text."""

import copy
import json

import pytest
import torch

from paperstack import tasks


def test_reward_function_takes_trl_conversational_completions():
    task = tasks.get("arithmetic")
    ex = task.generate(3, seed=0, split="train")
    reward = task.reward_function()
    gold = [[{"role": "assistant", "content": e.answer}] for e in ex]
    wrong = [
        [{"role": "assistant", "content": e.answer.replace("Answer: ", "Answer: 1")}] for e in ex
    ]
    prompts = [e.messages(with_answer=False) for e in ex]
    metas = [json.dumps(dict(e.meta)) for e in ex]
    answers = [e.answer for e in ex]
    assert reward(prompts, gold, answers, metas) == [1.0] * 3
    assert reward(prompts, wrong, answers, metas) == [0.0] * 3


def test_grpo_batch_rewards_the_decoded_text_and_scores_like_an_unpadded_pass(micro, tmp_path):
    """One GRPO generation batch: each reward is the verifier's verdict on exactly the text the
    completion ids decode to (what the demo's evaluation sees), and trl's reference
    log-probabilities of left-padded prompts equal an unpadded forward pass."""
    trl = pytest.importorskip("trl")
    _, reference, tok = micro
    task = tasks.get("arithmetic")
    ref_dir = tmp_path / "reference"
    reference.save_pretrained(ref_dir)
    tok.save_pretrained(ref_dir)
    policy = copy.deepcopy(reference)
    policy.config._name_or_path = str(ref_dir)
    seen = []
    base = task.reward_function()

    def arithmetic_reward(prompts, completions, answer, meta, **kw):
        out = base(prompts, completions, answer, meta, **kw)
        seen.extend(zip(completions, meta, out, strict=True))
        return out

    config = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=16,
        max_steps=1,
        beta=0.05,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
    )
    dataset = task.to_dataset(task.generate(8, seed=0, split="train"), conversational=True)
    trainer = trl.GRPOTrainer(
        model=policy,
        reward_funcs=arithmetic_reward,
        args=config,
        train_dataset=dataset,
        processing_class=tok,
    )
    if not hasattr(trainer, "_generate_and_score_completions"):
        pytest.skip("this trl version has no _generate_and_score_completions")
    trainer.model.train()
    batch = trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    prompt_ids, prompt_mask = batch["prompt_ids"], batch["prompt_mask"]
    ids, mask = batch["completion_ids"], batch["completion_mask"]
    assert (prompt_mask == 0).any(), "the batch should need left padding"
    assert len(seen) == ids.size(0)
    for (completion, meta, reward), row, row_mask in zip(seen, ids, mask, strict=True):
        text = tok.decode(row[row_mask.bool()], skip_special_tokens=True)
        assert completion == [{"role": "assistant", "content": text}]
        example = tasks.Example("arithmetic", "", "", json.loads(meta))
        assert reward == float(task.verify(example, text))
    for i in range(ids.size(0)):
        p = prompt_ids[i][prompt_mask[i].bool()]
        c = ids[i][mask[i].bool()]
        x = torch.cat([p, c])[None]
        with torch.no_grad():
            logp = torch.log_softmax(reference(input_ids=x).logits[0, :-1].double(), -1)
        direct = logp[len(p) - 1 :].gather(-1, c[:, None])[:, 0]
        trl_logp = batch["ref_per_token_logps"][i][mask[i].bool()].double()
        torch.testing.assert_close(trl_logp, direct, atol=1e-4, rtol=0)
