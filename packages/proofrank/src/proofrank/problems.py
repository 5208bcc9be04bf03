"""The problem-set format, the shipped set, and validated loaders for your own sets.

A problem set is a JSONL file, one problem per line::

    {"id": "ineq-02", "domain": "inequalities", "split": "test", "difficulty": 1,
     "difficulty_note": "Standard: AM-GM for three variables under a product constraint.",
     "statement": "Let $a, b, c$ be positive reals with $abc = 1$. Prove that $a + b + c \\ge 3$.",
     "references": [
       {"id": "elegant", "style": "elegant", "techniques": ["am-gm"],
        "steps": ["By AM-GM, $a + b + c \\ge 3\\sqrt[3]{abc}$.", "..."], "calc_steps": []},
       ...]}

- ``id``: unique in the set; ``domain``: algebra, number_theory, combinatorics, inequalities or
  geometry; ``split``: ``dev`` (tuning and selection, never reported) or ``test``;
- ``difficulty``: 1 (warm-up) to 5 (hardest olympiad problems) and a ``difficulty_note``;
- ``references``: at least one correct proof. Each has an ``id`` (unique in the problem), the
  ``techniques`` it uses (labels of :mod:`proofrank.taxonomy`; the first is its main one),
  and either ``steps`` (a list) or ``text`` (split into steps by
  :func:`proofrank.text.split_steps`).
  Optional: ``style`` (``elegant``, ``computational``, ``advanced`` or ``other``: what the
  scripted provers of the demo draw on) and ``calc_steps`` (indices of the steps that are
  routine calculation: labels that judge-agreement statistics compare detectors against).

The shipped set (:func:`shipped_problems`) holds 43 competition-style problems written for this
package, 10 ``dev`` and 33 ``test``: classical olympiad facts (Nesbitt, Mantel, the party
problem, $p^2 - 1$ divisible by 24...) with proofs in three styles where the problem allows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from proofrank.errors import ProofRankError
from proofrank.taxonomy import DEFAULT_TAXONOMY, Taxonomy
from proofrank.text import split_steps

__all__ = [
    "DOMAINS",
    "STYLES",
    "Problem",
    "ProblemSet",
    "Reference",
    "load_problems",
    "shipped_problems",
]

DOMAINS = ("algebra", "number_theory", "combinatorics", "inequalities", "geometry")
STYLES = ("elegant", "computational", "advanced", "other")
Style = Literal["elegant", "computational", "advanced", "other"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Reference(_Model):
    """One correct proof of a problem, with its technique labels (the first is the main one)."""

    id: str = Field(min_length=1)
    techniques: tuple[str, ...] = Field(min_length=1)
    steps: tuple[str, ...] = ()
    text: str | None = None
    style: Style = "other"
    calc_steps: tuple[int, ...] | None = None

    @model_validator(mode="after")
    def _steps(self) -> Reference:
        if self.text is not None:
            if self.steps:
                raise ValueError("give steps or text, not both")
            object.__setattr__(self, "steps", tuple(split_steps(self.text)))
        if not self.steps or any(not s.strip() for s in self.steps):
            raise ValueError("needs a non-empty proof (steps or text)")
        if self.calc_steps is not None:
            bad = [i for i in self.calc_steps if not 0 <= i < len(self.steps)]
            if bad:
                raise ValueError(f"calc_steps {bad} outside the {len(self.steps)} steps")
        return self

    @property
    def main_technique(self) -> str:
        return self.techniques[0]

    @property
    def proof(self) -> str:
        return "\n".join(self.steps)


class Problem(_Model):
    """A competition-style problem with one or more reference proofs."""

    id: str = Field(min_length=1)
    domain: Literal["algebra", "number_theory", "combinatorics", "inequalities", "geometry"]
    statement: str = Field(min_length=1)
    difficulty: int = Field(ge=1, le=5)
    difficulty_note: str = Field(min_length=1)
    split: Literal["dev", "test"] = "test"
    references: tuple[Reference, ...]

    @field_validator("references")
    @classmethod
    def _has_references(cls, v: tuple[Reference, ...]) -> tuple[Reference, ...]:
        if not v:
            raise ValueError("needs at least one reference proof")
        ids = [r.id for r in v]
        if len(set(ids)) != len(ids):
            raise ValueError(f"reference ids repeat: {ids}")
        return v

    @property
    def techniques(self) -> list[str]:
        """Every technique some reference uses, in first-seen order."""
        out: list[str] = []
        for ref in self.references:
            out.extend(t for t in ref.techniques if t not in out)
        return out

    @property
    def requestable(self) -> list[str]:
        """The techniques adaptivity asks for: each reference's main technique, once."""
        out: list[str] = []
        for ref in self.references:
            if ref.main_technique not in out:
                out.append(ref.main_technique)
        return out

    def reference(self, style: str) -> Reference | None:
        """The first reference of a style, or None."""
        return next((r for r in self.references if r.style == style), None)

    def shortest_reference(self) -> Reference:
        from proofrank.text import word_count

        return min(self.references, key=lambda r: word_count(r.proof))


