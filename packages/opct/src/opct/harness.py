"""OPCT and its SFT baseline in one harness: same pairs, steps, batch, optimizer and seed.

- :func:`train_opct`: :class:`opct.OPCTTrainer` on the pairs (on-policy: the model answers the
  wrapped prompt every step; the frozen initial model on the clean prompt supervises).
- :func:`train_bct`: BCT-style SFT consistency training (Chua et al. 2024): the targets are
  the *initial* model's responses to the clean prompts, generated once, offline
  (:func:`bct_targets`), and trl's ``SFTTrainer`` fits them behind the wrapped prompts
  (loss on the response tokens only).

Both take a model and train it in place; :class:`TrainSettings` is what they share.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from opct.errors import OPCTError
from opct.pairs import Pair, check_lengths
from opct.tokens import ready_tokenizer
from opct.trainer import OPCTConfig, OPCTTrainer, context_length
from paperstack.contract import trl_precision_args
from paperstack.llm import cut_fallback_turn

__all__ = [
    "TrainResult",
    "TrainSettings",
    "bct_targets",
    "pairs_dataset",
    "sample_responses",
    "train_bct",
    "train_opct",
]


@dataclass(frozen=True)
class TrainSettings:
    """What OPCT and SFT share in a comparison (``learning_rate`` is each method's own, chosen
    on a validation seed, see :mod:`opct.demo`)."""

    steps: int = 100
    batch_size: int = 16
    learning_rate: float = 1e-4
    max_completion_length: int = 32
    temperature: float = 1.0
    seed: int = 0
    divergence: str = "reverse"
    top_k: int | None = None
    device: str = "cpu"
    logging_steps: int = 10
    #: bf16 mixed precision (trl's ``bf16``); off by default because the toy's CPU runs are
    #: fp32, a flag rather than a constant so a GPU run can turn it on.
    bf16: bool = False
    #: micro-batches of ``batch_size`` per optimiser step (trl's
    #: ``gradient_accumulation_steps``); OPCT generates for the whole step at once, so every
    #: micro-batch is still on-policy.
    grad_accum: int = 1

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "max_completion_length", "logging_steps",
                     "grad_accum"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise OPCTError(f"{name}={value!r}: must be an integer >= 1")
        if not self.learning_rate > 0:
            raise OPCTError(f"learning_rate={self.learning_rate!r}: must be > 0")
        if not self.temperature > 0:
            raise OPCTError(f"temperature={self.temperature!r}: must be > 0")


@dataclass
class TrainResult:
    """What a training run leaves besides the trained model: its loss curve and timing."""

    method: str
    losses: list[float]
    seconds: float
    steps: int
    extra: dict[str, Any]


def pairs_dataset(pairs: Sequence[Pair]) -> Any:
    """Pairs as the dataset :class:`OPCTTrainer` reads: conversational ``prompt`` (wrapped) and
    ``teacher_prompt`` (clean), plus ``kind``."""
    import datasets

    if not pairs:
        raise OPCTError("no pairs to train on")
    for i, pair in enumerate(pairs):
        pair.check(f"pair {i}")
    return datasets.Dataset.from_dict(
        {
            "prompt": [p.student_messages() for p in pairs],
            "teacher_prompt": [p.teacher_messages() for p in pairs],
            "kind": [p.kind for p in pairs],
        }
    )


def _common(settings: TrainSettings, output_dir: str) -> dict[str, Any]:
    """TrainingArguments both methods get (a plain AdamW run: no warmup, linear decay)."""
    return {
        "output_dir": output_dir,
        "max_steps": settings.steps,
        "per_device_train_batch_size": settings.batch_size,
        "gradient_accumulation_steps": settings.grad_accum,
        "learning_rate": settings.learning_rate,
        "seed": settings.seed,
        **trl_precision_args(bf16=settings.bf16),
        "use_cpu": settings.device == "cpu",
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": settings.logging_steps,
        "disable_tqdm": True,
        "log_level": "error",
        "dataloader_num_workers": 0,
    }


def opct_config(settings: TrainSettings, output_dir: str, **config: Any) -> OPCTConfig:
    """The ``OPCTConfig`` of ``settings`` (``config``: further ``OPCTConfig`` fields)."""
    return OPCTConfig(
        **_common(settings, output_dir),
        max_completion_length=settings.max_completion_length,
        temperature=settings.temperature,
        opct_divergence=settings.divergence,
        opct_top_k=settings.top_k,
        shuffle_dataset=True,
        **config,
    )


def _quiet(trainer: Any) -> Any:
    """No per-log dict printed on stdout (Trainer's PrinterCallback when tqdm is off)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer


def _run(trainer: Any, method: str, loss_key: str) -> TrainResult:
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    history = trainer.state.log_history
    losses = [float(h[loss_key]) for h in history if loss_key in h and "train_runtime" not in h]
    return TrainResult(method, losses, seconds, int(trainer.state.global_step), {})


def train_opct(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[Pair],
    settings: TrainSettings,
    output_dir: str | None = None,
    peft_config: Any = None,
    **config: Any,
) -> TrainResult:
    """OPCT on ``pairs`` for ``settings.steps`` steps of ``settings.batch_size`` pairs, each
    answered once, on-policy, at ``settings.temperature`` (the model trains in place)."""
    ready_tokenizer(tokenizer)
    with tempfile.TemporaryDirectory(prefix="opct-") as tmp:
        args = opct_config(settings, output_dir or tmp, **config)
        trainer = OPCTTrainer(
            model,
            args=args,
            train_dataset=pairs_dataset(pairs),
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        result = _run(_quiet(trainer), "opct", "loss")
        divergences = [
            h["opct/divergence"] for h in trainer.state.log_history if "opct/divergence" in h
        ]
        result.extra["divergence"] = divergences
    model.eval()
    return result


@torch.no_grad()
def sample_responses(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    temperature: float = 1.0,
    max_new_tokens: int = 32,
    seed: int = 0,
    batch_size: int = 64,
) -> list[str]:
    """One response per prompt through the chat template (sampled; ``temperature=0``: greedy),
    left-padded batches, decoded without special tokens (cut at the next ``"\\nUser:"`` turn
    where the checkpoint has no chat template of its own). Deterministic by ``seed``."""
    ready_tokenizer(tokenizer)
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False
        )
        for p in prompts
    ]
    out: list[str] = []
    model.eval()
    device = next(model.parameters()).device
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for start in range(0, len(texts), batch_size):
                enc = tokenizer(
                    texts[start : start + batch_size],
                    add_special_tokens=False,
                    padding=True,
                    return_tensors="pt",
                ).to(device)
                sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
                gen = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                    **(sampling if temperature > 0 else {"do_sample": False}),
                )
                new = gen[:, enc["input_ids"].shape[1] :]
                decoded = tokenizer.batch_decode(new, skip_special_tokens=True)
                out.extend(cut_fallback_turn(text, tokenizer) for text in decoded)
    finally:
        tokenizer.padding_side = side
    return out


