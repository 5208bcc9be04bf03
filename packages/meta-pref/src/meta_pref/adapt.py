"""Adaptation from an initialisation with trl's trainers, and the two evaluations.

- :func:`adapt_reward_model`: trl's ``RewardTrainer`` (Bradley-Terry) on the target's pairs.
- :func:`adapt_policy`: trl's ``DPOTrainer`` (sigmoid DPO, β) on the target's pairs with the
  reference policy π_ref as ``ref_model``.
- :func:`reward_accuracy`: the share of held-out pairs a reward model orders right.
- :func:`win_rate`: the policy's sampled responses against the reference's, judged by a
  reward function (the world's true reward r* in the toy; a reward model on user data).
- :func:`lora_only`: the LoRA-only option (peft extra): a LoRA adapter over the frozen body
  (and the reward head trainable), so meta-learning and adaptation touch only those.

Every system (meta-initialised, joint-initialised, target-only) adapts with the same
:class:`AdaptSettings`, so the comparison isolates the initialisation.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from meta_pref.data import PreferencePair, check_pairs
from meta_pref.errors import MetaPrefError
from meta_pref.models import collate_rewards, encode_rewards
from meta_pref.world import SEP

__all__ = [
    "AdaptSettings",
    "adapt_policy",
    "adapt_reward_model",
    "lora_only",
    "reward_accuracy",
    "win_rate",
]


@dataclass(frozen=True)
class AdaptSettings:
    """trl settings of target adaptation. Steps grow with the data: ``epochs`` passes over the
    pairs, at least ``min_steps`` and at most ``max_steps`` optimizer steps."""

    learning_rate: float = 1e-3
    batch_size: int = 16
    epochs: int = 4
    min_steps: int = 20
    max_steps: int = 80
    beta: float = 0.1
    seed: int = 0

    def steps(self, n_pairs: int) -> int:
        wanted = self.epochs * math.ceil(n_pairs / self.batch_size)
        return max(self.min_steps, min(self.max_steps, wanted))


def _common_args(settings: AdaptSettings, n_pairs: int, out: str) -> dict[str, Any]:
    return {
        "output_dir": out,
        "max_steps": settings.steps(n_pairs),
        "per_device_train_batch_size": min(settings.batch_size, n_pairs),
        "learning_rate": settings.learning_rate,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "logging_steps": 10_000,
        "save_strategy": "no",
        "report_to": [],
        "seed": settings.seed,
        "data_seed": settings.seed,
        "use_cpu": True,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
    }


def _dataset(rows: list[dict[str, Any]]) -> Any:
    from datasets import Dataset

    return Dataset.from_list(rows)


def _quiet(trainer: Any) -> None:
    """No per-run metrics dict on stdout (the demo runs dozens of short trainings)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def _losses(trainer: Any) -> list[float]:
    return [float(e["train_loss"]) for e in trainer.state.log_history if "train_loss" in e]


def _need_pairs(pairs: Sequence[PreferencePair], what: str) -> list[PreferencePair]:
    pairs = check_pairs(pairs, what)
    if not pairs:
        raise MetaPrefError(f"{what}: the target language has no pairs to adapt on")
    return pairs


def adapt_reward_model(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    pairs: Sequence[PreferencePair],
    settings: AdaptSettings = AdaptSettings(),
) -> tuple[PreTrainedModel, list[float]]:
    """Fine-tune a reward model on ``pairs`` with trl's ``RewardTrainer``; returns the model
    and trl's logged training loss."""
    from trl import RewardConfig, RewardTrainer

    pairs = _need_pairs(pairs, "reward adaptation pairs")
    return _train(RewardTrainer, RewardConfig, model, {}, encode_rewards(tok, pairs), tok,
                  settings)  # fmt: skip


def _train(
    trainer_cls: Any,
    config_cls: Any,
    model: PreTrainedModel,
    extra: dict[str, Any],
    rows: list[dict[str, Any]],
    tok: PreTrainedTokenizerBase,
    settings: AdaptSettings,
) -> tuple[PreTrainedModel, list[float]]:
    """One trl training run in a throw-away output folder; ``extra`` holds the config fields
    and trainer arguments one trainer has and the other does not."""
    config_extra = {k: v for k, v in extra.items() if k != "ref_model"}
    trainer_extra = {k: v for k, v in extra.items() if k == "ref_model"}
    with tempfile.TemporaryDirectory(prefix="meta-pref-") as out:
        args = config_cls(**_common_args(settings, len(rows), out), max_length=None,
                          **config_extra)  # fmt: skip
        trainer = trainer_cls(model=model, args=args, train_dataset=_dataset(rows),
                              processing_class=tok, **trainer_extra)  # fmt: skip
        _quiet(trainer)
        trainer.train()
    model.eval()
    return model, _losses(trainer)


