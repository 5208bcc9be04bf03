"""What a swarm works on: instances, and the evaluator that reads and scores an agent's answer.

A swarm needs two things from a task: the question each agent sees, and a way to turn an agent's
free text into an answer that can be voted on and scored. :class:`Evaluator` is that interface,
so any harness plugs in (a SWE-bench-style runner that applies a patch and runs the tests is an
evaluator whose ``score`` does exactly that): ``extract`` reads the answer out of a reply (None
when there is none), ``score`` says how good it is (1.0 correct, 0.0 wrong). An evaluator that
raises is recorded as a failure of that instance (score 0), never a crash of the run.

Built in, from :mod:`paperstack.tasks` (exact verifiers, deterministic by seed):

- ``facts-mc``: multiple-choice questions over the core's generated fact world (4 options);
- ``addition``: two-digit addition in the core's format (digits least-significant first, which
  the toy world's tiny models learn), verifiable exactly.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from orchestra_rl.errors import OrchestraError
from paperstack import tasks as core_tasks

__all__ = [
    "KINDS",
    "Evaluator",
    "Instance",
    "TaskEvaluator",
    "builtin_evaluator",
    "instance_pool",
    "parse_confidence",
]

#: The built-in task kinds: a multiple-choice task and a verifiable one.
KINDS: tuple[str, ...] = ("facts-mc", "addition")

_ANSWER = re.compile(r"answer\s*[:=]\s*(.+)", re.IGNORECASE)
_CONFIDENCE = re.compile(r"confidence\s*[:=]?\s*(\d*\.?\d+)", re.IGNORECASE)
_LETTER = re.compile(r"^\(?([A-Za-z])\b")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Instance:
    """One problem a swarm solves: ``id`` (unique in a run), ``kind`` (the task type the
    orchestrator conditions on), ``prompt`` (the question every agent sees) and ``meta`` (what
    the evaluator needs: the gold answer, options...). ``example`` is the core task example
    behind a built-in instance (scripted agents read their answer key from it)."""

    id: str
    kind: str
    prompt: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    example: core_tasks.Example | None = None


@runtime_checkable
class Evaluator(Protocol):
    """Reads and scores answers for a set of instances (see the module docstring)."""

    def extract(self, instance: Instance, text: str) -> str | None:
        """The answer in an agent's reply, normalised so equal answers compare equal (votes
        count these strings); None when the reply holds no answer."""
        ...

    def score(self, instance: Instance, answer: str | None) -> float:
        """How good the swarm's final ``answer`` is: 1.0 correct, 0.0 wrong (or in between)."""
        ...


def answer_text(text: str) -> str:
    """The text after ``Answer:`` on its line, else the first non-empty line."""
    match = _ANSWER.search(text)
    if match is not None:
        return match.group(1).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def parse_confidence(text: str) -> float | None:
    """The ``Confidence: c`` an agent reported (clipped to [0, 1]), or None."""
    match = _CONFIDENCE.search(text)
    if match is None:
        return None
    try:
        value = float(match.group(1))
    except ValueError:
        return None
    return min(1.0, max(0.0, value))


@dataclass(frozen=True)
class TaskEvaluator:
    """An :class:`Evaluator` for instances built from a :mod:`paperstack.tasks` task: the
    task's own exact verifier scores; answers are normalised per kind (a letter for
    multiple choice, the first digit run for arithmetic, else the stripped lower-case text)."""

    tasks: Mapping[str, core_tasks.Task]

    def extract(self, instance: Instance, text: str) -> str | None:
        raw = answer_text(text)
        if not raw:
            return None
        task = self._task(instance)
        if isinstance(task, core_tasks.FactWorld) and task.form == "mc":
            match = _LETTER.match(raw)
            if match is None:
                return None
            letter = match.group(1).upper()
            choices = instance.meta.get("choices") or ()
            return letter if ord(letter) - 65 < max(len(choices), 1) else None
        if isinstance(task, (core_tasks.Addition, core_tasks.Arithmetic)):
            digits = _DIGITS.search(raw)
            return digits.group(0) if digits else None
        return raw.strip(" .").lower() or None

    def score(self, instance: Instance, answer: str | None) -> float:
        if answer is None or instance.example is None:
            return 0.0
        return 1.0 if self._task(instance).verify(instance.example, answer) else 0.0

    def _task(self, instance: Instance) -> core_tasks.Task:
        try:
            return self.tasks[instance.kind]
        except KeyError:
            raise OrchestraError(
                f"instance {instance.id}: kind {instance.kind!r} has no task in this evaluator "
                f"(known: {', '.join(sorted(self.tasks))})"
            ) from None


def _builtin_task(kind: str) -> core_tasks.Task:
    if kind == "facts-mc":
        return core_tasks.FactWorld(form="mc")
    if kind == "addition":
        return core_tasks.Addition()
    raise OrchestraError(f"unknown task kind {kind!r}; built in: {', '.join(KINDS)}")


def builtin_evaluator(kinds: Sequence[str] = KINDS) -> TaskEvaluator:
    """The evaluator of the built-in kinds."""
    return TaskEvaluator({kind: _builtin_task(kind) for kind in kinds})


def _fact_split(entity: str, attribute: str) -> str:
    """Facts are divided between train and test by a stable hash, so no fact is trained on and
    evaluated (a fact-world question is only as new as its fact)."""
    return "test" if zlib.crc32(f"{entity}/{attribute}".encode()) % 2 else "train"


def instance_pool(kind: str, n: int, split: str, seed: int = 0) -> list[Instance]:
    """``n`` instances of a built-in ``kind`` from ``split`` (``train`` or ``test``; disjoint:
    different sums, different facts), deterministic by ``seed``."""
    if split not in ("train", "test"):
        raise OrchestraError(f"split must be 'train' or 'test', got {split!r}")
    if n < 0:
        raise OrchestraError(f"n must be >= 0, got {n}")
    task = _builtin_task(kind)
    examples: list[core_tasks.Example] = []
    if isinstance(task, core_tasks.FactWorld):
        # every fact of the split, cycled, each time with fresh option order and phrasing
        rng = core_tasks.base.split_rng(f"orchestra:{kind}", seed, split)
        facts = [f for f in task.facts() if _fact_split(f.entity, f.attribute) == split]
        while len(examples) < n:
            order = list(range(len(facts)))
            rng.shuffle(order)
            for i in order[: n - len(examples)]:
                template = rng.choice(core_tasks.facts.TRAIN_TEMPLATES)
                examples.append(task.question(facts[i], template, rng=rng))
    else:
        examples = task.generate(n, seed=seed, split=split)  # type: ignore[arg-type]
    out = []
    for i, ex in enumerate(examples):
        out.append(
            Instance(
                id=f"{kind}:{split}:{seed}:{i}",
                kind=kind,
                prompt=ex.prompt,
                meta=dict(ex.meta),
                example=ex,
            )
        )
    return out