def bct_targets(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[Pair],
    *,
    temperature: float = 1.0,
    max_new_tokens: int = 32,
    seed: int = 0,
) -> list[str]:
    """The BCT targets: the *initial* model's responses to the clean prompts, sampled once
    (offline, before any update), at the temperature OPCT's teacher is read at."""
    targets = sample_responses(
        model,
        tokenizer,
        [p.clean for p in pairs],
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
    )
    empty = [i for i, t in enumerate(targets) if not t.strip()]
    if len(empty) == len(targets):
        raise OPCTError("bct_targets: the model answered every clean prompt with nothing")
    return targets


def train_bct(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[Pair],
    settings: TrainSettings,
    output_dir: str | None = None,
    targets: Sequence[str] | None = None,
    peft_config: Any = None,
) -> TrainResult:
    """SFT consistency training: targets from the clean prompts (``targets``, else
    :func:`bct_targets` of this model now), fitted behind the wrapped prompts with trl's
    ``SFTTrainer`` for the same steps and batch as :func:`train_opct`."""
    import datasets
    from trl import SFTConfig, SFTTrainer

    ready_tokenizer(tokenizer)
    if targets is None:
        targets = bct_targets(
            model,
            tokenizer,
            pairs,
            temperature=settings.temperature,
            max_new_tokens=settings.max_completion_length,
            seed=settings.seed,
        )
    if len(targets) != len(pairs):
        raise OPCTError(f"train_bct: {len(pairs)} pairs but {len(targets)} targets")
    check_lengths(pairs, tokenizer, settings.max_completion_length, context_length(model), targets)
    keep = [i for i, t in enumerate(targets) if t.strip()]  # an empty target teaches nothing
    data = datasets.Dataset.from_dict(
        {
            "prompt": [pairs[i].student_messages() for i in keep],
            "completion": [[{"role": "assistant", "content": targets[i]}] for i in keep],
        }
    )
    with tempfile.TemporaryDirectory(prefix="bct-") as tmp:
        args = SFTConfig(
            **_common(settings, output_dir or tmp),
            completion_only_loss=True,
            packing=False,
            max_length=context_length(model),
            shuffle_dataset=True,
        )
        trainer = SFTTrainer(
            model,
            args=args,
            train_dataset=data,
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        result = _run(_quiet(trainer), "bct", "loss")
    result.extra["targets"] = len(keep)
    model.eval()
    return result
