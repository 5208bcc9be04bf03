"""Fine-tuning on (compressed) CoTs with trl's ``SFTTrainer``, and the evaluation harness.

:func:`sft` trains a causal LM in place on ``(question, CoT)`` pairs as conversational
prompt/completion rows, loss on the completion only (trl's ``completion_only_loss``), optionally
through a LoRA adapter (``peft_config``, extra ``minpath[peft]``). Every system of the demo (raw
traces, MinPath traces, each compressed baseline) goes through this one function with the same
:class:`SFTSettings`, so they differ only in their training targets.

:func:`generate` decodes greedily and counts the generated tokens (up to and without EOS);
with ``budgets`` it is the length-budget baseline: each answer stops at its budget and, if it
has not answered by then, ``"\\nAnswer:"`` is appended and the model completes the number.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import torch

from minpath.errors import MinPathError
from minpath.graph import final_answer
from paperstack.contract import trl_precision_args
from paperstack.llm import FALLBACK_STOP

__all__ = [
    "Generation",
    "SFTSettings",
    "TrainResult",
    "generate",
    "prepare",
    "sft",
    "sft_dataset",
]


def prepare(tokenizer: Any, name: str = "model") -> bool:
    """Make ``tokenizer`` fit for trl SFT and batched generation: the EOS token as pad token when
    it has none (GPT-2, Mistral), and the core's fallback chat template when it has no chat
    template (conversations render as ``"User: ...\nAssistant:"``). Returns whether it runs
    on the fallback template (then generation stops at ``"\nUser:"``)."""
    from paperstack.llm import FALLBACK_CHAT_TEMPLATE, prepare_tokenizer

    prepare_tokenizer(tokenizer, need_chat_template=True, name=name, chat_template="fallback")
    return bool(tokenizer.chat_template == FALLBACK_CHAT_TEMPLATE)


@dataclass(frozen=True)
class SFTSettings:
    """What every fine-tune of a comparison shares (chosen on a validation seed, see demo)."""

    steps: int = 200
    batch_size: int = 16
    learning_rate: float = 1e-3
    seed: int = 0
    device: str = "cpu"
    logging_steps: int = 10

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "logging_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MinPathError(f"{name}={value!r}: must be an integer >= 1")
        if not self.learning_rate > 0:
            raise MinPathError(f"learning_rate={self.learning_rate!r}: must be > 0")


@dataclass
class TrainResult:
    losses: list[float]
    seconds: float
    steps: int
    rows: int
    extra: dict[str, Any] = field(default_factory=dict)


def sft_dataset(pairs: Sequence[tuple[str, str]]) -> Any:
    """``(question, cot)`` pairs as trl's conversational prompt/completion dataset."""
    import datasets

    if not pairs:
        raise MinPathError("no training pairs")
    for i, (q, c) in enumerate(pairs):
        if not str(q).strip() or not str(c).strip():
            raise MinPathError(f"training pair {i}: the question or the CoT is empty")
    return datasets.Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": q}] for q, _ in pairs],
            "completion": [[{"role": "assistant", "content": c}] for _, c in pairs],
        }
    )


def _context(model: Any) -> int:
    return int(getattr(model.config, "max_position_embeddings", 2048) or 2048)


