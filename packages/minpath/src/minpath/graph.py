r"""The Typed Reasoning Graph of a chain of thought and its Minimal Dependency Path (MinPath).

A raw CoT :math:`s_1 \dots s_n` is cut into steps (:func:`segment`), each step gets a type
:math:`t_i \in` {computation, verification, planning, backtracking, restatement, conclusion}
(:class:`RuleTyper`, or :class:`ModelTyper` through any :class:`paperstack.llm.ChatModel`), and
value tracking turns the steps into a DAG :math:`G = (V, E)` with :math:`V = \{Q, 1..n\}` (``Q``
is the question, the source of its own numbers):

- a step *defines* a value when it computes one (computation, backtracking): each equation
  ``expression = c`` of the step (:func:`parse_equations`: several operands, currency,
  decimals, percents, fractions, word operators, as natural chains of thought write them)
  defines ``c`` under the quantity key of its expression (operand order ignored for a chain of
  one commutative operation); values are exact fractions;
- :math:`j \to i \in E` when step :math:`i` consumes a value whose **latest valid definition**
  before :math:`i` is step :math:`j` (``Q`` when no step defines it and the question holds it);
- a backtracking step :math:`b` that redefines key ``k`` with a new value *invalidates* every
  earlier definition of ``k`` with another value, and every step that depends on one
  (:math:`\mathrm{desc}_G`): invalid steps never produce for later consumers;
- a verification step re-derives a value that is already defined: it consumes its operands and
  is an alternative (duplicate) producer of that value, never a new definition.

The Minimal Dependency Path of the conclusion :math:`a` is the min-cost AND-OR closure

.. math::

    \mathrm{MinPath}(a) = \{a\} \cup \bigcup_{v \in \mathrm{uses}(a)} \mathrm{close}(p^*(v)),
    \qquad p^*(v) = \arg\min_{p \in P(v)} \Big( c_p + \sum_{u \in \mathrm{uses}(p)}
    \mathrm{cost}(p^*(u)) \Big)

where :math:`P(v)` are the valid producers of value :math:`v` for that consumer (its latest
valid definition and every valid duplicate producer of the same quantity before the consumer),
:math:`c_p` the token cost of step :math:`p` (``count_tokens`` of its rendering), and
:math:`\mathrm{close}(p)` is :math:`p` with the closure of its own chosen producers: the
ancestors of the conclusion through the cheapest producer per value (greedy, by dynamic
programming over the topological order; shared sub-paths are counted once per use, the usual
tree relaxation of the AND-OR problem). Every consumer-less verification, abandoned branch,
planning step and restatement falls outside it. :func:`render` writes the kept steps in their
original order, stripped of discourse cues (``Wait,``, ``Check:``); :func:`derivable` re-executes
the kept arithmetic; :func:`compress` falls back to the original CoT (and records why) when the
compressed one no longer derives the answer.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import networkx as nx

from minpath.errors import CycleError, MinPathError

__all__ = [
    "MAX_DIGITS",
    "MAX_STEPS",
    "QUESTION",
    "STEP_TYPES",
    "UNIT_CONSTANTS",
    "Compression",
    "Equation",
    "ModelTyper",
    "RuleTyper",
    "Step",
    "build_graph",
    "check_number_sizes",
    "compress",
    "cot_answer",
    "derivable",
    "final_answer",
    "min_path",
    "parse_equation",
    "parse_equations",
    "parse_number",
    "render",
    "segment",
]

#: The question's node in every graph (the source of the numbers the question states).
QUESTION = "Q"
STEP_TYPES = (
    "computation",
    "verification",
    "planning",
    "backtracking",
    "restatement",
    "conclusion",
)

#: Longest number (in digits) a question, CoT or answer may hold. Python refuses to read
#: integers of more than 4300 digits (a ValueError traceback before, issue #46) and the
#: arithmetic of one is no chain-of-thought step; 1000 digits is far beyond any real CoT.
MAX_DIGITS = 1000
#: Most steps one CoT may have. The walk is iterative, but the kept sets grow with the chain
#: (a 5000-step chain, each step using the one before, takes about 8 s; the cost is quadratic),
#: so a longer CoT is refused instead of running for minutes.
MAX_STEPS = 10_000
_TOO_LONG = re.compile(rf"\d{{{MAX_DIGITS + 1},}}")

_BACKTRACK = re.compile(r"^\s*(?:Wait|Actually|Oops|Hmm, no|No,|Correction)\b|\bmistake\b", re.I)
_VERIFY = re.compile(
    r"^\s*(?:Check|Verify|Double-check|Let me (?:double-)?check|Let me (?:re)?verify|"
    r"Let's (?:double-)?check|Let's verify|To check|To verify|Substitut)",
    re.I,
)
_PLAN = re.compile(r"^\s*(?:First|We need|Let's|Let us|Plan|Next|Then|Now)\b", re.I)
_CUE = re.compile(
    r"^\s*(?:Wait|Actually|Oops|Correction|Check|Verify|Double-check|Let me check|So(?!\s+far)|"
    r"Then|Now)\b[,:]?\s*",
    re.I,
)


def check_number_sizes(text: str, what: str) -> None:
    """Refuse ``text`` if it holds a number longer than :data:`MAX_DIGITS` digits, in one
    :class:`MinPathError` naming ``what`` and the length."""
    m = _TOO_LONG.search(text)
    if m is not None:
        raise MinPathError(
            f"{what}: a {len(m.group())}-digit number (numbers are limited to {MAX_DIGITS} digits)"
        )


# --- numbers and equations as natural chains of thought write them ------------------------------

#: A number as written: optional ``$``, thousands commas, decimals, a percent sign. Signs are
#: left to the expression reader (``8-2`` is a subtraction, not ``8`` and ``-2``).
_NUM = re.compile(
    r"(?<![\w.,])\$?\s?(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?:\.\d+)?(?:\s?%|\s+percent\b)?"
)
#: Explicit final-answer phrases: ``Answer: N``, ``\boxed{N}``, ``final answer is N``,
#: ``the answer is N``, GSM8K's ``#### N`` (N may carry a sign, ``$``, commas, decimals, ``%``;
#: markdown bold around the phrase, ``**Answer:** N``, is read too).
_ANSWER = re.compile(
    r"(?:\bAnswer\s*(?:is|:)\s*\**\s*(?:\\?\$\s*)?|\\boxed\{\s*|\bfinal answer\s*(?:is|:)?\s*"
    r"\**\s*(?:\\?\$\s*)?|####\s*)"
    r"(?P<num>-?\s?\\?\$?\s?\d[\d,]*(?:\.\d+)?\s?%?)",
    re.IGNORECASE,
)
#: What opens a concluding sentence when a CoT states no explicit answer phrase
#: ("So she has 72 left.", "Altogether she sold 48 + 24 = 72 clips.").
_CONCLUDE = re.compile(
    r"^\s*(?:So|Therefore|Thus|Hence|In total|Altogether|All together|Overall|That means|"
    r"This means|In the end|Finally)\b",
    re.I,
)
#: Unit constants a CoT may use without the question stating them (minutes per hour, days per
#: week, ...): such an operand needs no producer, but only in a step that names one of its
#: units (24 is hours a day in "24 * 3 = 72 hours", not in "48 + 24 = 72 clips").
UNIT_CONSTANTS: dict[Fraction, re.Pattern[str]] = {
    Fraction(v): re.compile(rf"\b(?:{units})", re.I)
    for v, units in (
        (7, "days?|weeks?|weekly"),
        (12, "months?|years?|dozens?|inch|inches|feet|foot|hours?"),
        (24, "hours?|days?|daily"),
        (52, "weeks?|years?"),
        (60, "minutes?|seconds?|hours?|mph"),
        (100, "percent|%|cents?|centimet|cm|meters?|metres?"),
        (365, "days?|years?"),
        (1000, "grams?|kilo|kg|milli|ml|meters?|metres?|km|litres?|liters?"),
    )
}


def _unit_constant(value: Fraction, text: str) -> bool:
    """Whether ``value`` is a unit constant whose unit ``text`` names."""
    units = UNIT_CONSTANTS.get(value)
    return units is not None and units.search(text) is not None


#: Number words a question may state instead of digits (its numbers include their values).
_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
    "ninety": 90, "hundred": 100, "thousand": 1000, "dozen": 12, "half": 2, "halves": 2,
    "twice": 2, "double": 2, "pair": 2, "triple": 3, "thrice": 3, "third": 3, "quarter": 4,
}  # fmt: skip
_WORD_RE = re.compile(r"\b(" + "|".join(_WORDS) + r")s?\b", re.I)
#: A step is a sentence: a line is cut after ``.``/``!``/``?`` followed by a space (``3.5``
#: and ``$12.50`` hold no space), except after the abbreviations below.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ABBREV = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|St|vs|e\.g|i\.e|approx|etc|No)\.$", re.I)
_LATEX = (
    (re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}"), r"((\1)/(\2))"),
    (re.compile(r"\\(?:times|cdot)"), " * "),
    (re.compile(r"\\div"), " / "),
    (re.compile(r"\\\$"), "$"),
    (re.compile(r"\\[()\[\]]|\\left|\\right|\\[,!;]"), " "),
    (re.compile(r"<<[^<>]*>>"), " "),  # GSM8K calculator annotations: 48/2 = <<48/2=24>>24
)
#: Word operators rewritten to symbols before an expression is read. ``Ⓒa/b`` is a constant
#: the words imply (half of N -> 1/2 * N): part of the arithmetic, but no operand to produce.
_C = "\u24b8"
_START = r"(?=[-$\d(])"
_WORD_OPS = (
    (re.compile(r",?\s*\b(?:which|that)\s+(?:is|makes|gives|equals|comes to)\b", re.I), " = "),
    (re.compile(rf"\bhalf\s+(?:of\s+)?{_START}", re.I), f"{_C}1/2 * "),
    (re.compile(rf"\b(?:twice|double)\s+(?:as\s+(?:many|much)\s+as\s+)?{_START}", re.I),
     f"{_C}2 * "),
    (re.compile(rf"\b(?:triple|thrice)\s+{_START}", re.I), f"{_C}3 * "),
    (re.compile(rf"\b(?:a|one)\s+third\s+of\s+{_START}", re.I), f"{_C}1/3 * "),
    (re.compile(rf"\b(?:a|one)\s+quarter\s+of\s+{_START}", re.I), f"{_C}1/4 * "),
    (re.compile(r"\btimes\s+as\s+(?:many|much)\s+as\b", re.I), " * "),
    (re.compile(r"\bmultiplied\s+by\b|\btimes\b", re.I), " * "),
    (re.compile(r"\bdivided\s+by\b", re.I), " / "),
    (re.compile(r"\bplus\b", re.I), " + "),
    (re.compile(r"\bminus\b", re.I), " - "),
    (re.compile(rf"(?<=[\d%)])\s+of\s+{_START}", re.I), " * "),
    (re.compile(rf"(?<=\d)\s*[x×·⋅]\s*{_START}"), " * "),
    (re.compile(r"[÷]"), " / "),
    (re.compile(r"[−–]"), "-"),
    (re.compile(r"\b(?:equals|is equal to|makes|gives|comes to|is|are|was|were)\b", re.I),
     " \u225f "),
)  # fmt: skip
_TOKEN = re.compile(
    rf"(?P<const>{_C}\d+(?:/\d+)?)"
    r"|(?P<num>\$?\s?(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?:\.\d+)?(?:\s?%)?)"
    r"|(?P<op>[-+*/])|(?P<lp>\()|(?P<rp>\))|(?P<eq>=|\u225f)"
    r"|(?P<word>[A-Za-z][A-Za-z']*)|(?P<other>\S)"
)


def _number(text: str) -> tuple[Fraction, bool]:
    """The value of a number as written (``$1,200.50`` -> 2401/2) and whether it is a percent
    (whose value inside an expression is ``n/100``)."""
    if text.isdigit():  # the common case, ten times faster than parsing a Fraction string
        check_number_sizes(text, "a number")
        return Fraction(int(text)), False
    t = re.sub(r"[\\$,\s]|percent", "", text)
    pct = t.endswith("%")
    t = t.rstrip("%")
    check_number_sizes(t, "a number")
    return Fraction(t), pct


def _plain(v: Fraction) -> int | Fraction:
    """An integral value as an int (the toy world's answers are ints), else the fraction."""
    return int(v) if v.denominator == 1 else v


@dataclass(frozen=True)
class Equation:
    """One arithmetic statement of a step, ``expression = value``: the numbers the expression
    consumes (``operands``; constants implied by words such as *half* are not operands), its
    operator skeleton, its own value (None where it divides by zero), the stated result and
    the decimal places the result is written with."""

    operands: tuple[Fraction, ...]
    skeleton: str
    computed: Fraction | None
    value: Fraction
    places: int = 0

    @property
    def key(self) -> tuple[Any, ...]:
        """The quantity computed: a chain of one commutative operation ignores operand order
        (``3 + 4 + 5`` is ``5 + 4 + 3``); anything else is the skeleton with its operands."""
        ops = set(self.skeleton) - set("n")
        if len(ops) == 1 and ops <= {"+", "*"}:
            return (ops.pop(), *sorted(self.operands))
        return (self.skeleton, *self.operands)

    def holds(self) -> bool:
        """Whether the stated value is the expression's, to the precision it is written with
        (``10/3 = 3.33`` holds; ``10/3 = 3`` does not)."""
        if self.computed is None:
            return False
        if self.computed == self.value:
            return True
        tolerance = Fraction(1, 2 * 10**self.places)
        return self.places > 0 and abs(self.computed - self.value) <= tolerance


class _NotExpr(Exception):
    """The tokens are not one whole arithmetic expression."""


class _Expr:
    """Recursive descent over expression tokens: ``+ -`` over ``* /`` over unary minus and
    parentheses. :meth:`parse` raises :class:`_NotExpr` unless every token is consumed."""

    def __init__(self, items: Sequence[tuple[str, Any]]) -> None:
        self.items, self.i = list(items), 0

    def parse(self) -> Fraction | None:
        v = self._sum()
        if self.i != len(self.items):
            raise _NotExpr
        return v

    def _peek(self) -> tuple[str, Any] | None:
        return self.items[self.i] if self.i < len(self.items) else None

    def _sum(self) -> Fraction | None:
        v = self._product()
        while (t := self._peek()) is not None and t[0] == "op" and t[1] in "+-":
            self.i += 1
            w = self._product()
            v = None if v is None or w is None else v + w if t[1] == "+" else v - w
        return v

    def _product(self) -> Fraction | None:
        v = self._unary()
        while (t := self._peek()) is not None and t[0] == "op" and t[1] in "*/":
            self.i += 1
            w = self._unary()
            if v is None or w is None or (t[1] == "/" and w == 0):
                v = None
            else:
                v = v * w if t[1] == "*" else v / w
        return v

    def _unary(self) -> Fraction | None:
        t = self._peek()
        if t == ("op", "-"):
            self.i += 1
            v = self._unary()
            return None if v is None else -v
        if t is not None and t[0] == "lp":
            self.i += 1
            v = self._sum()
            if self._peek() != ("rp", ")"):
                raise _NotExpr
            self.i += 1
            return v
        if t is not None and t[0] in ("num", "const"):
            self.i += 1
            return t[1]  # type: ignore[no-any-return]
        raise _NotExpr


_WORDY = re.compile(r"[A-Za-z\\<]")


def _normalise(text: str) -> str:
    """LaTeX, calculator annotations and word operators rewritten as plain arithmetic."""
    if _WORDY.search(text) is None:  # a bare equation (the toy's): only symbol spellings
        return text.translate(_SYMBOLS)
    for pattern, repl in _LATEX:
        text = pattern.sub(repl, text)
    for pattern, repl in _WORD_OPS:
        text = pattern.sub(repl, text)
    return text


_SYMBOLS = str.maketrans({"×": "*", "·": "*", "⋅": "*", "÷": "/", "−": "-", "–": "-"})


def _tokens(text: str) -> list[tuple[str, Any, str]]:
    """``(kind, value, text)`` tokens of a normalised sentence. Up to two unit words right after
    a number and before an operator or ``=`` (``5 apples + 3 apples = 8``) are dropped."""
    out: list[tuple[str, Any, str]] = []
    for m in _TOKEN.finditer(text):
        kind, raw = m.lastgroup or "other", m.group()
        if kind == "num":
            value, pct = _number(raw)
            out.append(("num", value / 100 if pct else value, raw))
        elif kind == "const":
            out.append(("const", Fraction(raw[1:]), raw))
        else:
            out.append((kind, raw, raw))
    kept: list[tuple[str, Any, str]] = []
    i = 0
    while i < len(out):
        if out[i][0] == "word" and kept and kept[-1][0] in ("num", "rp"):
            j = i
            while j < len(out) and j - i < 3 and out[j][0] == "word":
                j += 1
            if j - i <= 2 and j < len(out) and (out[j][0] == "op" or out[j][1] == "="):
                i = j
                continue
        kept.append(out[i])
        i += 1
    # a minus where no operand precedes it is the sign of the number after it (``-2+1``)
    signed: list[tuple[str, Any, str]] = []
    for j, tok in enumerate(kept):
        if (
            signed
            and signed[-1][:2] == ("op", "-")
            and tok[0] == "num"
            and (len(signed) == 1 or signed[-2][0] not in ("num", "const", "rp"))
            and (j < 2 or kept[j - 2][0] != "eq")
        ):
            signed[-1] = ("num", -tok[1], "-" + tok[2])
            continue
        signed.append(tok)
    return signed


def _places(raw: str) -> int:
    m = re.search(r"\.(\d+)", raw)
    return len(m.group(1)) if m else 0


def parse_equations(text: str) -> list[Equation]:
    """Every ``expression = value`` of a sentence, in order. The expression may hold several
    operands and operators, parentheses, currency, decimals, percents (``25% of 80``), fractions
    (``3/4 of 20``, ``\\frac{3}{4}``) and word operators (plus, minus, times, divided by, half
    of, twice); ``is``/``equals``/``makes`` read as ``=`` after an expression with at least one
    operator. Truth is not checked here (:meth:`Equation.holds`)."""
    check_number_sizes(text, "an equation")
    toks = _tokens(_normalise(text))
    found: list[Equation] = []
    for k, (kind, _, _) in enumerate(toks):
        if kind != "eq":
            continue
        rhs = toks[k + 1 : k + 3]
        if rhs and rhs[0][0] == "num":
            value, places = rhs[0][1], _places(rhs[0][2])
        elif len(rhs) == 2 and rhs[0][:2] == ("op", "-") and rhs[1][0] == "num":
            value, places = -rhs[1][1], _places(rhs[1][2])
        else:
            continue
        start = k
        while start > 0 and toks[start - 1][0] in ("num", "const", "op", "lp", "rp"):
            start -= 1
        items = [(t, v) for t, v, _ in toks[start:k]]
        computed: Fraction | None = None
        while items:  # a run may begin with a stray operator or parenthesis: trim the left
            try:
                computed = _Expr(items).parse()
                break
            except _NotExpr:
                items = items[1:]
        binary = sum(
            1
            for a, b in itertools.pairwise(items)
            if b[0] == "op" and a[0] in ("num", "const", "rp")
        )
        if not items or binary == 0:
            continue
        skeleton = "".join(
            "n" if t == "num" else f"c{v}" if t == "const" else str(v) for t, v in items
        )
        operands = tuple(v for t, v in items if t == "num")
        found.append(Equation(operands, skeleton, computed, value, places))
    return found


def parse_equation(text: str) -> Equation | None:
    """The first equation of ``text`` (:func:`parse_equations`), or None."""
    found = parse_equations(text)
    return found[0] if found else None


def final_answer(text: str) -> int | Fraction | None:
    """The number of the last explicit final-answer phrase in ``text`` (``Answer: N``,
    ``\\boxed{N}``, ``the final answer is N``, ``the answer is N``, ``#### N``), as written
    (``$12.50`` -> 25/2, ``25%`` -> 25); None without one."""
    found = _answer_phrase(text)
    return None if found is None else _plain(found[0])


def _answer_phrase(text: str) -> tuple[Fraction, bool] | None:
    found = None
    for m in _ANSWER.finditer(text):
        check_number_sizes(m.group("num"), "a final answer")
        found = _number(m.group("num").replace(" ", ""))
    return found


_PLAIN_NUMBER = re.compile(r"(-)?\s*(\$?\s?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\s?%?)")


def cot_answer(cot: str) -> int | Fraction | None:
    """The answer a CoT concludes with: its last explicit final-answer phrase, else the
    concluding last step's number (:func:`segment`), as written; None without either."""
    answers = [s.answer for s in segment(cot) if s.answer is not None]
    return _plain(answers[-1]) if answers else None


def parse_number(text: str) -> int | Fraction | None:
    """A user's answer field as a number (``"72"``, ``"$12.50"``, ``"1,200"``, ``"3/4"``), or
    None when it is not one."""
    t = text.strip()
    check_number_sizes(t, "an answer")
    m = re.fullmatch(r"(-)?\s*(\d+)\s*/\s*(\d+)", t)
    if m:
        if int(m.group(3)) == 0:
            return None
        return _plain(Fraction(int(m.group(2)), int(m.group(3))) * (-1 if m.group(1) else 1))
    m = _PLAIN_NUMBER.fullmatch(t)
    if m is None:
        return None
    value, _ = _number(m.group(2))
    return _plain(-value if m.group(1) else value)


@dataclass
class Step:
    """One step of a CoT: its text, type, its equations and the answer it states, if any."""

    index: int
    text: str
    type: str = "restatement"
    equations: list[Equation] = field(default_factory=list)
    answer: Fraction | None = None
    #: the answer's value as the graph uses it (``25%`` is 1/4 inside an expression)
    answer_value: Fraction | None = None

    @property
    def equation(self) -> Equation | None:
        """The step's first equation (the toy world writes one per step)."""
        return self.equations[0] if self.equations else None

    @property
    def uses(self) -> tuple[Fraction, ...]:
        """The values this step consumes: its equations' operands that the step does not
        compute itself, and a conclusion's answer unless the step computes it."""
        if self.type != "conclusion" and self.type not in _ARITHMETIC:
            return ()
        out: list[Fraction] = []
        made: set[Fraction] = set()
        for eq in self.equations:
            out.extend(v for v in eq.operands if v not in made and v not in out)
            made.add(eq.value)
        answer = self.answer_value
        if self.type == "conclusion" and answer is not None and answer not in made | set(out):
            out.append(answer)
        return tuple(out)

    @property
    def values(self) -> list[tuple[tuple[Any, ...], Fraction]]:
        """The ``(quantity key, value)`` pairs this step computes (defines or re-derives)."""
        if self.type not in _ARITHMETIC:
            return []
        return [(eq.key, eq.value) for eq in self.equations]

    @property
    def value(self) -> Fraction | None:
        """The last value this step computes, if any."""
        vals = self.values
        return vals[-1][1] if vals else None

    @property
    def key(self) -> tuple[Any, ...] | None:
        return self.equations[-1].key if self.equations else None


_ARITHMETIC = ("computation", "backtracking", "verification")


def _sentences(line: str) -> list[str]:
    out: list[str] = []
    for piece in _SENTENCE_END.split(line):
        if out and _ABBREV.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return [p.strip() for p in out if p.strip()]


def segment(cot: str) -> list[Step]:
    """Steps of ``cot``: one per sentence (a line holds one or more). Each step carries its
    equations and any explicit final answer. Without an explicit answer anywhere, the last
    step that states a number concludes if it opens with a concluding word (So, Therefore,
    In total, ...): its answer is its last equation's value, or the one number it states."""
    if not isinstance(cot, str):
        raise MinPathError(f"a CoT must be text, got {type(cot).__name__}")
    pieces: list[str] = []
    for line in cot.splitlines():
        pieces.extend(_sentences(line))
        if len(pieces) > MAX_STEPS:
            raise MinPathError(f"the CoT has more than {MAX_STEPS} steps (the stated limit)")
    steps = []
    for i, text in enumerate(pieces):
        step = Step(i, text, equations=parse_equations(text))
        found = _answer_phrase(text)
        if found is not None:
            step.answer = found[0]
            step.answer_value = found[0] / 100 if found[1] else found[0]
        steps.append(step)
    if steps and all(s.answer is None for s in steps):
        numbered = [s for s in steps if _NUM.search(_normalise(s.text))]
        last = numbered[-1] if numbered else None
        if last is not None and _CONCLUDE.search(last.text):
            if last.equations:
                last.answer = last.answer_value = last.equations[-1].value
            else:
                nums = _NUM.findall(_normalise(last.text))
                if len(nums) == 1:
                    value, pct = _number(nums[0])
                    last.answer, last.answer_value = value, value / 100 if pct else value
    return steps


class RuleTyper:
    """Step types from surface cues and value tracking (the table of the research notes).

    conclusion: a final-answer phrase (or the concluding last step, see :func:`segment`);
    backtracking: "Wait/Actually/mistake" with an equation; verification: "Check/Verify" with
    an equation, or equations that only re-derive already computed quantities with the same
    values; computation: any other step with an equation; planning: "First/We need/Let's"
    without one; everything else is a restatement.
    """

    name = "rules"

    def type_steps(self, steps: Sequence[Step]) -> list[str]:
        seen: dict[tuple[Any, ...], Fraction] = {}
        types: list[str] = []
        for step in steps:
            t = self.type_one(step, seen)
            if t in ("computation", "backtracking"):
                for eq in step.equations:
                    seen[eq.key] = eq.value
            types.append(t)
        return types

    def type_one(self, step: Step, seen: Mapping[tuple[Any, ...], Fraction]) -> str:
        text = step.text
        if step.answer is not None:
            return "conclusion"
        if step.equations:
            if _BACKTRACK.search(text):
                return "backtracking"
            if _VERIFY.search(text) or all(seen.get(eq.key) == eq.value for eq in step.equations):
                return "verification"
            return "computation"
        if _PLAN.search(text):
            return "planning"
        return "restatement"


class ModelTyper:
    """Step types from a model: any :class:`paperstack.llm.ChatModel` (a local transformers
    model, an OpenAI-compatible server, a cassette, a rule agent) is asked one question per
    step. A reply that names no known type falls back to :class:`RuleTyper`'s type for that
    step, and the fallback is counted in :attr:`fallbacks` (recorded, never silent)."""

    name = "model"

    PROMPT = (
        "Classify one step of a chain of thought as exactly one of: computation, verification, "
        "planning, backtracking, restatement, conclusion.\nPrevious steps:\n{context}\n"
        "Step: {step}\nType:"
    )

    def __init__(self, model: Any, *, max_new_tokens: int = 8, context: int = 3) -> None:
        self.model = model
        self.max_new_tokens = max_new_tokens
        self.context = context
        self.fallbacks = 0
        self.asked = 0
        self._rules = RuleTyper()

    def type_steps(self, steps: Sequence[Step]) -> list[str]:
        prompts = []
        for i, step in enumerate(steps):
            before = "\n".join(s.text for s in steps[max(0, i - self.context) : i]) or "(none)"
            prompts.append(
                [{"role": "user", "content": self.PROMPT.format(context=before, step=step.text)}]
            )
        replies = (
            self.model.generate(prompts, max_new_tokens=self.max_new_tokens) if prompts else []
        )
        fallback = self._rules.type_steps(steps)
        types = []
        for reply, rule_type in zip(replies, fallback, strict=True):
            self.asked += 1
            words = re.findall(r"[a-z]+", str(reply[0]).lower()) if reply else []
            found = next((w for w in words if w in STEP_TYPES), None)
            if found is None:
                self.fallbacks += 1
                found = rule_type
            types.append(found)
        return types


def typed_steps(cot: str, typer: Any = None) -> list[Step]:
    """:func:`segment` then type every step (``typer``: :class:`RuleTyper` by default)."""
    steps = segment(cot)
    types = (typer or RuleTyper()).type_steps(steps)
    for step, t in zip(steps, types, strict=True):
        if t not in STEP_TYPES:
            raise MinPathError(f"typer {getattr(typer, 'name', typer)!r} returned type {t!r}")
        step.type = t
    return steps


def question_numbers(question: str) -> set[Fraction]:
    """The numbers the question states (the values node ``Q`` produces): every number as
    written (a percent also as its fraction, ``25%`` -> 25 and 1/4) and number words
    (``three``, ``a dozen``, ``twice``)."""
    check_number_sizes(question, "the question")
    out: set[Fraction] = set()
    for raw in _NUM.findall(question):
        value, pct = _number(raw)
        out.add(value)
        if pct:
            out.add(value / 100)
    out.update(Fraction(_WORDS[m.lower()]) for m in _WORD_RE.findall(question))
    return out


def build_graph(
    question: str,
    steps: Sequence[Step],
    extra_edges: Sequence[tuple[int, int]] = (),
    count_tokens: Callable[[str], int] = len,
) -> nx.DiGraph:
    """The Typed Reasoning Graph (see the module docstring): nodes ``Q`` and step indices with
    ``type``, ``text``, ``cost`` and ``valid``; an edge ``j -> i`` with ``value`` for each value
    step ``i`` consumes from ``j``. ``extra_edges`` (from a user's file or a model) are added as
    given; if they close a cycle that is one :class:`CycleError` naming it. A value that neither
    the question nor an earlier step gives is recorded in the node's ``ungrounded`` (unit
    constants such as 60 minutes an hour are not)."""
    g = nx.DiGraph()
    g.add_node(QUESTION, type="question", text=question, cost=0, valid=True)
    given = question_numbers(question)
    # value -> definitions in order; key -> definitions (for invalidation)
    definitions: dict[Fraction, list[int]] = {}
    by_key: dict[tuple[Any, ...], list[int]] = {}
    for step in steps:
        i = step.index
        g.add_node(
            i, type=step.type, text=step.text, cost=count_tokens(render_step(step)), valid=True,
            value=step.value, values=dict((k, v) for k, v in step.values), uses=list(step.uses),
            ungrounded=[],
        )  # fmt: skip
        for v in step.uses:
            producer: Any = _latest_valid(g, definitions.get(v, []))
            if producer is None and v in given:
                producer = QUESTION
            if producer is None:
                if not _unit_constant(v, step.text):
                    g.nodes[i]["ungrounded"].append(v)
                continue
            if g.has_edge(producer, i):
                continue
            g.add_edge(producer, i, value=v)
        if step.type == "backtracking":
            for key, value in step.values:
                for j in by_key.get(key, []):
                    if g.nodes[j]["values"].get(key) != value and g.nodes[j]["valid"]:
                        for k in (j, *nx.descendants(g, j)):
                            g.nodes[k]["valid"] = False
        if step.type in ("computation", "backtracking"):
            for key, value in step.values:
                definitions.setdefault(value, []).append(i)
                by_key.setdefault(key, []).append(i)
    for a, b in extra_edges:
        for node in (a, b):
            if node not in g:
                raise MinPathError(f"edge ({a}, {b}): step {node} does not exist")
        g.add_edge(a, b, value=None, given=True)
    if not nx.is_directed_acyclic_graph(g):
        cycle = nx.find_cycle(g)
        path = " -> ".join(str(u) for u, _ in cycle) + f" -> {cycle[0][0]}"
        raise CycleError(f"the step dependencies form a cycle: {path}")
    return g


def _latest_valid(g: nx.DiGraph, producers: Sequence[int]) -> int | None:
    for j in reversed(producers):
        if g.nodes[j]["valid"]:
            return j
    return None


def _alternatives(
    g: nx.DiGraph,
    steps: Sequence[Step],
    producer: Any,
    consumer: int,
    same: Mapping[tuple[Any, ...], list[int]] | None = None,
    value: Any = None,
) -> list[Any]:
    """Valid producers equivalent to ``producer`` for ``consumer``: every valid step before the
    consumer that computes the same quantity to the same value (duplicates, verifications).

    ``same`` (quantity key and value -> valid non-conclusion steps computing it, in order) saves
    the scan over every earlier step, which made a long chain quadratic."""
    if producer == QUESTION:
        return [QUESTION]
    if same is None:
        same = _producers_by_quantity(g, steps)
    keys = [(k, v) for k, v in steps[producer].values if value is None or v == value]
    out = [producer]
    for quantity in keys[-1:]:
        for j in same.get(quantity, []):
            if j >= consumer:
                break
            if j != producer and j not in out:
                out.append(j)
    return out


def _producers_by_quantity(
    g: nx.DiGraph, steps: Sequence[Step]
) -> dict[tuple[Any, ...], list[int]]:
    """(quantity key, value) -> the valid steps that compute it (not conclusions), in order."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for s in steps:
        if g.nodes[s.index]["valid"] and s.type != "conclusion":
            for quantity in dict.fromkeys(s.values):
                out.setdefault(quantity, []).append(s.index)
    return out


def min_path(g: nx.DiGraph, steps: Sequence[Step]) -> set[int]:
    """The Minimal Dependency Path of the last conclusion step (module docstring): the step
    indices kept, the conclusion included. Raises :class:`MinPathError` without a conclusion.

    The dynamic programme runs over a topological order of the producers the conclusion can
    reach, not by recursion: a 500-step chain in which every step consumes the one before it
    recursed 500 frames deep and ended in a RecursionError (issue #46).
    """
    conclusions = [s.index for s in steps if s.type == "conclusion"]
    if not conclusions:
        raise MinPathError("the CoT has no final answer (no conclusion step)")
    target = conclusions[-1]
    same = _producers_by_quantity(g, steps)
    # For each step the conclusion depends on: per consumed edge, the producers to choose among.
    options: dict[Any, list[list[Any]]] = {}
    order = nx.DiGraph()  # option -> step that may use it; its topological order is the DP's
    order.add_node(target)
    pending = [target]
    while pending:
        node = pending.pop()
        if node == QUESTION or node in options:
            continue
        per_edge = []
        for producer, _, data in g.in_edges(node, data=True):
            choices = (
                [producer]
                if data.get("given")
                else _alternatives(g, steps, producer, node, same, data.get("value"))
            )
            per_edge.append(choices)
            for p in choices:
                order.add_edge(p, node)
                if p not in options:
                    pending.append(p)
        options[node] = per_edge
    try:
        ordered = list(nx.topological_sort(order))
    except nx.NetworkXUnfeasible:
        # a duplicate producer that itself depends on its consumer, through given edges
        raise MinPathError(
            "the producers of the conclusion depend on each other in a cycle"
        ) from None
    best: dict[Any, tuple[float, frozenset[int]]] = {QUESTION: (0.0, frozenset())}
    for node in ordered:
        if node == QUESTION:
            continue
        cost = float(g.nodes[node]["cost"])
        kept: set[int] = {node}
        for choices in options[node]:
            if len(choices) == 1:  # the common case; sorting the kept set is for ties only
                choice = best[choices[0]]
            else:
                choice = min((best[p] for p in choices), key=lambda ck: (ck[0], sorted(ck[1])))
            cost += choice[0]
            kept |= choice[1]
        best[node] = (cost, frozenset(kept))
    return set(best[target][1])


def render_step(step: Step) -> str:
    """A kept step as text: its discourse cue stripped (``Wait, 3+8=11.`` -> ``3+8=11``,
    ``So she pays 3 * 4 = 12.`` -> ``She pays 3 * 4 = 12.``); a bare equation loses its final
    period. A conclusion is kept as written (its opening word may be what makes it one)."""
    if step.type == "conclusion":
        return step.text.strip()
    text = _CUE.sub("", step.text).strip()
    if text[:1].islower() and text != step.text.strip():
        text = text[0].upper() + text[1:]
    if text.endswith(".") and step.equations and not re.search(r"[A-Za-z]", text):
        text = text[:-1]
    return text


def render(steps: Sequence[Step], kept: set[int]) -> str:
    """The kept steps in their original order, one a line, re-rendered as a CoT."""
    return "\n".join(render_step(s) for s in steps if s.index in kept)


def derivable(question: str, cot: str) -> tuple[bool, str]:
    """Re-execute ``cot``'s arithmetic: every equation true (to the decimals its result is
    written with), each operand stated by the question, computed by an earlier step or a unit
    constant (:data:`UNIT_CONSTANTS`), and the final answer computed (or stated). Returns
    ``(ok, reason)``; ``reason`` names the first failing step."""
    ok, reason, _ = _derive(question, cot)
    return ok, reason


def _derive(question: str, cot: str) -> tuple[bool, str, int | Fraction | None]:
    """:func:`derivable` and the answer the CoT states (:func:`cot_answer`), in one parse."""
    available = question_numbers(question)
    answer = stated = None
    for step in segment(cot):
        for eq in step.equations:
            for v in eq.operands:
                if v not in available and not _unit_constant(v, step.text):
                    return (
                        False,
                        (f"step {step.text!r}: operand {_plain(v)} is neither given nor computed"),
                        None,
                    )
            if not eq.holds():
                return False, f"step {step.text!r}: the arithmetic is wrong", None
            available.add(eq.value)
        if step.answer_value is not None and step.answer is not None:
            answer, stated = step.answer_value, _plain(step.answer)
    if answer is None:
        return False, "no final answer", None
    if answer not in available:
        return False, f"the answer {_plain(answer)} is never computed", stated
    return True, "", stated


@dataclass
class Compression:
    """What :func:`compress` did with one CoT: the text to train on and how it got there."""

    original: str
    text: str
    kept: list[int] = field(default_factory=list)
    steps: int = 0
    fallback: str | None = None
    types: list[str] = field(default_factory=list)
    edges: list[tuple[Any, Any]] = field(default_factory=list)

    @property
    def compressed(self) -> bool:
        return self.fallback is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "kept": self.kept,
            "steps": self.steps,
            "fallback": self.fallback,
            "types": self.types,
        }


def compress(
    question: str,
    cot: str,
    *,
    typer: Any = None,
    gold_answer: int | Fraction | None = None,
    check: Callable[[str], bool] | None = None,
    extra_edges: Sequence[tuple[int, int]] = (),
    count_tokens: Callable[[str], int] = len,
) -> Compression:
    """MinPath of one CoT, with the derivability check and its fallback.

    Falls back to the original (``fallback`` says why) when the CoT has no final answer, when the
    compressed CoT fails :func:`derivable`, when its answer differs from ``gold_answer`` or when
    ``check`` (e.g. a task's exact step verifier) rejects it. Dependency cycles from
    ``extra_edges`` are a :class:`CycleError`: a wrong graph is an error, not a fallback.
    """
    steps = typed_steps(cot, typer)
    types = [s.type for s in steps]
    g = build_graph(question, steps, extra_edges, count_tokens)
    edges = [(u, v) for u, v in g.edges]
    base = Compression(cot, cot, list(range(len(steps))), len(steps), None, types, edges)
    try:
        kept = min_path(g, steps)
    except MinPathError as exc:
        base.fallback = str(exc)
        return base
    text = render(steps, kept)
    ok, reason, stated = _derive(question, text)
    if ok and gold_answer is not None and stated != gold_answer:
        ok, reason = False, f"answer {stated} differs from the gold {gold_answer}"
    if ok and check is not None and not check(text):
        ok, reason = False, "the task's step checker rejects the compressed CoT"
    if not ok:
        base.fallback = f"not derivable: {reason}"
        return base
    return Compression(cot, text, sorted(kept), len(steps), None, types, edges)
