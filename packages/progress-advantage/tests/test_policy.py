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


def _trainer(policy, ref_dir, tok, beta, tmp_path, reward, n_prompts=2, gens=4):
    trl = pytest.importorskip("trl")
    task = tasks.get("arithmetic")
    policy.config._name_or_path = str(ref_dir)
    config = trl.RLOOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=n_prompts * gens,
        num_generations=gens,
        max_completion_length=16,
        max_steps=1,
        beta=beta,
        normalize_advantages=False,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
    )
    dataset = task.to_dataset(task.generate(8, seed=0, split="train"), conversational=True)
    return trl.RLOOTrainer(
        model=policy, reward_funcs=reward, args=config, train_dataset=dataset, processing_class=tok
    )


def _seq_logp(model, prompt, completion):
    x = torch.cat([prompt, completion])[None]
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=x).logits[0, :-1].double(), -1)
    return float(logp[len(prompt) - 1 :].gather(-1, completion[:, None]).sum())


def test_rloo_charges_the_kl_in_the_reward_with_no_std_scaling(micro, tmp_path):
    """The theorem's objective r - beta*KL: trl's RLOO advantage of each completion equals
    r - beta * sum_t log(pi/pi_ref) minus the leave-one-out mean of its group's, unscaled."""
    policy, reference, tok = micro
    ref_dir = tmp_path / "reference"
    reference.save_pretrained(ref_dir)
    tok.save_pretrained(ref_dir)
    seen = []
    base = tasks.get("arithmetic").reward_function()

    def arithmetic_reward(prompts, completions, answer, meta, **kw):
        out = base(prompts, completions, answer, meta, **kw)
        seen.extend(out)
        return out

    beta = 0.5
    trainer = _trainer(copy.deepcopy(policy), ref_dir, tok, beta, tmp_path, arithmetic_reward)
    if not hasattr(trainer, "_generate_and_score_completions"):
        pytest.skip("this trl version has no _generate_and_score_completions")
    trainer.model.eval()
    batch = trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    ids, mask = batch["completion_ids"], batch["completion_mask"]
    shaped = []
    for i in range(ids.size(0)):
        p = batch["prompt_ids"][i][batch["prompt_mask"][i].bool()]
        c = ids[i][mask[i].bool()]
        kl = _seq_logp(policy, p, c) - _seq_logp(reference, p, c)
        shaped.append(seen[i] - beta * kl)
    shaped = torch.tensor(shaped, dtype=torch.float64).view(-1, 4)
    loo = (shaped.sum(1, keepdim=True) - shaped) / 3
    want = (shaped - loo).view(-1).double()
    assert want.abs().max() > 1e-3  # policy != reference: the KL term is really there
    torch.testing.assert_close(batch["advantages"].double(), want, atol=2e-4, rtol=0)


def test_plateau_rule_stops_on_a_flat_window_and_at_the_cap():
    from progress_advantage.policy import PlateauStop, RLSettings

    def run(values, **kw):
        rule = PlateauStop(
            RLSettings(beta=0.5, window=2, min_steps=4, max_steps=8, plateau_tol=0.01, **kw)
        )
        for k, j in enumerate(values, 1):
            # reward j, per-token kl 0.1 over 2 tokens: J = j - 0.5 * 0.2
            if rule.record({"reward": j, "kl": 0.1, "completions/mean_length": 2.0}):
                return k, rule.result
        return None, rule.result

    # windows: (0.1, 0.2) -> 0.15, (0.4, 0.5) -> 0.45, (0.5, 0.5) -> 0.5 (gain 0.05), flat after
    stop, result = run([0.1, 0.2, 0.4, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    assert stop == 8
    assert result.plateaued
    assert result.objective[0] == pytest.approx(0.0)
    stop, result = run([0.1 * k for k in range(1, 12)])  # keeps rising: the cap stops it
    assert stop == 8
    assert not result.plateaued
    stop, result = run([0.5] * 12)  # flat from the start, but not before min_steps
    assert stop == 4


def test_train_rl_policy_runs_trl_and_moves_the_policy(micro, tmp_path):
    pytest.importorskip("trl")
    from progress_advantage.policy import RLSettings, train_rl_policy

    _, reference, tok = micro
    settings = RLSettings(
        beta=0.1,
        learning_rate=1e-2,
        prompts_per_step=2,
        num_generations=4,
        max_completion_length=12,
        train_prompts=8,
        min_steps=2,
        max_steps=2,
        window=1,
    )
    from digit_task import DigitRewardArithmetic
    from transformers import TrainerCallback

    class Steps(TrainerCallback):  # an extra callback sees the model being trained
        def __init__(self):
            self.models = []

        def on_step_end(self, args, state, control, model=None, **kw):
            self.models.append((state.global_step, model))

    seen = []
    extra = Steps()
    policy, result = train_rl_policy(
        reference,
        tok,
        DigitRewardArithmetic(),
        settings,
        seed=0,
        on_step=lambda k, j: seen.append((k, j)),
        save_to=tmp_path / "policy",
        callbacks=[extra],
    )
    assert result.steps == 2
    assert [k for k, _ in seen] == [1, 2]
    assert [k for k, _ in extra.models] == [1, 2]
    assert all(m is policy for _, m in extra.models)
    moved = sum(
        float((p - q).abs().sum())
        for p, q in zip(policy.parameters(), reference.parameters(), strict=True)
    )
    assert moved > 0
    assert (tmp_path / "policy" / "model.safetensors").is_file()
