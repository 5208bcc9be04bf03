"""``OPCTTrainer``: trl's on-policy ``DistillationTrainer`` with the teacher behind the clean
prompt, and its config ``OPCTConfig``.

trl 1.16's ``DistillationTrainer`` already does the on-policy half of OPCT: every generation
batch it samples a response from the student to the dataset's ``prompt`` and trains on the
divergence between student and teacher next-token distributions over those response tokens.
What it cannot do is give the teacher a *different prompt*: its teacher scores the very
``prompt + response`` the student saw. OPCT's teacher is the model itself conditioned on the
clean prompt. Two overrides carry that change, nothing else:

- ``_generate_and_score_completions``: after trl has generated and padded the batch, the
  dataset's ``teacher_prompt`` column (the clean prompt x, conversational) is tokenized with
  the same chat template and added as ``teacher_prompt_ids`` / ``teacher_prompt_mask``; trl's
  shuffling and micro-batch splitting carry them with their rows.
- ``_compute_loss``: the student runs on ``prompt + response``, the teacher on
  ``teacher_prompt + response`` (no gradient), both through trl's ``_get_last_hidden_state``;
  only the response positions are projected through the LM heads, and the loss is
  :func:`opct.loss.consistency_divergence` (reverse KL by default, full vocabulary or top-K
  plus a tail bucket), normalised by trl's token count of the whole batch.

The teacher is π_θ₀, the model as it was at construction: the same model with its peft adapter
disabled when training a LoRA (no second copy), else a frozen deep copy made here, or a
``teacher_model`` the caller passes (it must share the student's vocabulary and tokenizer).

Of trl's SDFT options (``trl.experimental.sdft``), two were considered: its EMA teacher is
``OPCTConfig.opct_teacher="ema"`` (the copy follows the student, teacher ← (1-α) teacher +
α student, every ``opct_teacher_sync_steps`` steps; not with a LoRA's adapter-off teacher,
which has no weights of its own); its importance-sampling clipping does not apply: trl's
``DistillationTrainer`` generates one batch per optimiser step and splits it into the
gradient-accumulation micro-batches, all sampled from the policy before that step, so the
ratio it would clip is 1. A tokenizer without pad token or chat template (Mistral, GPT-2) gets
EOS padding and the core's fallback template (:func:`opct.tokens.ready_tokenizer`).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate.utils import is_peft_model
from transformers import AutoModelForCausalLM, PreTrainedModel, TrainerCallback
from trl import DistillationConfig, DistillationTrainer
from trl.trainer.callbacks import SyncRefModelCallback
from trl.trainer.utils import pad, use_adapter

from opct.errors import OPCTError
from opct.loss import DIVERGENCES, consistency_divergence
from opct.tokens import ready_tokenizer

__all__ = ["OPCTConfig", "OPCTTrainer", "context_length"]

TEACHER_KEYS = ("teacher_prompt_ids", "teacher_prompt_mask")
#: What the teacher is: the frozen initial model, or an EMA of the student (see OPCTConfig).
TEACHERS = ("initial", "ema")


@dataclass
class OPCTConfig(DistillationConfig):
    """``DistillationConfig`` plus OPCT's divergence knobs.

    Defaults follow the research notes: reverse KL over the full vocabulary, temperature 1
    (trl's default: samples and loss at the same temperature), a learning rate of 2e-5 (the
    notes' 1e-5 to 5e-5 for LoRA; trl's distillation default is 1e-6). trl's ``beta`` (its
    generalised-JSD interpolation) is not used: ``opct_divergence`` names the divergence.
    """

    learning_rate: float = field(
        default=2e-5, metadata={"help": "AdamW learning rate (notes: 1e-5 to 5e-5 with LoRA)."}
    )
    opct_divergence: str = field(
        default="reverse",
        metadata={"help": "'reverse' KL(student‖teacher), 'forward' KL(teacher‖student), 'jsd'."},
    )
    opct_top_k: int | None = field(
        default=None,
        metadata={"help": "None: full vocabulary; K: the K likeliest tokens (+ a tail bucket)."},
    )
    opct_tail: bool = field(
        default=True, metadata={"help": "With opct_top_k: lump the rest of the mass in a bucket."}
    )
    opct_jsd_mix: float = field(
        default=0.5, metadata={"help": "λ of the generalised JSD (opct_divergence='jsd')."}
    )
    opct_teacher: str = field(
        default="initial",
        metadata={
            "help": "'initial': the frozen initial model (the paper's π_θ₀); 'ema': a copy "
            "that follows the student by an exponential moving average (trl's SDFT option)."
        },
    )
    opct_teacher_update_rate: float = field(
        default=0.05,
        metadata={"help": "With opct_teacher='ema': α in teacher ← (1-α) teacher + α student."},
    )
    opct_teacher_sync_steps: int = field(
        default=1, metadata={"help": "With opct_teacher='ema': optimiser steps between updates."}
    )

    def __post_init__(self) -> None:
        if self.opct_divergence not in DIVERGENCES:
            raise OPCTError(
                f"opct_divergence={self.opct_divergence!r}: must be one of {', '.join(DIVERGENCES)}"
            )
        if self.opct_top_k is not None and (
            isinstance(self.opct_top_k, bool) or not isinstance(self.opct_top_k, int)
            or self.opct_top_k < 1
        ):  # fmt: skip
            raise OPCTError(f"opct_top_k={self.opct_top_k!r}: must be None or an integer >= 1")
        if self.opct_teacher not in TEACHERS:
            raise OPCTError(
                f"opct_teacher={self.opct_teacher!r}: must be one of {', '.join(TEACHERS)}"
            )
        if not 0.0 < self.opct_teacher_update_rate <= 1.0:
            raise OPCTError(
                f"opct_teacher_update_rate={self.opct_teacher_update_rate!r}: must be in (0, 1]"
            )
        if isinstance(self.opct_teacher_sync_steps, bool) or self.opct_teacher_sync_steps < 1:
            raise OPCTError(
                f"opct_teacher_sync_steps={self.opct_teacher_sync_steps!r}: must be >= 1"
            )
        if not 0.0 < self.opct_jsd_mix < 1.0:
            raise OPCTError(f"opct_jsd_mix={self.opct_jsd_mix!r}: must be in (0, 1)")
        if self.beta != 1.0:
            raise OPCTError(
                f"beta={self.beta}: OPCTTrainer does not use trl's beta; set opct_divergence"
            )
        if self.max_completion_length is None or self.max_completion_length < 1:
            raise OPCTError(
                f"max_completion_length={self.max_completion_length!r}: must be an integer >= 1"
            )
        if not self.learning_rate > 0:
            raise OPCTError(f"learning_rate={self.learning_rate!r}: must be > 0")
        super().__post_init__()


def context_length(model: Any) -> int | None:
    """The longest sequence ``model`` takes (``max_position_embeddings``), if it says."""
    config = getattr(model, "config", None)
    if config is None:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    value = getattr(text, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) else None


def _vocab_size(model: Any) -> int:
    return int(model.config.get_text_config().vocab_size)


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))
    return ""


def _check_dataset(dataset: Any, name: str, tokenizer: Any, args: OPCTConfig, model: Any) -> None:
    """Every row has a non-empty ``prompt`` and ``teacher_prompt`` whose chat-formatted length
    plus ``max_completion_length`` fits the model's context (one error naming the row)."""
    if dataset is None or not hasattr(dataset, "column_names"):
        return
    for column in ("prompt", "teacher_prompt"):
        if column not in dataset.column_names:
            raise OPCTError(
                f"{name}: no {column!r} column (OPCT needs the wrapped prompt as 'prompt' and "
                "the clean prompt as 'teacher_prompt'; see opct.pairs_dataset)"
            )
    limit = context_length(model)
    budget = int(args.max_completion_length or 0)
    if limit is not None and budget >= limit:
        raise OPCTError(
            f"max_completion_length={budget}: responses this long do not fit the model's "
            f"context of {limit} tokens"
        )
    for i, row in enumerate(dataset):
        for column in ("prompt", "teacher_prompt"):
            if not _prompt_text(row[column]).strip():
                raise OPCTError(f"{name} row {i}: {column!r} is empty")
            if limit is None or tokenizer is None:
                continue
            value = row[column]
            if isinstance(value, str):
                n = len(tokenizer(value)["input_ids"])
            else:
                ids = tokenizer.apply_chat_template(
                    value, add_generation_prompt=True, tokenize=True
                )
                n = len(ids["input_ids"] if hasattr(ids, "keys") else ids)
            if n + budget > limit:
                raise OPCTError(
                    f"{name} row {i}: {column!r} has {n} tokens; with max_completion_length="
                    f"{budget} the sequence exceeds the model's context of {limit} tokens"
                )


