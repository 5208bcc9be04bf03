"""Countdown: reach a target from given numbers with + - * / and parentheses.

The verifier parses the expression itself (a tokenizer and a recursive-descent parser over
exact :class:`fractions.Fraction` arithmetic) and never calls ``eval``: completions come from
models being trained against this reward, and a reward that executes model output is both a
security hole and hackable. Rules, as in the TinyZero / Stream-of-Search variants RL papers
use: every given number exactly once, only the four operations, every division exact.

The default instance space (3 numbers from 1–9, target the value of a random valid
expression) is small enough that a ~2M-parameter model learns it on a CPU in minutes, and big
enough (thousands of (numbers, target) pairs) that the held-out split tests arithmetic rather
than recall.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Literal

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

__all__ = ["Countdown", "ExpressionError", "evaluate_expression", "search_trace", "solve"]

_OPS = "+-*/"
_TOKEN = re.compile(r"\s*(?:(\d+)|([-+*/()]))")
_MAX_EXPR_CHARS = 256  # bounds the parser's recursion depth on adversarial completions
_MAX_LISTED = 64  # solutions kept in ``meta`` (3 numbers have at most a few dozen)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_INNER = re.compile(r"\((\d+[-+*/]\d+)\)")  # the innermost operation of a solve() string


class ExpressionError(ValueError):
    """A completion that is not a well-formed exact expression (the verifier returns False)."""


def _tokenize(text: str) -> list[str]:
    if len(text) > _MAX_EXPR_CHARS:
        raise ExpressionError(f"expression longer than {_MAX_EXPR_CHARS} characters")
    tokens: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ExpressionError(f"unexpected character {text[pos:].lstrip()[:1]!r}")
        tokens.append(m.group(1) or m.group(2))
        pos = m.end()
    if not tokens:
        raise ExpressionError("empty expression")
    return tokens


class _Parser:
    """Recursive descent: expr := term (('+'|'-') term)*; term := atom (('*'|'/') atom)*;
    atom := INT | '(' expr ')'. No unary minus: Countdown has none, and allowing it would let
    a policy negate its way to targets."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.numbers: list[int] = []

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise ExpressionError("expression ends early")
        self.pos += 1
        return tok

    def parse(self) -> Fraction:
        value = self.expr()
        if self.peek() is not None:
            raise ExpressionError(f"unexpected token {self.peek()!r}")
        return value

    def expr(self) -> Fraction:
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self) -> Fraction:
        value = self.atom()
        while self.peek() in ("*", "/"):
            op = self.take()
            rhs = self.atom()
            if op == "*":
                value = value * rhs
            else:
                if rhs == 0:
                    raise ExpressionError("division by zero")
                value = value / rhs
                if value.denominator != 1:
                    raise ExpressionError("division is not exact")
        return value

    def atom(self) -> Fraction:
        tok = self.take()
        if tok == "(":
            value = self.expr()
            if self.take() != ")":
                raise ExpressionError("missing ')'")
            return value
        if tok.isdigit():
            self.numbers.append(int(tok))
            return Fraction(int(tok))
        raise ExpressionError(f"unexpected token {tok!r}")


def evaluate_expression(text: str) -> tuple[Fraction, list[int]]:
    """Value of an arithmetic expression and the numbers it uses, in order of appearance.

    Raises :class:`ExpressionError` for anything malformed, a division by zero or a
    non-exact division (Countdown allows only exact ones, at every step).
    """
    parser = _Parser(_tokenize(text))
    return parser.parse(), parser.numbers


def _combine(a: Fraction, b: Fraction, op: str) -> Fraction | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    q = a / b
    return q if q.denominator == 1 else None


def solve(numbers: Sequence[int], target: int, limit: int | None = None) -> list[str]:
    """All expressions (up to ``limit``) using each number once that evaluate to ``target``.

    Exhaustive pairwise combination, the standard Countdown / 24-game search; each
    intermediate is parenthesised, so every returned string has one fixed shape, e.g.
    ``(7*4)+2``, and the operands of ``+`` and ``*`` are written larger first, so commuted
    duplicates are not listed. Order is deterministic (numbers as given, ``+-*/``).
    """
    found: list[str] = []
    seen: set[str] = set()

    def rec(items: list[tuple[Fraction, str]]) -> bool:
        if len(items) == 1:
            value, text = items[0]
            if value == target and text not in seen:
                seen.add(text)
                found.append(text)
                return limit is not None and len(found) >= limit
            return False
        for i in range(len(items)):
            for j in range(len(items)):
                if i == j:
                    continue
                rest = [items[k] for k in range(len(items)) if k not in (i, j)]
                for op in _OPS:
                    # + and * commute: write the larger operand first, so each solution
                    # has one spelling and a model's probability mass is not split.
                    if op in "+*" and (items[i][0], items[i][1]) < (items[j][0], items[j][1]):
                        continue
                    combined = _combine(items[i][0], items[j][0], op)
                    if combined is None:
                        continue
                    text = f"{items[i][1]}{op}{items[j][1]}"
                    if rest:
                        text = f"({text})"
                    if rec([(combined, text), *rest]):
                        return True
        return False

    rec([(Fraction(x), str(x)) for x in numbers])
    return found


