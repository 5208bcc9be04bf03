"""The shape every synthetic task shares: an :class:`Example`, a :class:`Task`, and the splitter.

A task is a small frozen dataclass whose fields are its configuration (digit count, number
range, world size), so two tasks with equal fields generate the same examples and a cache can
key on :meth:`Task.config`. Generation is deterministic by ``(config, seed, split)``; train
and test come from disjoint halves of the instance space (a stable hash decides, so adding
examples never moves one across the line). Nothing here imports torch, transformers or
datasets: the base install of paperstack-core has none of them.
"""

from __future__ import annotations

import dataclasses
import json
import random
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from paperstack.errors import PaperstackError

if TYPE_CHECKING:  # pragma: no cover - typing only; datasets is imported lazily.
    import datasets

__all__ = [
    "Example",
    "Split",
    "Task",
    "TaskError",
    "completion_text",
    "in_test_split",
    "split_rng",
]

Split = Literal["train", "test"]


class TaskError(PaperstackError):
    """Bad task input: an unknown task name, split or parameter."""


@dataclass(frozen=True)
class Example:
    """One task instance.

    ``answer`` is the gold completion text a model is trained to emit (not just the final
    value), so supervised training, evaluation and reward functions agree on one format.
    ``meta`` carries what a verifier or a downstream method needs (numbers and target, step
    list, choices, the fact behind a question); it is JSON-serialisable.
    """

    task: str
    prompt: str
    answer: str
    meta: Mapping[str, Any] = field(default_factory=dict)

    def messages(self, with_answer: bool = True) -> list[dict[str, str]]:
        """The example as chat messages (user prompt, optionally the assistant's gold answer)."""
        msgs = [{"role": "user", "content": self.prompt}]
        if with_answer:
            msgs.append({"role": "assistant", "content": self.answer})
        return msgs

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (``meta`` as a dict), e.g. for JSONL logs."""
        return {
            "task": self.task,
            "prompt": self.prompt,
            "answer": self.answer,
            "meta": dict(self.meta),
        }


def completion_text(completion: str | Sequence[Mapping[str, Any]]) -> str:
    """The text of a completion, whether plain or trl's conversational ``[{"role", "content"}]``.

    trl passes conversational completions as a list of assistant messages; verifiers take
    either so one reward function serves both dataset formats.
    """
    if isinstance(completion, str):
        return completion
    parts = [str(m.get("content", "")) for m in completion if isinstance(m, Mapping)]
    return "".join(parts)


def split_rng(task: str, seed: int, split: str) -> random.Random:
    """An independent, reproducible random stream per (task, seed, split).

    ``random.Random`` seeded with a string hashes it with SHA-512, which is stable across
    processes and Python versions (unlike ``hash()``).
    """
    if split not in ("train", "test"):
        raise TaskError(f"split must be 'train' or 'test', got {split!r}")
    return random.Random(f"paperstack.tasks:{task}:{int(seed)}:{split}")


def in_test_split(key: object, test_fraction: float) -> bool:
    """Whether an instance (identified by ``key``) belongs to the held-out split.

    A CRC32 of the key's ``repr`` is stable across runs, so the same instance is always on
    the same side and train/test never overlap, whatever ``n`` or ``seed`` a caller uses.
    """
    bucket = zlib.crc32(repr(key).encode("utf-8")) % 10_000
    return bucket < round(test_fraction * 10_000)


class Task(ABC):
    """A synthetic task with an exact verifier.

    Subclasses are frozen dataclasses; ``name`` is the registry name.
    """

    name: ClassVar[str]

    @abstractmethod
    def generate(self, n: int, seed: int = 0, split: Split = "train") -> list[Example]:
        """``n`` examples, deterministic by ``(self.config(), seed, split)``."""

    @abstractmethod
    def verify(self, example: Example, completion: str | Sequence[Mapping[str, Any]]) -> bool:
        """Whether ``completion`` solves ``example`` (exact, never a model or ``eval``)."""

    def config(self) -> dict[str, Any]:
        """The task's parameters, with its name: what identifies its example distribution."""
        params: dict[str, Any] = (
            dataclasses.asdict(self) if dataclasses.is_dataclass(self) else {}  # type: ignore[arg-type]
        )
        return {"name": self.name, **params}

    def score(self, examples: Sequence[Example], completions: Sequence[str]) -> float:
        """Fraction of ``completions`` that verify against ``examples`` (same order)."""
        if len(examples) != len(completions):
            raise TaskError(f"score: {len(examples)} examples but {len(completions)} completions")
        if not examples:
            return 0.0
        return sum(self.verify(e, c) for e, c in zip(examples, completions, strict=True)) / len(
            examples
        )

    def to_dataset(
        self, examples: Sequence[Example], conversational: bool = False
    ) -> datasets.Dataset:
        """The examples as a Hugging Face ``datasets.Dataset``.

        Columns: ``task``, ``prompt``, ``answer``, ``messages`` (user + assistant, for SFT),
        ``meta`` (a JSON string, because per-task meta dicts have different shapes and Arrow
        wants one schema). With ``conversational=True`` the ``prompt`` column holds
        ``[{"role": "user", "content": ...}]``, the form trl's ``GRPOTrainer`` expects.
        ``datasets`` is imported here, not at module import, to keep the base install light.
        """
        try:
            import datasets
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise TaskError(
                "to_dataset needs the 'datasets' library: pip install 'paperstack-core[torch]'"
            ) from exc
        rows: dict[str, list[Any]] = {
            "task": [],
            "prompt": [],
            "answer": [],
            "messages": [],
            "meta": [],
        }
        for ex in examples:
            rows["task"].append(ex.task)
            rows["prompt"].append(ex.messages(with_answer=False) if conversational else ex.prompt)
            rows["answer"].append(ex.answer)
            rows["messages"].append(ex.messages())
            rows["meta"].append(json.dumps(dict(ex.meta), sort_keys=True))
        return datasets.Dataset.from_dict(rows)

    def reward_function(self) -> Callable[..., list[float]]:
        """A trl-style reward function: ``f(prompts, completions, answer, meta, **kw) -> [0/1]``.

        trl calls reward functions with the batch's dataset columns as keyword arguments, so
        the ``meta`` and ``answer`` columns written by :meth:`to_dataset` rebuild each example.
        """

        def reward(
            prompts: Sequence[Any],
            completions: Sequence[Any],
            answer: Sequence[str],
            meta: Sequence[str],
            **_: Any,
        ) -> list[float]:
            out = []
            for prompt, completion, gold, meta_json in zip(
                prompts, completions, answer, meta, strict=True
            ):
                text = completion_text(prompt) if not isinstance(prompt, str) else prompt
                ex = Example(self.name, text, gold, json.loads(meta_json))
                out.append(1.0 if self.verify(ex, completion) else 0.0)
            return out

        reward.__name__ = f"{self.name}_reward"
        return reward


def check_n(n: int) -> int:
    """Validate an example count (a one-line error instead of a silent empty list)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise TaskError(f"n must be a non-negative integer, got {n!r}")
    return n
