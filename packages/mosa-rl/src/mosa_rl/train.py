"""``mosa train``: GRPO with MOSA (or token-level KL, or none) on a user's model and prompts.

The dataset is a JSONL file of prompts with a verifiable answer, one object a line, in either
of two forms (they may be mixed):

- Countdown: ``{"numbers": [3, 5, 7], "target": 22}``: the prompt is the core task's
  ``"Make 22 with 3 5 7."`` and the reward is its exact verifier (the completion's last line,
  or its last ``<answer>...</answer>`` tag, must be an expression that uses exactly those
  numbers and equals the target);
- prompt and answer: ``{"prompt": "What is 17 * 3?", "answer": "51"}``: the reward is 1 when
  the completion's final answer equals ``answer`` (:func:`answer_matches`).

Why two forms: Countdown has many correct expressions per problem, which is where pass@k and
MOSA's exploration argument live; a fixed answer string covers everything else a user can
check exactly (arithmetic, short facts, multiple choice letters).

Every line is checked before any model is loaded: a bad line is one error naming the file,
the line and the field. The trained model (a LoRA adapter merged into its base) and its
tokenizer are saved to ``--out`` so ``AutoModelForCausalLM.from_pretrained(out)`` loads it.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosa_rl.errors import MosaError

__all__ = ["Prompt", "answer_matches", "final_answer", "load_dataset", "reward_function", "train"]

#: Longest prompt or answer accepted from a dataset line (characters): a longer one is a
#: corrupt file or the wrong column, not a prompt a GRPO run on this scale can use.
MAX_TEXT = 20_000

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


@dataclass(frozen=True)
class Prompt:
    """One training prompt: its text, which scorer checks it, and what the scorer needs."""

    text: str
    kind: str  # "countdown" or "answer"
    meta: dict[str, Any]


def final_answer(text: str) -> str:
    """What a completion answers: its last ``<answer>`` tag, else its last non-empty line
    (with a leading ``Answer:`` or ``####`` removed), stripped."""
    from paperstack.llm import cut_fallback_turn

    text = cut_fallback_turn(text)
    tags = _ANSWER_TAG.findall(text)
    if tags:
        return str(tags[-1]).strip()
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    for prefix in ("####", "answer:", "final answer:"):
        if last.lower().startswith(prefix):
            last = last[len(prefix) :].strip()
    return last


def _as_number(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def answer_matches(completion: str, answer: str) -> bool:
    """Whether ``completion``'s final answer (:func:`final_answer`) is ``answer``.

    Compared case-insensitively with whitespace and a trailing period removed; when ``answer``
    is a number, the last number in the final answer is compared as a number instead (so
    ``"The answer is 51."`` and ``"51.0"`` both match ``"51"``).
    """
    got = final_answer(completion)
    gold = str(answer).strip()
    target = _as_number(gold)
    if target is not None:
        numbers = _NUMBER.findall(got)
        value = _as_number(numbers[-1]) if numbers else None
        return value is not None and abs(value - target) <= 1e-9 * max(1.0, abs(target))

    def norm(s: str) -> str:
        return "".join(s.split()).rstrip(".").lower()

    return norm(got) == norm(gold)


def _text_field(obj: dict[str, Any], name: str, where: str) -> str:
    value = obj[name]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise MosaError(f"{where}: {name}: expected a string, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise MosaError(f"{where}: {name}: {value} is not a finite number")
    text = str(value)
    if not text.strip():
        raise MosaError(f"{where}: {name}: empty")
    if len(text) > MAX_TEXT:
        raise MosaError(f"{where}: {name}: {len(text)} characters (at most {MAX_TEXT})")
    return text


def load_dataset(path: Path) -> list[Prompt]:
    """The prompts of a ``mosa train --dataset`` file, or one :class:`MosaError` naming the
    file, line and field of the first bad line."""
    from mosa_rl.demo import DATASET_NUMBERS, _dataset_integer
    from paperstack import tasks
    from paperstack.records import iter_user_jsonl
    from paperstack.tasks import TaskError

    countdown = tasks.get("countdown")
    low, high = DATASET_NUMBERS
    out: list[Prompt] = []
    what = 'a JSONL file of {"numbers": [...], "target": N} or {"prompt": ..., "answer": ...}'
    for where, obj in iter_user_jsonl(path, what=what, error=MosaError):
        where = f"--dataset {where}"
        if "numbers" in obj or "target" in obj:
            for name in ("numbers", "target"):
                if name not in obj:
                    raise MosaError(f"{where}: {name}: missing (a Countdown line has both)")
            raw = obj["numbers"]
            if not isinstance(raw, list):
                raise MosaError(f"{where}: numbers: {raw!r} is not a list")
            if not low <= len(raw) <= high:
                raise MosaError(
                    f"{where}: numbers: {len(raw)} numbers (a problem has {low} to {high})"
                )
            try:
                numbers = [_dataset_integer(x, f"numbers[{j}]") for j, x in enumerate(raw)]
                target = _dataset_integer(obj["target"], "target")
            except ValueError as exc:
                raise MosaError(f"{where}: {exc}") from None
            try:
                ex = countdown.make(numbers, target)  # type: ignore[attr-defined]
            except TaskError as exc:
                raise MosaError(f"{where}: target: {exc}") from None
            out.append(Prompt(ex.prompt, "countdown", dict(ex.meta)))
        elif "prompt" in obj or "answer" in obj:
            for name in ("prompt", "answer"):
                if name not in obj:
                    raise MosaError(f"{where}: {name}: missing (a prompt line has both)")
            prompt = _text_field(obj, "prompt", where)
            answer = _text_field(obj, "answer", where)
            out.append(Prompt(prompt, "answer", {"answer": answer}))
        else:
            keys = ", ".join(sorted(obj)) or "none"
            raise MosaError(
                f'{where}: expected "numbers" and "target", or "prompt" and "answer" '
                f"(fields: {keys})"
            )
    if not out:
        raise MosaError(f"--dataset {path}: no prompts in the file")
    return out


def reward_function() -> Callable[..., list[float]]:
    """trl reward: each completion scored by its row's scorer (``kind`` and ``meta`` columns)."""
    from paperstack import tasks
    from paperstack.llm import cut_fallback_turn
    from paperstack.tasks import Example
    from paperstack.tasks.base import completion_text

    countdown = tasks.get("countdown")

    def mosa_train_reward(
        prompts: Sequence[Any], completions: Sequence[Any], kind: Sequence[str],
        meta: Sequence[str], **_: Any,
    ) -> list[float]:  # fmt: skip
        out = []
        for completion, k, m in zip(completions, kind, meta, strict=True):
            text = cut_fallback_turn(completion_text(completion))
            info = json.loads(m)
            if k == "countdown":
                ok = countdown.verify(Example("countdown", "", "", info), text)
            else:
                ok = answer_matches(text, info["answer"])
            out.append(1.0 if ok else 0.0)
        return out

    return mosa_train_reward


def to_dataset(prompts: Sequence[Prompt]) -> Any:
    """The prompts as a conversational ``datasets.Dataset`` for trl's GRPOTrainer."""
    import datasets

    return datasets.Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": p.text}] for p in prompts],
            "kind": [p.kind for p in prompts],
            "meta": [json.dumps(p.meta, sort_keys=True) for p in prompts],
        }
    )


@dataclass(frozen=True)
class TrainOptions:
    """What ``mosa train`` passes to trl (the command line's flags)."""

    kl: str = "mosa"  # none, token, mosa
    beta: float | None = None  # token-KL beta or MOSA beta_M (default per kind)
    top_k: int | None = None  # None: 16, or the vocabulary less one when smaller
    steps: int = 100
    learning_rate: float | None = None
    prompts_per_step: int = 2
    num_generations: int = 8
    max_completion_length: int = 128
    temperature: float = 1.0
    grad_accum: int = 1
    bf16: bool = False
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    seed: int = 0
    device: str = "cpu"


#: Default weights: trl's documented token-KL range and the research notes' MOSA range.
DEFAULT_BETA = {"token": 0.04, "mosa": 0.1}


def train(
    model_name: str, prompts: Sequence[Prompt], out: Path, options: TrainOptions,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:  # fmt: skip
    """Train ``model_name`` with GRPO on ``prompts`` and save the result to ``out``.

    Returns a summary (steps, reward curve, seconds) that is also written to
    ``out/train.json``. With LoRA the adapter is merged before saving, so ``out`` is a plain
    model folder; the base model for MOSA is then the policy with its adapter disabled.
    """
    import time

    from transformers.trainer_callback import PrinterCallback

    from mosa_rl.demo import load_base
    from mosa_rl.trainer import MOSAConfig, MOSATrainer, _vocab
    from paperstack.records import atomic_write_json

    if options.bf16 and options.device == "cpu":
        import torch

        if not torch.backends.mkldnn.is_available():  # pragma: no cover - depends on the build
            raise MosaError("--bf16: this CPU build of torch has no bf16 kernels")
    model, tokenizer = load_base(model_name)
    vocab = _vocab(model)
    top_k = options.top_k if options.top_k is not None else min(16, vocab - 1)
    if top_k >= vocab:
        raise MosaError(f"--top-k {top_k}: the vocabulary has only {vocab} tokens")
    beta = options.beta if options.beta is not None else DEFAULT_BETA.get(options.kl, 0.0)
    lr = options.learning_rate or (1e-4 if options.lora else 1e-5)
    peft_config = None
    if options.lora:
        try:
            from peft import LoraConfig
        except ImportError:
            raise MosaError("--lora needs peft: pip install 'mosa-rl[peft]'") from None
        peft_config = LoraConfig(
            r=options.lora_r, lora_alpha=options.lora_alpha, target_modules="all-linear",
            task_type="CAUSAL_LM", lora_dropout=0.0,
        )  # fmt: skip
    dataset = to_dataset(prompts)
    with tempfile.TemporaryDirectory(prefix="mosa-train-") as scratch:
        args = MOSAConfig(
            output_dir=scratch,
            per_device_train_batch_size=options.prompts_per_step * options.num_generations,
            gradient_accumulation_steps=options.grad_accum,
            num_generations=options.num_generations,
            max_completion_length=options.max_completion_length,
            temperature=options.temperature,
            learning_rate=lr,
            max_steps=options.steps,
            beta=beta if options.kl == "token" else 0.0,
            mosa_beta=beta if options.kl == "mosa" else 0.0,
            mosa_top_k=top_k,
            loss_type="dapo",
            seed=options.seed,
            data_seed=options.seed,
            bf16=options.bf16,
            use_cpu=options.device == "cpu",
            report_to="none",
            logging_steps=1,
            save_strategy="no",
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        trainer = MOSATrainer(
            model, reward_function(), args, train_dataset=dataset, processing_class=tokenizer,
            peft_config=peft_config,
        )  # fmt: skip
        trainer.remove_callback(PrinterCallback)
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    trained: Any = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(trained, "merge_and_unload"):
        trained = trained.merge_and_unload()
    trained = trained.float() if options.bf16 else trained
    trained.save_pretrained(out)
    tokenizer.save_pretrained(out)
    history = [h for h in trainer.state.log_history if "reward" in h]
    rewards = [float(h["reward"]) for h in history]
    summary: dict[str, Any] = {
        "model": model_name,
        "prompts": len(prompts),
        "options": {**options.__dict__, "beta": beta, "learning_rate": lr, "top_k": top_k},
        "steps": int(trainer.state.global_step),
        "seconds": seconds,
        "reward": rewards,
        "mosa_kl": [float(h["mosa/kl"]) for h in history if "mosa/kl" in h],
    }
    atomic_write_json(out / "train.json", summary)
    first = f"{rewards[0]:.3f}" if rewards else "n/a"
    last = f"{rewards[-1]:.3f}" if rewards else "n/a"
    log(
        f"mosa: trained {summary['steps']} steps in {seconds:.0f} s "
        f"(reward {first} -> {last}); saved to {out}"
    )
    return summary