class ProblemSet(Sequence[Problem]):
    """An ordered, validated collection of problems with lookup by id and by statement."""

    def __init__(self, problems: Iterable[Problem], *, source: str = "problems") -> None:
        self.problems = list(problems)
        self.source = source
        self._by_id: dict[str, Problem] = {}
        for p in self.problems:
            if p.id in self._by_id:
                raise ProofRankError(f"{source}: problem id {p.id!r} appears twice")
            self._by_id[p.id] = p
        if not self.problems:
            raise ProofRankError(f"{source}: no problems")
        self._by_statement = {" ".join(p.statement.split()): p for p in self.problems}

    def __getitem__(self, index):  # type: ignore[no-untyped-def, override]
        if isinstance(index, slice):
            return self.problems[index]
        return self.problems[index]

    def __len__(self) -> int:
        return len(self.problems)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.problems)

    def __contains__(self, item: object) -> bool:
        return item in self._by_id if isinstance(item, str) else item in self.problems

    def get(self, problem_id: str) -> Problem:
        try:
            return self._by_id[problem_id]
        except KeyError:
            raise ProofRankError(f"{self.source}: no problem with id {problem_id!r}") from None

    def by_statement(self, statement: str) -> Problem | None:
        return self._by_statement.get(" ".join(statement.split()))

    def split(self, name: str) -> ProblemSet:
        """The problems of one split (``dev`` or ``test``)."""
        chosen = [p for p in self.problems if p.split == name]
        if not chosen:
            raise ProofRankError(f"{self.source}: no problems in split {name!r}")
        return ProblemSet(chosen, source=f"{self.source}[{name}]")

    def subset(self, ids: Iterable[str]) -> ProblemSet:
        return ProblemSet([self.get(i) for i in ids], source=self.source)

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self.problems]


def _field_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _problem(obj: dict, where: str, taxonomy: Taxonomy) -> Problem:  # type: ignore[type-arg]
    pid = obj.get("id") if isinstance(obj.get("id"), str) else None
    label = f"{where} (problem {pid!r})" if pid else where
    if "references" not in obj or obj.get("references") in ([], None):
        raise ProofRankError(f"{label}: has no reference proof (field 'references')")
    try:
        problem = Problem.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ProofRankError(f"{label}: {_field_path(err['loc'])}: {err['msg']}") from None
    for i, ref in enumerate(problem.references):
        taxonomy.check(ref.techniques, f"{label}: references[{i}].techniques")
    return problem


def load_problems(
    path: str | os.PathLike[str], *, taxonomy: Taxonomy = DEFAULT_TAXONOMY
) -> ProblemSet:
    """A problem set from a JSONL file, validated line by line (see the module docstring).

    Every error is one line naming the file, the line, the problem id and the field.
    """
    from paperstack.records import iter_user_jsonl

    lines = iter_user_jsonl(path, what="a problem set (JSONL)", error=ProofRankError)
    problems = [_problem(obj, where, taxonomy) for where, obj in lines]
    if not problems:
        raise ProofRankError(f"{path}: no problems (empty file)")
    return ProblemSet(problems, source=str(path))


def shipped_problems() -> ProblemSet:
    """The 43 problems shipped with the package (10 dev, 33 test)."""
    data = resources.files("proofrank").joinpath("data", "problems.jsonl")
    with resources.as_file(data) as path:
        return load_problems(path)
