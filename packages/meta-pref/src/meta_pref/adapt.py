"""Adaptation from an initialisation with trl's trainers, and the two evaluations.

- :func:`adapt_reward_model`: trl's ``RewardTrainer`` (Bradley-Terry) on the target's pairs.
- Both share the budget rule of :class:`AdaptSettings`: epochs over the target's pairs (so
  steps grow with the data) with early stopping on a held-out validation split of them.
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
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback

from meta_pref.data import PreferencePair, check_pairs
from meta_pref.errors import MetaPrefError
from meta_pref.loss import bradley_terry_loss, dpo_loss, sequence_logps
from meta_pref.models import (
    add_reference_logps,
    collate_policy,
    collate_rewards,
    encode_policy,
    encode_rewards,
    is_toy,
    max_length,
    prompt_ids,
    prompt_text,
)
from paperstack.contract import trl_precision_args

__all__ = [
    "AdaptResult",
    "AdaptSettings",
    "adapt_policy",
    "adapt_reward_model",
    "head_to_head",
    "lora_only",
    "reward_accuracy",
    "win_rate",
]


@dataclass(frozen=True)
class AdaptSettings:
    """trl settings of target adaptation and the budget rule every system shares.

    The budget rule (fixed on the validation seed before the reported run, the same for meta,
    joint and target-only): a ``val_fraction`` of the target's n pairs (at least one) is held
    out as a validation split; trl trains on the rest for ``epochs`` passes, so the number of
    steps grows with the data (``epochs * ceil(n_train / batch_size)``, at most ``max_steps``
    when set, for smoke runs); the held-out loss is measured before training and after every
    epoch, the best state is kept (retrospective early stopping), and with ``patience`` set,
    training also stops once that many epochs in a row did not improve it. So more target
    data can always be used, and an initialisation that adaptation would only spoil is kept
    as it was. The demo's values (batch 32, lr 2e-3, 20 epochs, no patience) were chosen on
    validation seeds from target-only learning curves alone (``meta-pref headroom``; 24 epochs
    until 2026-12-06, when adaptation still ran under trl's bf16 autocast).
    """

    learning_rate: float = 2e-3
    batch_size: int = 32
    epochs: int = 20
    val_fraction: float = 0.2
    patience: int | None = None
    max_steps: int | None = None
    beta: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.val_fraction < 1.0:
            raise MetaPrefError(f"val_fraction={self.val_fraction}: must be in [0, 1)")
        for name in ("batch_size", "epochs", "patience"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise MetaPrefError(f"{name}={value}: must be >= 1")

    def split(self, pairs: Sequence[PreferencePair]) -> tuple[list, list]:
        """(train, validation): the last ``val_fraction`` of ``pairs`` (at least one pair when
        the fraction is not 0 and two or more pairs are given) is the validation split."""
        pairs = list(pairs)
        held = 0 if self.val_fraction == 0 or len(pairs) < 2 else max(
            1, round(self.val_fraction * len(pairs)))  # fmt: skip
        return pairs[: len(pairs) - held], pairs[len(pairs) - held :]

    def steps(self, n_pairs: int) -> int:
        """The most optimizer steps on ``n_pairs`` target pairs (before the validation split
        is taken off)."""
        n_train = len(self.split([None] * n_pairs)[0])  # type: ignore[list-item]
        wanted = self.epochs * math.ceil(n_train / self.batch_size)
        return wanted if self.max_steps is None else min(self.max_steps, wanted)


class _BestOnValidation(TrainerCallback):
    """Early stopping inside trl's loop: score the model on the validation split before
    training and after each epoch, keep the best state, stop after ``patience`` epochs
    without improvement; :meth:`restore` loads the best state back at the end."""

    def __init__(
        self, model: torch.nn.Module, score: Callable[[], float], patience: int | None
    ) -> None:
        self.model, self.score, self.patience = model, score, patience
        self.best = math.inf
        self.best_state: dict[str, torch.Tensor] | None = None
        self.best_step = 0
        self.bad = 0
        self.history: list[tuple[int, float]] = []

    def _check(self, step: int) -> bool:
        if self.history and self.history[-1][0] == step:
            return False
        was_training = self.model.training
        value = self.score()
        self.model.train(was_training)
        self.history.append((step, value))
        if value < self.best - 1e-6:
            self.best, self.best_step, self.bad = value, step, 0
            self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            return False
        self.bad += 1
        return self.patience is not None and self.bad >= self.patience

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._check(0)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._check(state.global_step):
            control.should_training_stop = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._check(state.global_step)

    def restore(self) -> None:
        if self.best_state is not None:
            self.model.load_state_dict(self.best_state)


@dataclass
class AdaptResult:
    """What one adaptation run did: trl's logged training loss, the validation loss after
    each epoch ``(step, loss)``, the step whose state was kept and the steps trained."""

    losses: list[float]
    validation: list[tuple[int, float]]
    best_step: int
    steps: int


def _common_args(settings: AdaptSettings, n_train: int, out: str) -> dict[str, Any]:
    """The TrainingArguments both trl trainers get. trl 1.16's configs default to ``bf16=True``
    and activation checkpointing, even with ``use_cpu``: every adaptation then ran under bf16
    autocast on a CPU without bf16 kernels and recomputed its forward in the backward (a
    cProfile of two SmolLM2 adaptation steps: 133 s, 113 s of it backward), and accelerate left
    the adapted model's forward in autocast for the evaluations after it. Adaptation is fp32
    without recompute (:func:`paperstack.contract.trl_precision_args`), as the meta-learner's
    own passes are."""
    return trl_precision_args() | {
        "output_dir": out,
        "num_train_epochs": settings.epochs,
        "max_steps": -1 if settings.max_steps is None else settings.max_steps,
        "per_device_train_batch_size": min(settings.batch_size, n_train),
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


@torch.no_grad()
def reward_validation_loss(
    model: PreTrainedModel, tok: PreTrainedTokenizerBase, pairs: Sequence[PreferencePair]
) -> float:
    """The Bradley-Terry loss of ``model`` on ``pairs`` (the early-stopping score)."""
    model.eval()
    batch = collate_rewards(encode_rewards(tok, pairs), tok.pad_token_id)
    chosen, rejected = model(**batch).logits.squeeze(-1).chunk(2)
    return float(bradley_terry_loss(chosen, rejected))


def adapt_reward_model(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    pairs: Sequence[PreferencePair],
    settings: AdaptSettings = AdaptSettings(),
) -> tuple[PreTrainedModel, AdaptResult]:
    """Fine-tune a reward model on ``pairs`` with trl's ``RewardTrainer`` under the budget
    rule of :class:`AdaptSettings` (early stopping on the Bradley-Terry loss of the held-out
    split); returns the model (its best state) and what the run did."""
    from trl import RewardConfig, RewardTrainer

    pairs = _need_pairs(pairs, "reward adaptation pairs")
    train, val = settings.split(pairs)
    score = (lambda: reward_validation_loss(model, tok, val)) if val else None
    return _train(RewardTrainer, RewardConfig, model, {}, encode_rewards(tok, train), tok,
                  settings, score)  # fmt: skip


def _train(
    trainer_cls: Any,
    config_cls: Any,
    model: PreTrainedModel,
    extra: dict[str, Any],
    rows: list[dict[str, Any]],
    tok: PreTrainedTokenizerBase,
    settings: AdaptSettings,
    score: Callable[[], float] | None,
) -> tuple[PreTrainedModel, AdaptResult]:
    """One trl training run in a throw-away output folder; ``extra`` holds the config fields
    and trainer arguments one trainer has and the other does not; ``score`` (lower is better)
    drives early stopping when given."""
    config_extra = {k: v for k, v in extra.items() if k != "ref_model"}
    # The rows are truncated to the model's context already (dpo_texts, encode_rewards); the
    # DPO limit is a safety net for a re-tokenization that comes out a token longer.
    limit = max_length(tok)
    config_extra["max_length"] = limit + 1 if "beta" in extra and limit is not None else None
    trainer_extra = {k: v for k, v in extra.items() if k == "ref_model"}
    with tempfile.TemporaryDirectory(prefix="meta-pref-") as out:
        args = config_cls(**_common_args(settings, len(rows), out), **config_extra)
        trainer = trainer_cls(model=model, args=args, train_dataset=_dataset(rows),
                              processing_class=tok, **trainer_extra)  # fmt: skip
        _quiet(trainer)
        best = None if score is None else _BestOnValidation(model, score, settings.patience)
        if best is not None:
            trainer.add_callback(best)
        trainer.train()
    steps = int(trainer.state.global_step)
    if best is not None:
        best.restore()
    model.eval()
    return model, AdaptResult(
        losses=_losses(trainer),
        validation=[] if best is None else best.history,
        best_step=steps if best is None else best.best_step,
        steps=steps,
    )


def dpo_texts(
    tok: PreTrainedTokenizerBase, pairs: Sequence[PreferencePair]
) -> list[dict[str, str]]:
    """trl 1.16's ``DPOTrainer`` tokenizes text itself (it has no pre-tokenized path): the
    prompt is :func:`meta_pref.models.prompt_text` (the toy's BOS and separator, or a model's
    chat template with the generation prompt), trl appends EOS to each response, so its token
    ids equal :func:`meta_pref.models.encode_policy`'s (tested)."""
    if max_length(tok) is None:
        return [
            {"prompt": prompt_text(tok, p.prompt), "chosen": p.chosen, "rejected": p.rejected}
            for p in pairs
        ]
    # A model's context: the pair as encode_policy truncates it, decoded back to text (special
    # tokens kept), so trl's own tokenization sees what every other path sees.
    out = []
    for p, row in zip(pairs, encode_policy(tok, pairs), strict=True):
        texts = {"prompt": prompt_text(tok, p.prompt), "chosen": p.chosen,
                 "rejected": p.rejected}  # fmt: skip
        if len(row["prompt_ids"]) < len(prompt_ids(tok, p.prompt)):
            texts["prompt"] = str(tok.decode(row["prompt_ids"]))
        for key in ("chosen", "rejected"):
            ids = row[f"{key}_ids"]
            if ids[-1:] != [tok.eos_token_id]:  # cut: the response's start, trl adds EOS
                texts[key] = str(tok.decode(ids))
        out.append(texts)
    return out


def dpo_validation_score(
    model: PreTrainedModel,
    ref: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    pairs: Sequence[PreferencePair],
    beta: float,
) -> Callable[[], float]:
    """The DPO loss (β) of ``model`` against ``ref`` on ``pairs``, as a function of the model's
    current state (π_ref's log-probabilities are computed once)."""
    rows = add_reference_logps(ref, encode_policy(tok, pairs), tok.pad_token_id)
    batch = collate_policy(rows, tok.pad_token_id)

    @torch.no_grad()
    def score() -> float:
        model.eval()
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        chosen, rejected = sequence_logps(logits, batch["input_ids"],
                                          batch["completion_mask"]).chunk(2)  # fmt: skip
        return float(dpo_loss(chosen, rejected, batch["ref_chosen_logps"],
                              batch["ref_rejected_logps"], beta))  # fmt: skip

    return score


def adapt_policy(
    model: PreTrainedModel,
    ref: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    pairs: Sequence[PreferencePair],
    settings: AdaptSettings = AdaptSettings(),
) -> tuple[PreTrainedModel, AdaptResult]:
    """DPO on ``pairs`` with trl's ``DPOTrainer`` from ``model`` against ``ref`` (π_ref), under
    the budget rule of :class:`AdaptSettings` (early stopping on the held-out DPO loss)."""
    from trl import DPOConfig, DPOTrainer

    pairs = _need_pairs(pairs, "DPO adaptation pairs")
    train, val = settings.split(pairs)
    score = dpo_validation_score(model, ref, tok, val, settings.beta) if val else None
    extra = {"beta": settings.beta, "ref_model": ref}
    return _train(DPOTrainer, DPOConfig, model, extra, dpo_texts(tok, train), tok, settings,
                  score)  # fmt: skip


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
    """One sampled response per prompt (temperature 1, through ``generate``). The toy's
    prompts share one length; a model's chat prompts are left-padded into one batch and
    truncated to leave ``max_new_tokens`` of its context."""
    model.eval()
    ids = [prompt_ids(tok, p) for p in prompts]
    limit = max_length(tok)
    if limit is not None:
        ids = [i[max(0, len(i) - (limit - max_new_tokens)) :] for i in ids]
    if is_toy(tok) and len({len(i) for i in ids}) != 1:
        raise MetaPrefError("win_rate: prompts must have one length in tokens (the toy's do)")
    width = max(len(i) for i in ids)
    pad = tok.pad_token_id
    inputs = torch.tensor([[pad] * (width - len(i)) + i for i in ids])
    mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = model.generate(  # type: ignore[operator]
            input_ids=inputs,
            attention_mask=mask,
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


def _judged(
    prompts: Sequence[str], ours: list[str], theirs: list[str], judge: Callable[[str, str], float]
) -> dict[str, float]:
    """Per prompt index: 1 if ``ours`` beats ``theirs`` under ``judge``, 0.5 on a tie, else 0."""
    scores = {}
    for i, (p, a, b) in enumerate(zip(prompts, ours, theirs, strict=True)):
        ra, rb = judge(p, a), judge(p, b)
        scores[str(i)] = 1.0 if ra > rb else 0.5 if ra == rb else 0.0
    return scores


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
    return _judged(prompts, ours, sample_responses(ref, tok, prompts, seed + 7919), judge)


def head_to_head(
    policy: PreTrainedModel,
    other: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    judge: Callable[[str, str], float],
    seed: int,
) -> dict[str, float]:
    """Per prompt: 1 if ``policy``'s sampled response beats ``other``'s under ``judge``, 0.5 on
    a tie, else 0 (the paper's win rate of the meta-initialised policy against the joint one).
    Both sample with the same seed (common random numbers: the comparison is symmetric and
    its per-prompt noise smaller). Keys are prompt indices, so two systems pair by prompt."""
    ours = sample_responses(policy, tok, prompts, seed)
    return _judged(prompts, ours, sample_responses(other, tok, prompts, seed), judge)


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