def dpo_texts(
    tok: PreTrainedTokenizerBase, pairs: Sequence[PreferencePair]
) -> list[dict[str, str]]:
    """trl 1.16's ``DPOTrainer`` tokenizes text itself (it has no pre-tokenized path): the
    prompt carries the BOS token and the separator, trl appends EOS to each response, so its
    token ids equal :func:`meta_pref.models.encode_policy`'s (tested)."""
    return [
        {"prompt": tok.bos_token + p.prompt + SEP, "chosen": p.chosen, "rejected": p.rejected}
        for p in pairs
    ]


def adapt_policy(
    model: PreTrainedModel,
    ref: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    pairs: Sequence[PreferencePair],
    settings: AdaptSettings = AdaptSettings(),
) -> tuple[PreTrainedModel, list[float]]:
    """DPO on ``pairs`` with trl's ``DPOTrainer`` from ``model`` against ``ref`` (π_ref)."""
    from trl import DPOConfig, DPOTrainer

    pairs = _need_pairs(pairs, "DPO adaptation pairs")
    extra = {"beta": settings.beta, "ref_model": ref}
    return _train(DPOTrainer, DPOConfig, model, extra, dpo_texts(tok, pairs), tok, settings)


@torch.no_grad()
def reward_accuracy(
    model: PreTrainedModel, tok: PreTrainedTokenizerBase, pairs: Sequence[PreferencePair]
) -> float:
    """The share of ``pairs`` with r(chosen) > r(rejected) (a tie counts half)."""
    pairs = _need_pairs(pairs, "evaluation pairs")
    model.eval()
    rows = encode_rewards(tok, pairs)
    right = 0.0
    for start in range(0, len(rows), 512):
        batch = collate_rewards(rows[start : start + 512], tok.pad_token_id)
        rewards = model(**batch).logits.squeeze(-1)
        chosen, rejected = rewards.chunk(2)
        right += float((chosen > rejected).sum()) + 0.5 * float((chosen == rejected).sum())
    return right / len(rows)


@torch.no_grad()
def sample_responses(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    seed: int,
    max_new_tokens: int = 6,
) -> list[str]:
    """One sampled response per prompt (temperature 1, through ``generate``)."""
    model.eval()
    bos = tok.bos_token_id
    ids = [[bos, *tok(p + SEP, add_special_tokens=False)["input_ids"]] for p in prompts]
    if len({len(i) for i in ids}) != 1:
        raise MetaPrefError("win_rate: prompts must have one length in tokens (the toy's do)")
    inputs = torch.tensor(ids)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = model.generate(  # type: ignore[operator]
            input_ids=inputs,
            attention_mask=torch.ones_like(inputs),
            do_sample=True,
            top_k=0,
            temperature=1.0,
            max_new_tokens=max_new_tokens,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
    texts = []
    for row in out[:, inputs.size(1) :].tolist():
        if tok.eos_token_id in row:
            row = row[: row.index(tok.eos_token_id)]
        texts.append(str(tok.decode(row, skip_special_tokens=True)))
    return texts


def win_rate(
    policy: PreTrainedModel,
    ref: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    judge: Callable[[str, str], float],
    seed: int,
) -> dict[str, float]:
    """Per prompt: 1 if the policy's sampled response beats the reference's under ``judge``
    (``judge(prompt, response) -> reward``), 0.5 on a tie, else 0. Keys are prompt indices."""
    ours = sample_responses(policy, tok, prompts, seed)
    theirs = sample_responses(ref, tok, prompts, seed + 7919)
    scores = {}
    for i, (p, a, b) in enumerate(zip(prompts, ours, theirs, strict=True)):
        ra, rb = judge(p, a), judge(p, b)
        scores[str(i)] = 1.0 if ra > rb else 0.5 if ra == rb else 0.0
    return scores


def lora_only(model: PreTrainedModel, rank: int = 8, reward_head: bool = True) -> Any:
    """Wrap ``model`` in a peft LoRA adapter on the attention projections; only the adapter
    (and, for a reward model, its ``score`` head) stays trainable. Needs the ``peft`` extra."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise MetaPrefError(
            "LoRA-only meta-learning needs peft: pip install 'meta-pref[peft]'"
        ) from None
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        lora_dropout=0.0,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        modules_to_save=["score"] if reward_head else None,
        task_type="SEQ_CLS" if reward_head else "CAUSAL_LM",
    )
    return get_peft_model(model, config)


def rng_subset(pairs: Sequence[PreferencePair], n: int, seed: int) -> list[PreferencePair]:
    """``n`` of ``pairs`` drawn without replacement (the first ``n`` of one shuffle, so a
    smaller budget's pairs are a prefix of a larger one's)."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    return [pairs[i] for i in order[:n]]
