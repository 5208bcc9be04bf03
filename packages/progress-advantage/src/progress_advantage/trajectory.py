"""Trajectories as chat messages with step spans: what the scorer reads and the CLI stores.

A trajectory is a conversation (``messages``, OpenAI style) whose assistant messages are the
agent's actions and whose other messages after the first assistant turn are observations (tool
output, environment feedback). A *step* is a character span inside one assistant message: a whole
turn in an agent transcript, or one line of a step-by-step solution. Only steps are scored;
observations are context (the paper skips them: their tokens are chosen by the environment, not
the policy, so a policy/reference log-ratio on them measures nothing about the agent).

JSONL form, one trajectory per line::

    {"id": "q3-s1", "group": "q3",
     "messages": [{"role": "user", "content": "3+4*2="},
                  {"role": "assistant", "content": "4*2=8\\n3+8=11\\nAnswer: 11"}],
     "steps": [{"message": 1, "start": 0, "end": 5}, ...],
     "success": true, "answer": "11", "first_error": null}

``group`` ties the N candidates of one prompt together (best-of-N, majority vote); ``success``
is the verifier's outcome label; ``first_error`` the index of the first wrong step (failure
attribution ground truth). All three are optional.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paperstack.records import ResultsFormatError, atomic_write, read_jsonl
from progress_advantage.errors import ProgressAdvantageError

__all__ = [
    "Step",
    "Trajectory",
    "read_trajectories",
    "write_trajectories",
]


@dataclass(frozen=True)
class Step:
    """Characters ``[start, end)`` of ``messages[message]["content"]``: one scored action."""

    message: int
    start: int
    end: int


@dataclass(frozen=True)
class Trajectory:
    """A conversation plus its step spans; validated on construction (see :meth:`validate`)."""

    messages: tuple[Mapping[str, str], ...]
    steps: tuple[Step, ...]
    id: str = ""
    group: str = ""
    success: bool | None = None
    answer: str | None = None
    first_error: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_lines(
        cls,
        prompt: Sequence[Mapping[str, str]] | str,
        completion: str,
        **kw: Any,
    ) -> Trajectory:
        """A one-turn trajectory whose steps are the non-blank lines of ``completion``.

        This is the step segmentation of step-by-step solutions (one line per step). Each step
        span covers its line and the newline before it (except for the first), so every
        completion token belongs to exactly one step and the steps' sums add up to the whole
        completion's log-ratio; blank lines are glued to the following step.
        """
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        msgs = [dict(m) for m in messages] + [{"role": "assistant", "content": completion}]
        idx = len(msgs) - 1
        steps: list[Step] = []
        start = 0
        pos = 0
        for line in completion.split("\n"):
            end = pos + len(line)
            if line.strip():
                steps.append(Step(idx, start, end))
                start = end
            pos = end + 1
        if steps and steps[-1].end < len(completion):  # trailing newlines join the last step
            steps[-1] = Step(idx, steps[-1].start, len(completion))
        return cls(messages=tuple(msgs), steps=tuple(steps), **kw)

    @classmethod
    def from_turns(cls, messages: Sequence[Mapping[str, str]], **kw: Any) -> Trajectory:
        """A multi-turn trajectory whose steps are its whole assistant messages (agent turns)."""
        msgs = tuple(dict(m) for m in messages)
        steps = tuple(
            Step(i, 0, len(m["content"]))
            for i, m in enumerate(msgs)
            if m.get("role") == "assistant" and str(m.get("content", "")).strip()
        )
        return cls(messages=msgs, steps=steps, **kw)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], where: str = "trajectory") -> Trajectory:
        """Parse the JSONL form; ``where`` prefixes error messages (e.g. ``file.jsonl: line 3``)."""
        if not isinstance(obj, Mapping):
            raise ProgressAdvantageError(f"{where}: expected a JSON object")
        messages = obj.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ProgressAdvantageError(f"{where}: field 'messages' must be a non-empty list")
        for j, m in enumerate(messages):
            if (
                not isinstance(m, Mapping)
                or not isinstance(m.get("content"), str)
                or not isinstance(m.get("role"), str)
            ):
                raise ProgressAdvantageError(
                    f"{where}: field 'messages[{j}]' must have string 'role' and 'content'"
                )
        if "steps" not in obj:
            raise ProgressAdvantageError(
                f"{where}: no field 'steps' (step spans are required; build them with "
                "Trajectory.from_lines or from_turns)"
            )
        raw_steps = obj["steps"]
        if not isinstance(raw_steps, list):
            raise ProgressAdvantageError(f"{where}: field 'steps' must be a list")
        steps = []
        for k, s in enumerate(raw_steps):
            try:
                if isinstance(s, Mapping):
                    steps.append(Step(int(s["message"]), int(s["start"]), int(s["end"])))
                else:
                    a, b, c = s
                    steps.append(Step(int(a), int(b), int(c)))
            except (KeyError, TypeError, ValueError):
                raise ProgressAdvantageError(
                    f"{where}: field 'steps[{k}]' must be {{message, start, end}} integers"
                ) from None
        # Labels are checked, not coerced: bool("false") is True and str(["a"]) a group name, so
        # a wrongly typed label would silently change every accuracy computed from it.
        success = obj.get("success")
        if success is not None and not (
            isinstance(success, bool) or (type(success) is int and success in (0, 1))
        ):
            raise ProgressAdvantageError(
                f"{where}: field 'success' is {success!r}; expected true, false (or 1, 0) or null"
            )
        first_error = obj.get("first_error")
        if first_error is not None and (
            type(first_error) is not int or not 0 <= first_error < len(steps)
        ):
            raise ProgressAdvantageError(
                f"{where}: field 'first_error' is {first_error!r}; expected the index of a step "
                f"(0..{len(steps) - 1}) or null"
            )
        names = {}
        for key in ("id", "group"):
            value = obj.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
                raise ProgressAdvantageError(
                    f"{where}: field {key!r} is {value!r}; expected a string, an integer or null"
                )
            names[key] = "" if value is None else str(value)
        answer = obj.get("answer")
        if answer is not None and (
            isinstance(answer, bool) or not isinstance(answer, (str, int, float))
        ):
            raise ProgressAdvantageError(
                f"{where}: field 'answer' is {answer!r}; expected a string, a number or null"
            )
        extra = {k: v for k, v in obj.items() if k not in _FIELDS}
        try:
            return cls(
                messages=tuple(dict(m) for m in messages),
                steps=tuple(steps),
                id=names["id"],
                group=names["group"],
                success=None if success is None else bool(success),
                answer=None if answer is None else str(answer),
                first_error=first_error,
                extra=extra,
            )
        except ProgressAdvantageError as exc:
            raise ProgressAdvantageError(f"{where}: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        """The JSONL form (extra fields, such as ``step_scores``, are kept)."""
        out: dict[str, Any] = {
            "id": self.id,
            "group": self.group,
            "messages": [dict(m) for m in self.messages],
            "steps": [{"message": s.message, "start": s.start, "end": s.end} for s in self.steps],
        }
        for key in ("success", "answer", "first_error"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out

    # ------------------------------------------------------------------ checks and views

    def validate(self) -> None:
        """Steps must exist, lie in assistant messages, be non-empty and not overlap."""
        if not self.steps:
            raise ProgressAdvantageError(
                f"trajectory {self.id or '<no id>'}: has no steps (no step spans, or only blank "
                "assistant text)"
            )
        last: tuple[int, int] = (-1, 0)
        for k, s in enumerate(self.steps):
            if not 0 <= s.message < len(self.messages):
                raise ProgressAdvantageError(
                    f"field 'steps[{k}].message': {s.message} is not a message index "
                    f"(0..{len(self.messages) - 1})"
                )
            msg = self.messages[s.message]
            if msg.get("role") != "assistant":
                raise ProgressAdvantageError(
                    f"field 'steps[{k}]': message {s.message} has role {msg.get('role')!r}; only "
                    "assistant messages are scored (observations are skipped)"
                )
            content = str(msg.get("content", ""))
            if not 0 <= s.start <= s.end <= len(content):
                raise ProgressAdvantageError(
                    f"field 'steps[{k}]': span [{s.start}, {s.end}) is outside message "
                    f"{s.message} (length {len(content)})"
                )
            if not content[s.start : s.end].strip():
                raise ProgressAdvantageError(
                    f"field 'steps[{k}]': empty step (span [{s.start}, {s.end}) of message "
                    f"{s.message} holds no text)"
                )
            if (s.message, s.start) < last:
                raise ProgressAdvantageError(
                    f"field 'steps[{k}]': overlaps or precedes the previous step (steps must be "
                    "in order and disjoint)"
                )
            last = (s.message, s.end)

    def step_texts(self) -> list[str]:
        """The text of each step."""
        return [self.messages[s.message]["content"][s.start : s.end] for s in self.steps]

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def with_extra(self, **extra: Any) -> Trajectory:
        """A copy with more JSONL fields (e.g. ``step_scores``)."""
        return Trajectory(
            messages=self.messages,
            steps=self.steps,
            id=self.id,
            group=self.group,
            success=self.success,
            answer=self.answer,
            first_error=self.first_error,
            extra={**self.extra, **extra},
        )


_FIELDS = {"id", "group", "messages", "steps", "success", "answer", "first_error"}


def read_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    """All trajectories of a JSONL file; errors name the file and line."""
    try:
        records = read_jsonl(path)
    except ResultsFormatError as exc:
        raise ProgressAdvantageError(str(exc)) from None
    if not records:
        raise ProgressAdvantageError(f"{path}: holds no trajectories")
    return [
        Trajectory.from_json(rec, where=f"{path}: line {i}") for i, rec in enumerate(records, 1)
    ]


def write_trajectories(path: str | os.PathLike[str], trajectories: Sequence[Trajectory]) -> Path:
    """Write trajectories as JSONL crash-safely (:func:`paperstack.records.atomic_write`: a
    temporary file, fsynced, renamed into place; a directory or unwritable place is one line)."""
    lines = []
    for t in trajectories:
        try:
            lines.append(json.dumps(t.to_json(), default=_plain, allow_nan=False))
        except ValueError:
            raise ProgressAdvantageError(
                f"trajectory {t.id or '<no id>'}: holds NaN or infinity; not valid JSON"
            ) from None
    return atomic_write(path, "".join(line + "\n" for line in lines))


def _plain(obj: Any) -> Any:
    """numpy scalars and arrays as JSON numbers and lists."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