def search_trace(numbers: Sequence[int], target: int) -> str | None:
    """A systematic search written out as a scratchpad, ending in a solution (or None).

    Every three-number expression is ``(x op1 y) op2 z`` for one number ``z`` held back, so a
    complete search visits each distinct ``z`` (ascending, a header line ``z:``), writes each
    pair result ``x op1 y = r`` (``x >= y``; ``+ * - /``, exact divisions only) and stops at the
    first ``r`` from which one operation with ``z`` reaches the target, writing that
    expression as the last line::

        Make 30 with 2 4 7.  ->  2:
                                 7+4=11
                                 7*4=28
                                 (7*4)+2

    Each line is a small local computation (a pair's result, then whether one operation with
    ``z`` hits the target), which a tiny model learns reliably; choosing a whole expression in
    one shot is the hard part it does not. Negative intermediates and non-integer quotients
    are never needed (``z - (y - x)`` is ``(x - y) + z`` and so on), so the search is
    complete: it returns None only when no solution exists. Three numbers only.
    """
    nums = sorted(int(v) for v in numbers)
    if len(nums) != 3:
        raise TaskError(f"countdown: the search trace is for three numbers, got {len(nums)}")
    lines: list[str] = []
    for i, z in enumerate(nums):
        if i and nums[i - 1] == z:
            continue
        x, y = max(nums[:i] + nums[i + 1 :]), min(nums[:i] + nums[i + 1 :])
        lines.append(f"{z}:")
        for op1 in "+*-/":
            r = _combine(Fraction(x), Fraction(y), op1)
            if r is None:
                continue
            pair = f"{x}{op1}{y}"
            lines.append(f"{pair}={r}")
            candidates = [
                (r + z, f"({pair})+{z}"),
                (r - z, f"({pair})-{z}"),
                (z - r, f"{z}-({pair})"),
                (r * z, f"({pair})*{z}"),
                (_combine(r, Fraction(z), "/"), f"({pair})/{z}"),
                (_combine(Fraction(z), r, "/"), f"{z}/({pair})"),
            ]
            for value, text in candidates:
                if value is not None and value == target:
                    lines.append(text)
                    return "\n".join(lines)
    return None


