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
  the toy world's tiny models learn), verifiable exactly;
- ``addition-plain``: the same sums written as a person (or a pretrained language model) reads
  them, ``What is 9 + 63?``, answer ``72``: the kind for served models.

**Reading an answer.** An agent's reply is read at its *final* answer, because models show
their working: the text after the last ``Answer:`` / ``answer is`` marker (up to a
``Confidence`` field or the end of its line), else the first line that says anything. A number
is the one after the last ``=`` of that text, else its last number (``90+36 = 126`` is 126,
``The sum is 126.`` is 126, ``Answer: 126 / Confidence: 0.9`` is 126; thousands separators are
dropped). A letter is a leading ``B``, ``(B)`` or ``B)``, else a lone option letter, else the
one option whose text the answer names (``eel`` is D when D is ``eel``).
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
    "ALL_KINDS",
    "KINDS",
    "Evaluator",
    "Instance",
    "TaskEvaluator",
    "answer_text",
    "builtin_evaluator",
    "final_number",
    "instance_pool",
    "option_letter",
    "parse_confidence",
]

#: The built-in task kinds: a multiple-choice task and a verifiable one.
KINDS: tuple[str, ...] = ("facts-mc", "addition")
#: Every kind :func:`builtin_evaluator` and :func:`instance_pool` know.
ALL_KINDS: tuple[str, ...] = (*KINDS, "addition-plain", "addition-plain-1d")

_ANSWER = re.compile(r"answer(?:\s+is)?\s*[:=]|answer\s+is\b", re.IGNORECASE)
_FIELD_END = re.compile(r"\bconfidence\b|\s/\s|\n", re.IGNORECASE)
_CONFIDENCE = re.compile(r"confidence\s*[:=]?\s*(\d*\.?\d+)", re.IGNORECASE)
_LETTER = re.compile(r"^\(?([A-Z])(?![\w'])")
_BRACKETED = re.compile(r"(?<![\w'])\(?([A-Z])\)")
_NUMBER = re.compile(r"(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?:\.\d+)?")


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
    """The final answer's text: after the last ``Answer:`` / ``answer is`` marker up to a
    ``Confidence`` field, a `` / `` separator or the end of the line; else the first
    non-empty line, cut the same way."""
    markers = list(_ANSWER.finditer(text))
    if markers:
        rest = text[markers[-1].end() :]
        end = _FIELD_END.search(rest.lstrip(" \t"))
        rest = rest.lstrip(" \t")
        return (rest[: end.start()] if end else rest).strip(" \t*_.")
    for line in text.splitlines():
        end = _FIELD_END.search(line)
        head = (line[: end.start()] if end else line).strip(" \t*_")
        if head:  # a line that opens with its Confidence field holds no answer
            return head
    return ""


def final_number(text: str, marked: bool = False) -> str | None:
    """The number an answer text settles on: the first after its last ``=``, else the first
    after its last `` is ``, else its first number when the text followed an ``Answer:``
    marker (``Answer: 126, because 90+36``) and its last otherwise (``90 plus 36 makes 126``);
    thousands separators dropped, ``72.0`` read as ``72``. None when it holds no number."""
    after = None
    for sep in ("=", " is "):
        if after is None and sep in text:
            after = _NUMBER.search(text[text.rindex(sep) + len(sep) :])
    numbers = _NUMBER.findall(text)
    if after is None and not numbers:
        return None
    pick = numbers[0] if marked else (numbers[-1] if numbers else "")
    number = (after.group(0) if after is not None else pick).replace(",", "")
    whole, _, fraction = number.partition(".")
    return whole if not fraction.strip("0") else number  # 72.0 is 72


def option_letter(text: str, choices: Sequence[str]) -> str | None:
    """The option an answer text names, or None: a leading capital letter (``B``, ``(B)``,
    ``B)``, ``B.``, ``B: owl``; ``A bat`` is read for its words, "A" being an article), else
    exactly one bracketed letter (``(C)``, ``C)``) in the text, else exactly one option whose
    text it names (``eel`` is D when D is ``eel``)."""
    valid = {chr(65 + k) for k in range(max(len(choices), 1))}
    head = text.strip(" \t*_")
    if re.fullmatch(r"\(?[a-z]\)?\.?", head):  # a lone lower-case letter: "d", "(d)", "d)"
        head = head.upper()
    match = _LETTER.match(head)
    if match is not None and match.group(1) in valid:
        rest = head[match.end() :]
        if not rest or rest[0] in ").:" or head.startswith("("):
            return match.group(1)
        option = (
            choices[ord(match.group(1)) - 65] if len(choices) > ord(match.group(1)) - 65 else ""
        )
        if option and rest.strip(" -").lower().startswith(str(option).lower()):
            return match.group(1)
    bracketed = {m.group(1) for m in _BRACKETED.finditer(text)} & valid
    if len(bracketed) == 1:
        return bracketed.pop()
    named = [
        chr(65 + k)
        for k, choice in enumerate(choices)
        if re.search(rf"(?<!\w){re.escape(str(choice))}(?!\w)", text, re.IGNORECASE)
    ]
    return named[0] if len(named) == 1 else None


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
            return option_letter(raw, instance.meta.get("choices") or ())
        if isinstance(task, (core_tasks.Addition, core_tasks.Arithmetic)):
            return final_number(raw, marked=_ANSWER.search(text) is not None)
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
    if kind == "addition-plain":
        return _PlainAddition(reverse=False, pad=False)
    if kind == "addition-plain-1d":
        return _PlainAddition(digits=1, reverse=False, pad=False, kind=kind)
    raise OrchestraError(f"unknown task kind {kind!r}; built in: {', '.join(ALL_KINDS)}")


class _PlainAddition(core_tasks.Addition):
    """Addition as a pretrained model reads it: ``What is 9 + 63?``, answer ``72``."""

    name = "addition-plain"

    def __init__(self, *args: Any, kind: str = "addition-plain", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # ``addition-plain-1d`` (one-digit sums, ``What is 3 + 5?``) is its own kind, with its
        # own split and its own instance ids, so it never shares a seed stream with two digits.
        object.__setattr__(self, "name", kind)

    def make(self, a: int, b: int) -> core_tasks.Example:
        return core_tasks.Example(
            self.name, f"What is {a} + {b}?", str(a + b), {"a": a, "b": b, "sum": a + b}
        )


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