def _check_tokenizers(student: Any, teacher: Any) -> None:
    if student is None or teacher is None or student is teacher:
        return
    if student.get_vocab() != teacher.get_vocab():
        raise OPCTError(
            "teacher tokenizer differs from the student's: OPCT scores the student's response "
            "tokens under the teacher, so both must share one tokenizer"
        )
    if getattr(student, "chat_template", None) != getattr(teacher, "chat_template", None):
        raise OPCTError(
            "teacher tokenizer has another chat template than the student's: the clean and "
            "wrapped prompts must be rendered alike"
        )


class _EMATeacher(TrainerCallback):
    """``opct_teacher='ema'``: after every ``opct_teacher_sync_steps`` optimiser steps the
    teacher moves towards the student, teacher ← (1-α) teacher + α student, with trl's own
    ``SyncRefModelCallback.sync_target_model`` (what trl's SDFT trainer uses for its EMA
    teacher; ZeRO-3 aware)."""

    def __init__(self, trainer: OPCTTrainer) -> None:
        self.trainer = trainer

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step % args.opct_teacher_sync_steps != 0:
            return
        unwrap = self.trainer.accelerator.unwrap_model
        SyncRefModelCallback.sync_target_model(
            unwrap(self.trainer.model),
            unwrap(self.trainer.teacher_model),
            args.opct_teacher_update_rate,
        )