@dataclass(frozen=True)
class Countdown(Task):
    """Countdown with ``n_numbers`` numbers drawn from ``1..max_number``.

    Prompt ``"Make 30 with 2 4 7."`` (numbers sorted, so the instance is the multiset);
    ``meta`` has ``numbers``, ``target``, ``n_solutions`` and ``solutions`` (each in the fixed
    shape of :func:`solve`, such as ``(7*4)+2``). The gold answer depends on
    ``answer_format``:

    - ``"steps"`` (default): the innermost operation and its value, then the expression,
      ``"7*4=28\n(7*4)+2"``. Writing the intermediate value out lets a tiny model choose the
      last operation from a number it can see instead of one it must compute in its head; in
      our runs this moved held-out accuracy of the default tiny preset from 41% to 51%.
    - ``"expression"``: the expression alone, ``"(7*4)+2"``.
    - ``"search"``: :func:`search_trace`, a complete written-out search (three numbers only);
      about 4x the tokens of ``"steps"``, too slow to train in the toy world's budget.

    The verifier reads the last line (or an ``<answer>`` tag), so all three are scored alike.
    With ``solution_choice="random"`` (default) each generated example draws its gold solution
    among all solutions: a model trained on it learns the whole solution set (a diverse base
    policy, which RL methods want); training on one fixed solution per instance plateaued at
    30-35% while memorising. Targets are values of random valid expressions that are
    positive integers up to ``max_target``, so every instance is solvable. Train and test
    partition the (numbers, target) pairs by a stable hash; ``subproblems`` adds two-number
    instances to the training split only.
    """

    name: ClassVar[str] = "countdown"
    n_numbers: int = 3
    max_number: int = 9
    max_target: int = 100
    test_fraction: float = 0.2
    solution_choice: Literal["random", "first"] = "random"
    #: ``"search"``: the gold answer is :func:`search_trace` (a scratchpad ending in the
    #: expression; three numbers only). ``"expression"``: the expression alone.
    answer_format: Literal["steps", "search", "expression"] = "steps"
    #: Fraction of *training* examples posed with one number fewer (two-number subproblems
    #: that teach the arithmetic table the full problems compose). Off by default: with 25%
    #: the tiny model reached 31% on 3-number test instances against 37% without.
    subproblems: float = 0.0

    def __post_init__(self) -> None:
        if not 2 <= self.n_numbers <= 6:
            raise TaskError(f"countdown: n_numbers must be in 2..6, got {self.n_numbers}")
        if self.max_number < 1 or self.max_target < 1:
            raise TaskError("countdown: max_number and max_target must be >= 1")
        if not 0.0 < self.test_fraction < 1.0:
            raise TaskError(f"countdown: test_fraction must be in (0, 1), got {self.test_fraction}")
        if not 0.0 <= self.subproblems < 1.0:
            raise TaskError(f"countdown: subproblems must be in [0, 1), got {self.subproblems}")
        if self.answer_format not in ("steps", "search", "expression"):
            raise TaskError(
                "countdown: answer_format must be 'steps', 'search' or 'expression', "
                f"got {self.answer_format!r}"
            )
        if self.solution_choice not in ("random", "first"):
            raise TaskError(
                "countdown: solution_choice must be 'random' or 'first', "
                f"got {self.solution_choice!r}"
            )

    def prompt(self, numbers: Sequence[int], target: int) -> str:
        """The prompt text for an instance (public so callers can pose their own)."""
        return f"Make {target} with {' '.join(str(x) for x in numbers)}."

    def make(self, numbers: Sequence[int], target: int, rng: Any = None) -> Example:
        """An :class:`Example` for given numbers and target (raises if unsolvable).

        The gold answer is one of the solutions: drawn with ``rng`` when
        ``solution_choice="random"`` and an ``rng`` is given, else the first in search order.
        """
        nums = sorted(int(x) for x in numbers)
        solutions = solve(nums, target)
        if not solutions:
            raise TaskError(f"countdown: {target} cannot be made from {nums}")
        meta = {
            "numbers": nums,
            "target": int(target),
            "n_solutions": len(solutions),
            "solutions": solutions[:_MAX_LISTED],
        }
        if self._search:
            answer = search_trace(nums, target) or solutions[0]
        else:
            use_rng = rng is not None and self.solution_choice == "random"
            answer = self._format(rng.choice(solutions) if use_rng else solutions[0])
        return Example(self.name, self.prompt(nums, target), answer, meta)

    def _format(self, solution: str) -> str:
        """The gold answer for one solution: with ``answer_format="steps"`` the first
        (innermost) operation and its value on a line of their own, then the expression."""
        if self.answer_format != "steps":
            return solution
        inner = _INNER.search(solution)
        if inner is None:  # two numbers: the expression is a single step
            return solution
        value, _ = evaluate_expression(inner.group(1))
        return f"{inner.group(1)}={value}\n{solution}"

    @property
    def _search(self) -> bool:
        return self.answer_format == "search" and self.n_numbers == 3

    def _random_target(self, nums: list[int], rng: Any) -> int | None:
        items = [Fraction(x) for x in nums]
        rng.shuffle(items)
        while len(items) > 1:
            a, b = items.pop(), items.pop()
            value = _combine(a, b, rng.choice(_OPS))
            if value is None:
                return None
            items.insert(rng.randrange(len(items) + 1), value)
        value = items[0]
        if value.denominator != 1 or not 1 <= value <= self.max_target:
            return None
        return int(value)

    def generate(self, n: int, seed: int = 0, split: Split = "train") -> list[Example]:
        """``n`` solvable instances from the given split (instances may repeat in a big ``n``)."""
        rng = split_rng(self.name, seed, split)
        want_test = split == "test"
        out: list[Example] = []
        cache: dict[tuple[tuple[int, ...], int], Example] = {}
        attempts = 0
        while len(out) < check_n(n):
            attempts += 1
            if attempts > 1000 * (n + 10):
                raise TaskError("countdown: could not generate enough instances; widen the ranges")
            k = self.n_numbers
            if not want_test and k > 2 and rng.random() < self.subproblems:
                k -= 1
            nums = sorted(rng.randint(1, self.max_number) for _ in range(k))
            target = self._random_target(nums, rng)
            if target is None:
                continue
            key = (tuple(nums), target)
            if in_test_split(key, self.test_fraction) != want_test:
                continue
            if key not in cache:
                cache[key] = self.make(nums, target)
            ex = cache[key]
            if self.solution_choice == "random" and not self._search:
                answer = self._format(rng.choice(ex.meta["solutions"]))
                ex = Example(ex.task, ex.prompt, answer, ex.meta)
            out.append(ex)
        return out

    def verify(self, example: Example, completion: str | Sequence[Mapping[str, Any]]) -> bool:
        """True iff the completion's expression uses exactly the given numbers and hits the target.

        Accepted shapes: a bare expression, ``expr = target``, or an ``<answer>expr</answer>``
        tag anywhere (the last one wins); otherwise the last non-empty line is the expression.
        """
        text = completion_text(completion)
        tags = _ANSWER_TAG.findall(text)
        if tags:
            candidate = tags[-1]
        else:
            lines = [line for line in text.strip().splitlines() if line.strip()]
            if not lines:
                return False
            candidate = lines[-1]
        lhs, eq, rhs = candidate.partition("=")
        target = int(example.meta["target"])
        if eq and rhs.strip() != str(target):
            return False
        try:
            value, used = evaluate_expression(lhs)
        except ExpressionError:
            return False
        return value == target and Counter(used) == Counter(int(x) for x in example.meta["numbers"])