def sft(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    settings: SFTSettings,
    *,
    output_dir: str | None = None,
    peft_config: Any = None,
    **config: Any,
) -> TrainResult:
    """trl ``SFTTrainer`` on ``pairs`` for ``settings.steps`` steps (the model trains in place;
    extra keyword arguments go to ``SFTConfig``, e.g. ``ddp_backend="gloo"``)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import SFTConfig, SFTTrainer

    prepare(tokenizer, str(getattr(model, "name_or_path", "") or "model"))
    data = sft_dataset(pairs)
    with tempfile.TemporaryDirectory(prefix="minpath-sft-") as tmp:
        args = SFTConfig(
            output_dir=output_dir or tmp,
            max_steps=settings.steps,
            per_device_train_batch_size=settings.batch_size,
            learning_rate=settings.learning_rate,
            lr_scheduler_type="cosine",
            warmup_steps=max(1, settings.steps // 20),
            seed=settings.seed,
            data_seed=settings.seed,
            use_cpu=settings.device == "cpu",
            report_to="none",
            save_strategy="no",
            logging_steps=settings.logging_steps,
            disable_tqdm=True,
            log_level="error",
            dataloader_num_workers=0,
            completion_only_loss=True,
            packing=False,
            **(trl_precision_args() | {"max_length": _context(model)} | config),
        )
        trainer = SFTTrainer(
            model, args=args, train_dataset=data, processing_class=tokenizer,
            peft_config=peft_config,
        )  # fmt: skip
        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
        history = trainer.state.log_history
        losses = [float(h["loss"]) for h in history if "loss" in h and "train_runtime" not in h]
        result = TrainResult(losses, seconds, int(trainer.state.global_step), len(pairs))
        result.extra["trainer"] = trainer
    model.eval()
    return result


@dataclass
class Generation:
    """One decoded answer: its text, its token count, and the answer it states."""

    text: str
    tokens: int
    forced: bool = False

    @property
    def answer(self) -> int | Fraction | None:
        return final_answer(self.text)


def _encode_prompts(tokenizer: Any, prompts: Sequence[str]) -> list[list[int]]:
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False
        )
        for p in prompts
    ]
    ids: list[list[int]] = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return ids


def _cut_at_stop(tokenizer: Any, ids: list[int]) -> list[int]:
    """``ids`` up to the first token whose decoded prefix holds :data:`FALLBACK_STOP`."""
    text = tokenizer.decode(ids, skip_special_tokens=True)
    if FALLBACK_STOP not in text:
        return ids
    for k in range(1, len(ids) + 1):
        if FALLBACK_STOP in tokenizer.decode(ids[:k], skip_special_tokens=True):
            return ids[: k - 1]
    return ids


@torch.no_grad()
def _greedy(model: Any, tokenizer: Any, inputs: list[list[int]], max_new: list[int],
            batch_size: int) -> list[list[int]]:  # fmt: skip
    """Greedy continuations, batched by input length (no padding, so results equal a one-by-one
    decode), each cut at EOS and at its own ``max_new``."""
    eos = tokenizer.eos_token_id
    out: list[list[int]] = [[] for _ in inputs]
    by_len: dict[int, list[int]] = {}
    for i, ids in enumerate(inputs):
        by_len.setdefault(len(ids), []).append(i)
    device = next(model.parameters()).device
    for idxs in by_len.values():
        for s in range(0, len(idxs), batch_size):
            chunk = idxs[s : s + batch_size]
            limit = max(max_new[i] for i in chunk)
            if limit <= 0:
                continue
            x = torch.tensor([inputs[i] for i in chunk], device=device)
            gen = model.generate(
                input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=limit,
                do_sample=False, pad_token_id=tokenizer.pad_token_id, eos_token_id=eos,
            )[:, x.shape[1] :].tolist()  # fmt: skip
            for i, ids in zip(chunk, gen, strict=True):
                cut = ids.index(eos) if eos in ids else len(ids)
                out[i] = ids[: min(cut, max_new[i])]
    return out


def generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 256,
    budgets: Sequence[int] | None = None,
    batch_size: int = 128,
) -> tuple[list[Generation], float]:
    """Greedy answers to ``prompts`` and the wall seconds it took. With ``budgets`` (one per
    prompt) each answer is cut at its budget and, when it has no final answer by then, gets a
    forced ``"\\nAnswer:"`` and up to 8 more tokens (counted: they are output too)."""
    model.eval()
    fallback = prepare(tokenizer, str(getattr(model, "name_or_path", "") or "model"))
    start = time.perf_counter()
    inputs = _encode_prompts(tokenizer, prompts)
    limits = [max_new_tokens] * len(prompts) if budgets is None else [int(b) for b in budgets]
    if len(limits) != len(prompts):
        raise MinPathError(f"{len(prompts)} prompts but {len(limits)} budgets")
    ids = _greedy(model, tokenizer, inputs, limits, batch_size)
    if fallback:
        ids = [_cut_at_stop(tokenizer, t) for t in ids]
    texts = [tokenizer.decode(t, skip_special_tokens=True) for t in ids]
    gens = [Generation(t, len(i)) for t, i in zip(texts, ids, strict=True)]
    if budgets is not None:
        cue = tokenizer("\nAnswer:", add_special_tokens=False)["input_ids"]
        need = [k for k, g in enumerate(gens) if g.answer is None]
        more = _greedy(model, tokenizer, [inputs[k] + ids[k] + cue for k in need],
                       [8] * len(need), batch_size)  # fmt: skip
        for k, extra in zip(need, more, strict=True):
            tail = tokenizer.decode(cue + extra, skip_special_tokens=True)
            gens[k] = Generation(gens[k].text + tail, gens[k].tokens + len(cue) + len(extra), True)
    return gens, time.perf_counter() - start