class OPCTTrainer(DistillationTrainer):
    """On-Policy Consistency Training (see the module docstring for what is overridden).

    ``train_dataset`` needs ``prompt`` (the wrapped or cued prompt, what the model answers)
    and ``teacher_prompt`` (the clean prompt); :func:`opct.harness.pairs_dataset` builds one
    from :class:`opct.Pair` objects. ``teacher_model``: default π_θ₀, the model as given
    (through its disabled adapter with ``peft_config`` or a peft model, else a frozen copy).
    ``teacher_processing_class``: the teacher's tokenizer, checked against the student's.
    """

    args: OPCTConfig

    def __init__(
        self,
        model: str | PreTrainedModel | Any,
        teacher_model: PreTrainedModel | None = None,
        args: OPCTConfig | None = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        processing_class: Any = None,
        callbacks: Any = None,
        optimizers: tuple[Any, Any] = (None, None),
        peft_config: Any = None,
        teacher_processing_class: Any = None,
    ) -> None:
        if args is not None and not isinstance(args, OPCTConfig):
            raise OPCTError(f"args: expected an OPCTConfig, got {type(args).__name__}")
        if args is None:
            args = OPCTConfig(output_dir="opct-output")
        if isinstance(model, (str, os.PathLike)):
            from paperstack.checkpoint import load_pretrained

            init = args.model_init_kwargs if isinstance(args.model_init_kwargs, dict) else {}
            model = load_pretrained(str(model), AutoModelForCausalLM.from_pretrained, **init)
        for tokenizer in (processing_class, teacher_processing_class):
            if tokenizer is not None and hasattr(tokenizer, "pad_token"):
                ready_tokenizer(tokenizer)  # EOS pads; the core's fallback chat template
        _check_tokenizers(processing_class, teacher_processing_class)
        if teacher_model is not None and _vocab_size(teacher_model) != _vocab_size(model):
            raise OPCTError(
                f"teacher_model: vocabulary of {_vocab_size(teacher_model)} tokens, the student "
                f"has {_vocab_size(model)}; OPCT compares next-token distributions over one "
                "vocabulary"
            )
        _check_dataset(train_dataset, "train_dataset", processing_class, args, model)
        _check_dataset(eval_dataset, "eval_dataset", processing_class, args, model)
        self._teacher_is_adapter_off = teacher_model is None and (
            peft_config is not None or is_peft_model(model)
        )
        if args.opct_teacher == "ema" and self._teacher_is_adapter_off:
            raise OPCTError(
                "opct_teacher='ema' with LoRA: the teacher is the adapter-disabled model, which "
                "has no weights of its own to average; train without LoRA or pass teacher_model"
            )
        if teacher_model is None and not self._teacher_is_adapter_off:
            teacher_model = copy.deepcopy(model)  # π_θ₀: frozen before the first update
        if teacher_model is not None:
            teacher_model.eval()
            teacher_model.requires_grad_(False)
        super().__init__(
            model,
            teacher_model=teacher_model,
            args=args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            callbacks=callbacks,
            optimizers=optimizers,
            peft_config=peft_config,
        )
        if args.opct_teacher == "ema":
            self.add_callback(_EMATeacher(self))

    # ------------------------------------------------------------------ rollout side

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        batch = super()._generate_and_score_completions(inputs)
        missing = [i for i, x in enumerate(inputs) if "teacher_prompt" not in x]
        if missing:
            raise OPCTError(f"batch row {missing[0]}: no 'teacher_prompt' (the clean prompt)")
        teacher_ids, _, _ = self._tokenize_prompts([x["teacher_prompt"] for x in inputs])
        device = batch["prompt_ids"].device
        rows = [torch.tensor(ids) for ids in teacher_ids]
        pad_id = self._tokenizer.pad_token_id
        batch["teacher_prompt_ids"] = pad(rows, padding_value=pad_id, padding_side="left").to(
            device
        )
        batch["teacher_prompt_mask"] = pad(
            [torch.ones_like(r) for r in rows], padding_value=0, padding_side="left"
        ).to(device)
        return batch

    # ------------------------------------------------------------------ loss side

    def _teacher_hidden(self, unwrapped_student: Any, ids: torch.Tensor, mask: torch.Tensor,
                        keep: int) -> tuple[torch.Tensor, Any]:  # fmt: skip
        """The teacher's final hidden states on ``clean prompt + response`` and its LM head."""
        with torch.no_grad():
            if self._teacher_is_adapter_off:
                name = "ref" if "ref" in getattr(unwrapped_student, "peft_config", {}) else None
                with use_adapter(unwrapped_student, adapter_name=name):
                    hidden = self._get_last_hidden_state(unwrapped_student, ids, mask, keep)
                return hidden, unwrapped_student
            teacher = self.accelerator.unwrap_model(self.teacher_model)
            hidden = self._forward_redirection(
                self.teacher_model, teacher, self._get_last_hidden_state, teacher, ids, mask, keep
            )
            return hidden, teacher

    @staticmethod
    def _logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
        head = model.get_output_embeddings()
        logits = head(hidden.to(head.weight.device))
        softcap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
        if softcap:
            logits = softcap * torch.tanh(logits / softcap)
        return logits

    def _compute_loss(
        self, unwrapped_student: Any, inputs: dict[str, Any], num_items_in_batch: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        loss_mask = (
            completion_mask if "tool_mask" not in inputs else completion_mask * inputs["tool_mask"]
        )
        keep = completion_ids.size(1)
        student_ids = torch.cat([inputs["prompt_ids"], completion_ids], dim=1)
        student_mask = torch.cat([inputs["prompt_mask"], completion_mask], dim=1)
        teacher_ids = torch.cat([inputs["teacher_prompt_ids"], completion_ids], dim=1)
        teacher_mask = torch.cat([inputs["teacher_prompt_mask"], completion_mask], dim=1)

        student_hidden = self._get_last_hidden_state(
            unwrapped_student, student_ids, student_mask, keep
        )
        teacher_hidden, teacher = self._teacher_hidden(
            unwrapped_student, teacher_ids, teacher_mask, keep
        )
        valid = loss_mask.bool()
        # Only response positions reach the LM heads: [N, V], never [B, C, V] with padding.
        student_logits = self._logits(unwrapped_student, student_hidden[valid])
        teacher_logits = self._logits(teacher, teacher_hidden[valid]).to(student_logits.device)
        n_valid = valid.sum()
        divergence_sum = consistency_divergence(
            student_logits,
            teacher_logits,
            divergence=self.args.opct_divergence,  # type: ignore[arg-type]
            top_k=self.args.opct_top_k,
            tail=self.args.opct_tail,
            temperature=self.temperature,
            jsd_mix=self.args.opct_jsd_mix,
            reduction="sum",
        )
        denom = num_items_in_batch if num_items_in_batch is not None else n_valid
        loss = divergence_sum / torch.as_tensor(denom, device=divergence_sum.device).clamp(min=1)
        with torch.no_grad():
            log_p = torch.log_softmax(student_logits.float() / self.temperature, dim=-1)
            entropy_sum = -(log_p.exp() * log_p).sum()
        mode = "train" if unwrapped_student.training else "eval"
        per_token = (divergence_sum.detach() / n_valid.clamp(min=1)).item()
        self._metrics[mode]["opct/divergence"].append(per_token)
        return loss, entropy_sum.detach(), n_valid
