"""Versioned, validated records: the question set, the ledger rows and the debate records.

A ledger is a JSONL file with one :class:`LedgerRow` per (debate, agent, round, sample), that is
one row per model call. It is the single source of truth of a run: every table and figure is
recomputed from it (``rebuild``), so it carries what the analysis needs (the gold option, the
option order the agents saw, the coded answer and the raw response), what a cost card needs
(the server's token counts, finish reason, latency) and what makes the run exact (the seed sent
with the call, and the hash of the run configuration the row was produced under). Every row
names the schema it was written with; a reader refuses rows of another major version rather
than guessing what their fields mean.

Reading is strict: a malformed line, an unknown option, a duplicate key or a row whose fields
contradict each other (``correct`` but not the gold answer) is an error naming the file and line.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from paperstack.errors import PaperstackError
from paperstack.records import JsonlWriter, atomic_write

__all__ = [
    "LEDGER_SCHEMA",
    "LETTERS",
    "QUESTIONS_SCHEMA",
    "LedgerError",
    "LedgerRow",
    "LedgerWriter",
    "Question",
    "check_order",
    "read_ledger",
    "read_questions",
    "write_questions",
]

LEDGER_SCHEMA = "debate-ledger/2"
QUESTIONS_SCHEMA = "debate-questions/1"
LETTERS = string.ascii_uppercase[:10]  # MMLU-Pro has up to ten options, A-J


class LedgerError(PaperstackError):
    """A ledger, question set or debate configuration that cannot be used as it is."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Question(_Strict):
    """One multiple-choice question. ``gold`` is the letter of the correct option."""

    schema_: str = Field(default=QUESTIONS_SCHEMA, alias="schema")
    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    options: list[str] = Field(min_length=2, max_length=len(LETTERS))
    gold: str
    source: str = "user"

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _check(self) -> Question:
        if self.schema_ != QUESTIONS_SCHEMA:
            raise ValueError(f"schema {self.schema_!r} is not {QUESTIONS_SCHEMA!r}")
        if self.gold not in self.letters:
            raise ValueError(f"gold {self.gold!r} is not one of the options {self.letters}")
        if any(not o.strip() for o in self.options):
            raise ValueError("an option is empty")
        return self

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.options)]

    def render(self, order: str | None = None) -> str:
        """The question as a prompt shows it: ``text A) x B) y ...`` (the fact-world format).

        ``order`` shuffles the options: ``order[i]`` is the letter of the option shown at
        position ``i`` (``"CADB"`` shows option C first, as A); ``None`` keeps the given order.
        """
        try:
            shown = self.letters if order is None else check_order(order, len(self.options))
        except ValueError as exc:
            raise LedgerError(f"question {self.id}: {exc}") from None
        opts = " ".join(
            f"{k}) {self.options[self.letters.index(o)]}"
            for k, o in zip(self.letters, shown, strict=True)
        )
        return f"{self.text} {opts}"


TokenSource = Literal["server", "tokenizer", "words"]


def check_order(order: str, n_options: int) -> str:
    """``order`` must be a permutation of the first ``n_options`` letters."""
    letters = LETTERS[:n_options]
    if len(order) != n_options or set(order) != set(letters):
        raise ValueError(f"order {order!r} is not a permutation of {letters}")
    return order


class LedgerRow(_Strict):
    """One model call: one agent's answer in one round of one debate.

    ``sample`` is 0 for the debate itself; ``sample >= 1`` are independent round-0 resamples
    (the screen's self-consistency probe and the call-matched majority vote). ``order`` is the
    option order the agents of this debate saw (``order[i]`` = the canonical letter shown at
    position ``i``); ``shown`` is the letter the coder read from ``response``, ``answer`` the
    canonical option it names (``answer == order[LETTERS.index(shown)]``); both are ``None``
    when the coder could not parse the response (recorded, never guessed), and then
    ``parsed_ok`` and ``correct`` are false. ``seed`` is the seed sent with the call; ``run``
    the hash of the run configuration (:func:`debate_ledger.runner.config_hash`).
    ``tokens_in``/``tokens_out`` are the server's own counts when it reported usage
    (``tokens_source="server"``), else the local tokenizer's, else whitespace words.
    """

    schema_: str = Field(default=LEDGER_SCHEMA, alias="schema")
    run: str = Field(min_length=1)
    debate_id: str = Field(min_length=1)
    question_id: str = Field(min_length=1)
    family: str = Field(min_length=1)
    model: str = Field(min_length=1)
    agent: int = Field(ge=0)
    round: int = Field(ge=0)
    sample: int = Field(default=0, ge=0)
    seed: int = Field(ge=0)
    n_options: int = Field(ge=2, le=len(LETTERS))
    gold: str
    order: str
    shown: str | None
    answer: str | None
    parsed_ok: bool
    correct: bool
    coder: str = Field(min_length=1)
    response: str
    finish_reason: str | None = None
    tokens_in: int = Field(ge=0)
    tokens_out: int = Field(ge=0)
    tokens_source: TokenSource = "server"
    latency_s: float = Field(ge=0)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _check(self) -> LedgerRow:
        if self.schema_ != LEDGER_SCHEMA:
            raise ValueError(f"schema {self.schema_!r} is not {LEDGER_SCHEMA!r}")
        letters = LETTERS[: self.n_options]
        if self.gold not in letters:
            raise ValueError(f"gold {self.gold!r} is not one of {letters}")
        check_order(self.order, self.n_options)
        for name in ("shown", "answer"):
            value = getattr(self, name)
            if value is not None and value not in letters:
                raise ValueError(f"{name} {value!r} is not one of the options {letters}")
        if (self.shown is None) != (self.answer is None):
            raise ValueError("shown and answer must both be set or both be null")
        if self.shown is not None and self.order[letters.index(self.shown)] != self.answer:
            raise ValueError(
                f"answer {self.answer!r} is not the option shown as {self.shown!r} in order "
                f"{self.order!r}"
            )
        if self.parsed_ok != (self.answer is not None):
            raise ValueError("parsed_ok must be true exactly when answer is set")
        if self.correct != (self.answer == self.gold):
            raise ValueError(f"correct={self.correct} contradicts answer {self.answer!r}")
        if self.sample and self.round:
            raise ValueError("resamples (sample >= 1) exist only in round 0")
        return self

    @property
    def key(self) -> tuple[str, int, int, int]:
        return (self.debate_id, self.agent, self.round, self.sample)

    @property
    def population(self) -> tuple[str, str]:
        """(family, model): the rows one ``run`` writes and resumes."""
        return (self.family, self.model)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"] if p != "__root__")
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    if path.is_dir():
        raise LedgerError(f"{path}: is a directory; name a JSONL file")
    try:
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if line.strip():
                    yield lineno, line
    except FileNotFoundError:
        raise LedgerError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"{path}: cannot read ({exc})") from None


