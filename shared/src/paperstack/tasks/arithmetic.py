"""Multi-step arithmetic with step-by-step solutions and a per-step checker.

An instance is an expression such as ``3+4*2-5``; the gold solution reduces it one operation
at a time, in the usual order (``*`` before ``+``/``-``, then left to right), one step a line,
and ends with the final answer::

    4*2=8
    3+8=11
    11-5=6
    Answer: 6

Process-reward and CoT-compression methods need to judge steps, not only answers, so
:meth:`Arithmetic.check_steps` verifies each line exactly: it must be true arithmetic and a
legal reduction of the expression as rewritten by the steps before it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

from paperstack.tasks.base import (
    Example,
    Split,
    Task,
    TaskError,
    check_n,
    completion_text,
    in_test_split,
    split_rng,
)

__all__ = ["Arithmetic", "parse_step"]

_STEP = re.compile(r"^\s*(-?\d+)\s*([-+*])\s*(-?\d+)\s*=\s*(-?\d+)\s*$")
_ANSWER = re.compile(r"^\s*Answer:\s*(-?\d+)\s*$", re.IGNORECASE)


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def _value(tokens: Sequence[int | str]) -> Fraction:
    """Value of a flat token list ``[n, op, n, op, n ...]`` with the usual precedence."""
    terms: list[Fraction] = [Fraction(int(tokens[0]))]
    signs: list[str] = []
    for i in range(1, len(tokens), 2):
        op, num = str(tokens[i]), Fraction(int(tokens[i + 1]))
        if op == "*":
            terms[-1] *= num
        else:
            signs.append(op)
            terms.append(num)
    total = terms[0]
    for sign, term in zip(signs, terms[1:], strict=True):
        total = total + term if sign == "+" else total - term
    return total


def parse_step(line: str) -> tuple[int, str, int, int] | None:
    """``"3+8=11"`` -> ``(3, "+", 8, 11)``; ``None`` if the line is not a step."""
    m = _STEP.match(line)
    if m is None:
        return None
    return int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))


@dataclass(frozen=True)
class Arithmetic(Task):
    """Expressions of ``min_ops..max_ops`` operations (``+ - *``) over ``1..max_operand``.

    ``meta`` has ``expression``, ``tokens``, ``steps`` (the gold step lines) and ``value``.
    """

    name: ClassVar[str] = "arithmetic"
    min_ops: int = 2
    max_ops: int = 4
    max_operand: int = 9
    ops: str = "+-*"
    test_fraction: float = 0.2

    def __post_init__(self) -> None:
        if not 1 <= self.min_ops <= self.max_ops <= 20:
            raise TaskError(
                "arithmetic: need 1 <= min_ops <= max_ops <= 20, "
                f"got {self.min_ops}, {self.max_ops}"
            )
        if self.max_operand < 1 or not self.ops or set(self.ops) - set("+-*"):
            raise TaskError(f"arithmetic: ops must be a subset of '+-*', got {self.ops!r}")

    def solution_steps(self, tokens: Sequence[int | str]) -> list[str]:
        """The canonical reduction: leftmost ``*`` first, else leftmost ``+``/``-``."""
        toks: list[int | str] = list(tokens)
        steps: list[str] = []
        while len(toks) > 1:
            ops = [(i, toks[i]) for i in range(1, len(toks), 2)]
            i = next((i for i, op in ops if op == "*"), ops[0][0])
            a, op, b = int(toks[i - 1]), str(toks[i]), int(toks[i + 1])
            c = _apply(a, op, b)
            steps.append(f"{a}{op}{b}={c}")
            toks[i - 1 : i + 2] = [c]
        return steps

    def make(self, tokens: Sequence[int | str]) -> Example:
        """An :class:`Example` for a flat token list such as ``[3, "+", 4, "*", 2]``."""
        expression = "".join(str(t) for t in tokens)
        steps = self.solution_steps(tokens)
        value = int(_value(tokens))
        answer = "\n".join([*steps, f"Answer: {value}"])
        meta = {"expression": expression, "tokens": list(tokens), "steps": steps, "value": value}
        return Example(self.name, f"{expression}=", answer, meta)

    def generate(self, n: int, seed: int = 0, split: Split = "train") -> list[Example]:
        """``n`` expressions from the split (expressions split by a stable hash)."""
        rng = split_rng(self.name, seed, split)
        want_test = split == "test"
        out: list[Example] = []
        while len(out) < check_n(n):
            k = rng.randint(self.min_ops, self.max_ops)
            tokens: list[int | str] = [rng.randint(1, self.max_operand)]
            for _ in range(k):
                tokens += [rng.choice(self.ops), rng.randint(1, self.max_operand)]
            if in_test_split(tuple(tokens), self.test_fraction) == want_test:
                out.append(self.make(tokens))
        return out

    def final_answer(self, completion: str | Sequence[Mapping[str, Any]]) -> int | None:
        """The integer on the last ``Answer: N`` line, or ``None``."""
        found = None
        for line in completion_text(completion).splitlines():
            m = _ANSWER.match(line)
            if m:
                found = int(m.group(1))
        return found

    def verify(self, example: Example, completion: str | Sequence[Mapping[str, Any]]) -> bool:
        """Outcome check: the final ``Answer:`` equals the expression's value (steps not judged)."""
        return self.final_answer(completion) == int(example.meta["value"])

    def check_steps(
        self, example: Example, completion: str | Sequence[Mapping[str, Any]]
    ) -> list[bool]:
        """One verdict per step line of ``completion`` (``Answer:`` and blank lines skipped).

        A step ``a op b = c`` is correct iff ``a op b == c`` exactly and ``a op b`` occurs in
        the current expression where replacing it by ``c`` keeps the expression's value (so
        ``3+4*2`` -> ``3+4=7`` is rejected: true arithmetic, illegal reduction). The current
        expression starts as the problem and is rewritten by each correct step. As in
        process-reward labels, a step after the first wrong one is wrong: it builds on an
        error. A non-empty line that is not a step is a wrong step.
        """
        tokens: list[int | str] = list(example.meta["tokens"])
        target = _value(tokens)
        verdicts: list[bool] = []
        ok = True
        for line in completion_text(completion).splitlines():
            if not line.strip() or _ANSWER.match(line):
                continue
            step = parse_step(line) if ok else None
            ok = False
            if step is not None:
                a, op, b, c = step
                if _apply(a, op, b) == c:
                    for i in range(1, len(tokens), 2):
                        if (int(tokens[i - 1]), tokens[i], int(tokens[i + 1])) != (a, op, b):
                            continue
                        rewritten = [*tokens[: i - 1], c, *tokens[i + 2 :]]
                        if _value(rewritten) == target:
                            tokens, ok = rewritten, True
                            break
            verdicts.append(ok)
        return verdicts

    def verify_process(
        self, example: Example, completion: str | Sequence[Mapping[str, Any]]
    ) -> bool:
        """Strict check: every step correct, all steps taken, and the final answer right."""
        verdicts = self.check_steps(example, completion)
        return (
            bool(verdicts)
            and all(verdicts)
            and self.verify(example, completion)
            and len(verdicts) == len(example.meta["steps"])
        )
