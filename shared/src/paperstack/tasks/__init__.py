"""Synthetic tasks with exact verifiers, shared by the method packages.

- ``addition``: two-operand addition (:class:`Addition`).
- ``arithmetic``: multi-step arithmetic with step-by-step solutions and a per-step checker
  (:class:`Arithmetic`).
- ``countdown``: Countdown with a parser-based verifier, never ``eval`` (:class:`Countdown`).
- ``facts``: a generated fact world with QA and multiple-choice forms (:class:`FactWorld`).

Every task generates :class:`Example` objects deterministically by seed, verifies
completions exactly, and exports to a ``datasets.Dataset``. Importing this package imports
no torch, transformers or datasets::

    from paperstack import tasks
    task = tasks.get("countdown")
    train = task.generate(1000, seed=0, split="train")
    task.verify(train[0], train[0].answer)  # True
"""

from __future__ import annotations

from typing import Any

from paperstack.tasks.addition import Addition
from paperstack.tasks.arithmetic import Arithmetic
from paperstack.tasks.base import Example, Split, Task, TaskError, completion_text
from paperstack.tasks.countdown import Countdown, evaluate_expression, search_trace, solve
from paperstack.tasks.facts import DOMAINS, Fact, FactWorld

__all__ = [
    "DOMAINS",
    "REGISTRY",
    "Addition",
    "Arithmetic",
    "Countdown",
    "Example",
    "Fact",
    "FactWorld",
    "Split",
    "Task",
    "TaskError",
    "completion_text",
    "evaluate_expression",
    "get",
    "names",
    "search_trace",
    "solve",
]

#: Registry name -> task class.
REGISTRY: dict[str, type[Task]] = {
    cls.name: cls for cls in (Addition, Arithmetic, Countdown, FactWorld)
}


def names() -> list[str]:
    """The registered task names."""
    return sorted(REGISTRY)


def get(name: str | Task, **kwargs: Any) -> Task:
    """A task by registry name, configured by ``kwargs`` (a :class:`Task` passes through)."""
    if isinstance(name, Task):
        if kwargs:
            raise TaskError(f"tasks.get: got a task instance and parameters {sorted(kwargs)}")
        return name
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise TaskError(f"unknown task {name!r}; known tasks: {', '.join(names())}") from None
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise TaskError(f"task {name!r}: bad parameters {sorted(kwargs)} ({exc})") from None