def read_ledger(path: str | os.PathLike[str], *, allow_torn_tail: bool = False) -> list[LedgerRow]:
    """All rows of a ledger, validated; duplicate keys are an error naming both lines.

    ``allow_torn_tail`` accepts (and drops) an unterminated last line, which is what a run killed
    mid-write leaves; the runner uses it when resuming. Analysis reads strictly.
    """
    path = Path(path)
    rows: list[LedgerRow] = []
    seen: dict[tuple[str, int, int, int], int] = {}
    lines = list(_lines(path))
    for i, (lineno, line) in enumerate(lines):
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            if allow_torn_tail and i == len(lines) - 1 and not line.endswith("\n"):
                break
            raise LedgerError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
        if not isinstance(raw, dict):
            raise LedgerError(f"{path}:{lineno}: a row must be a JSON object")
        schema = raw.get("schema")
        if schema != LEDGER_SCHEMA:
            hint = (
                "written by debate-ledger 0.1: rerun the debates (0.1 rows lack the seed, option "
                "order and run hash)"
                if schema == "debate-ledger/1"
                else "written by another version of debate-ledger"
            )
            raise LedgerError(
                f"{path}:{lineno}: schema {schema!r} is not {LEDGER_SCHEMA!r} ({hint})"
            )
        try:
            row = LedgerRow.model_validate(raw)
        except ValidationError as exc:
            raise LedgerError(f"{path}:{lineno}: {_first_error(exc)}") from None
        if row.key in seen:
            raise LedgerError(
                f"{path}:{lineno}: duplicate row (debate {row.debate_id}, agent {row.agent}, "
                f"round {row.round}, sample {row.sample}) first seen on line {seen[row.key]}"
            )
        seen[row.key] = lineno
        rows.append(row)
    if not rows:
        raise LedgerError(f"{path}: the ledger has no rows")
    return rows


class LedgerWriter:
    """Append-only ledger writing that refuses rows whose key is already in the file, so a
    resumed run never duplicates a row. Each row is one flushed line (a killed process loses
    nothing written); :meth:`sync` fsyncs, which the runner does once per batch rather than once
    per row (thousands of rows a second would otherwise wait on the disk)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        existing = read_ledger(self.path, allow_torn_tail=True) if self._nonempty() else []
        self.keys = {r.key for r in existing}
        self.rows = existing
        self._writer = JsonlWriter(self.path, fsync=False)

    def _nonempty(self) -> bool:
        return self.path.is_file() and self.path.stat().st_size > 0

    def write(self, row: LedgerRow) -> None:
        if row.key in self.keys:
            raise LedgerError(f"{self.path}: row {row.key} is already in the ledger")
        self._writer.write(row.to_json())
        self.keys.add(row.key)
        self.rows.append(row)

    def sync(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> LedgerWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_questions(path: str | os.PathLike[str]) -> list[Question]:
    """A question set (JSONL of :class:`Question`), validated; duplicate ids are an error."""
    path = Path(path)
    out: list[Question] = []
    ids: dict[str, int] = {}
    for lineno, line in _lines(path):
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LedgerError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
        if isinstance(raw, dict):
            raw.setdefault("schema", QUESTIONS_SCHEMA)
        try:
            q = Question.model_validate(raw)
        except ValidationError as exc:
            raise LedgerError(f"{path}:{lineno}: {_first_error(exc)}") from None
        if q.id in ids:
            raise LedgerError(f"{path}:{lineno}: duplicate question id {q.id!r} (line {ids[q.id]})")
        ids[q.id] = lineno
        out.append(q)
    if not out:
        raise LedgerError(f"{path}: no questions")
    return out


def write_questions(path: str | os.PathLike[str], questions: Iterable[Question]) -> Path:
    text = "".join(
        json.dumps(q.model_dump(mode="json", by_alias=True), ensure_ascii=False) + "\n"
        for q in questions
    )
    return atomic_write(path, text)


def check_unique_ids(questions: Sequence[Question]) -> None:
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise LedgerError(f"duplicate question id {q.id!r}")
        seen.add(q.id)
