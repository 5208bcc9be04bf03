r"""The Typed Reasoning Graph of a chain of thought and its Minimal Dependency Path (MinPath).

A raw CoT :math:`s_1 \dots s_n` is cut into steps (:func:`segment`), each step gets a type
:math:`t_i \in` {computation, verification, planning, backtracking, restatement, conclusion}
(:class:`RuleTyper`, or :class:`ModelTyper` through any :class:`paperstack.llm.ChatModel`), and
value tracking turns the steps into a DAG :math:`G = (V, E)` with :math:`V = \{Q, 1..n\}` (``Q``
is the question, the source of its own numbers):

- a step *defines* a value when it computes one (computation, backtracking): ``a op b = c``
  defines ``c`` under the quantity key ``(a, op, b)``;
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

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from minpath.errors import CycleError, MinPathError

__all__ = [
    "MAX_DIGITS",
    "MAX_STEPS",
    "QUESTION",
    "STEP_TYPES",
    "Compression",
    "ModelTyper",
    "RuleTyper",
    "Step",
    "build_graph",
    "check_number_sizes",
    "compress",
    "derivable",
    "final_answer",
    "min_path",
    "parse_equation",
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

_EQUATION = re.compile(r"(-?\d+)\s*([-+*x×/])\s*(-?\d+)\s*=\s*(-?\d+)")
_ANSWER = re.compile(
    r"(?:\bAnswer\s*:\s*|\\boxed\{\s*|\bfinal answer\s*(?:is|:)\s*)(-?\d+)", re.IGNORECASE
)
_NUMBER = re.compile(r"\d+")
#: Where a new step starts inside a line: discourse markers that open a check or a revision.
_MARKERS = re.compile(r"(?<=[.!?;])\s+(?=(?:Wait|Actually|Alternatively|Let me check|Check)\b)")
_BACKTRACK = re.compile(r"^\s*(?:Wait|Actually|Oops|Hmm, no|No,|Correction)\b|\bmistake\b", re.I)
_VERIFY = re.compile(r"^\s*(?:Check|Verify|Double-check|Let me check|Substitut)", re.I)
_PLAN = re.compile(r"^\s*(?:First|We need|Let's|Let us|Plan|Next|Then|Now)\b", re.I)
_CUE = re.compile(
    r"^\s*(?:Wait|Actually|Oops|Correction|Check|Verify|Double-check|Let me check|So|Then|Now)"
    r"\b[,:]?\s*",
    re.I,
)
_OPS = {"x": "*", "×": "*"}
#: Longest number (in digits) a question, CoT or answer may hold. Python refuses to read
#: integers of more than 4300 digits (a ValueError traceback before, issue #46) and the
#: arithmetic of one is no chain-of-thought step; 1000 digits is far beyond any real CoT.
MAX_DIGITS = 1000
#: Most steps one CoT may have. The walk is iterative, but the kept sets grow with the chain
#: (a 5000-step chain, each step using the one before, takes about 8 s; the cost is quadratic),
#: so a longer CoT is refused instead of running for minutes.
MAX_STEPS = 10_000
_TOO_LONG = re.compile(rf"\d{{{MAX_DIGITS + 1},}}")


def check_number_sizes(text: str, what: str) -> None:
    """Refuse ``text`` if it holds a number longer than :data:`MAX_DIGITS` digits, in one
    :class:`MinPathError` naming ``what`` and the length."""
    m = _TOO_LONG.search(text)
    if m is not None:
        raise MinPathError(
            f"{what}: a {len(m.group())}-digit number (numbers are limited to {MAX_DIGITS} digits)"
        )


def parse_equation(text: str) -> tuple[int, str, int, int] | None:
    """The first ``a op b = c`` in ``text`` as ``(a, op, b, c)`` (``x``/``×`` read as ``*``)."""
    m = _EQUATION.search(text)
    if m is None:
        return None
    check_number_sizes(m.group(), "an equation")
    return int(m.group(1)), _OPS.get(m.group(2), m.group(2)), int(m.group(3)), int(m.group(4))


def final_answer(text: str) -> int | None:
    """The number of the last ``Answer: N`` / ``\\boxed{N}`` / ``final answer is N`` in ``text``."""
    found = None
    for m in _ANSWER.finditer(text):
        check_number_sizes(m.group(1), "a final answer")
        found = int(m.group(1))
    return found


def _apply(a: int, op: str, b: int) -> int | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a // b if b != 0 and a % b == 0 else None
    return None


def _key(a: int, op: str, b: int) -> tuple[Any, ...]:
    """The quantity an equation computes: commutative operations ignore operand order."""
    return (op, *sorted((a, b))) if op in "+*" else (a, op, b)


@dataclass
class Step:
    """One step of a CoT: its text, type, and what it consumes and defines."""

    index: int
    text: str
    type: str = "restatement"
    equation: tuple[int, str, int, int] | None = None
    answer: int | None = None

    @property
    def uses(self) -> tuple[int, ...]:
        """The values this step consumes: the operands of its equation, or the stated answer."""
        if self.type == "conclusion":
            return () if self.answer is None else (self.answer,)
        if self.equation is None:
            return ()
        return (self.equation[0], self.equation[2])

    @property
    def value(self) -> int | None:
        """The value this step computes (defines or re-derives), if any."""
        if self.type in ("computation", "backtracking", "verification") and self.equation:
            return self.equation[3]
        return None

    @property
    def key(self) -> tuple[Any, ...] | None:
        if self.equation is None:
            return None
        a, op, b, _ = self.equation
        return _key(a, op, b)


def segment(cot: str) -> list[Step]:
    """Steps of ``cot``: one per non-empty line, a line split again before a discourse marker
    that opens a check or a revision (``... = 11. Wait, ...``)."""
    if not isinstance(cot, str):
        raise MinPathError(f"a CoT must be text, got {type(cot).__name__}")
    pieces: list[str] = []
    for line in cot.splitlines():
        pieces.extend(p.strip() for p in _MARKERS.split(line) if p.strip())
        if len(pieces) > MAX_STEPS:
            raise MinPathError(f"the CoT has more than {MAX_STEPS} steps (the stated limit)")
    return [
        Step(i, text, equation=parse_equation(text), answer=final_answer(text))
        for i, text in enumerate(pieces)
    ]


class RuleTyper:
    """Step types from surface cues and value tracking (the table of the research notes).

    conclusion: ``Answer:`` / boxed / "final answer"; backtracking: "Wait/Actually/mistake" with
    an equation; verification: "Check/Verify" with an equation, or an equation that re-derives
    an already computed quantity with the same value; computation: any other true-or-false
    equation; planning: "First/We need/Let's" without one; everything else is a restatement.
    """

    name = "rules"

    def type_steps(self, steps: Sequence[Step]) -> list[str]:
        seen: dict[tuple[Any, ...], int] = {}
        types: list[str] = []
        for step in steps:
            t = self.type_one(step, seen)
            if step.equation is not None and t in ("computation", "backtracking"):
                seen[_key(*step.equation[:3])] = step.equation[3]
            types.append(t)
        return types

    def type_one(self, step: Step, seen: Mapping[tuple[Any, ...], int]) -> str:
        text = step.text
        if step.answer is not None and step.equation is None:
            return "conclusion"
        if step.equation is not None:
            if _BACKTRACK.search(text):
                return "backtracking"
            a, op, b, c = step.equation
            if _VERIFY.search(text) or seen.get(_key(a, op, b)) == c:
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


def question_numbers(question: str) -> set[int]:
    """The numbers the question states (the values node ``Q`` produces)."""
    check_number_sizes(question, "the question")
    return {int(n) for n in _NUMBER.findall(question)}


def build_graph(
    question: str,
    steps: Sequence[Step],
    extra_edges: Sequence[tuple[int, int]] = (),
    count_tokens: Callable[[str], int] = len,
) -> nx.DiGraph:
    """The Typed Reasoning Graph (see the module docstring): nodes ``Q`` and step indices with
    ``type``, ``text``, ``cost`` and ``valid``; an edge ``j -> i`` with ``value`` for each value
    step ``i`` consumes from ``j``. ``extra_edges`` (from a user's file or a model) are added as
    given; if they close a cycle that is one :class:`CycleError` naming it."""
    g = nx.DiGraph()
    g.add_node(QUESTION, type="question", text=question, cost=0, valid=True)
    given = question_numbers(question)
    # value -> definitions in order; key -> definitions (for invalidation)
    definitions: dict[int, list[int]] = {}
    by_key: dict[tuple[Any, ...], list[int]] = {}
    for step in steps:
        i = step.index
        g.add_node(
            i, type=step.type, text=step.text, cost=count_tokens(render_step(step)), valid=True,
            value=step.value, uses=list(step.uses), ungrounded=[],
        )  # fmt: skip
        for v in step.uses:
            producer: Any = _latest_valid(g, definitions.get(v, []))
            if producer is None and v in given:
                producer = QUESTION
            if producer is None:
                g.nodes[i]["ungrounded"].append(v)
                continue
            if g.has_edge(producer, i):
                continue
            g.add_edge(producer, i, value=v)
        if step.type == "backtracking" and step.key is not None:
            for j in by_key.get(step.key, []):
                if g.nodes[j]["value"] != step.value and g.nodes[j]["valid"]:
                    for k in (j, *nx.descendants(g, j)):
                        g.nodes[k]["valid"] = False
        if step.type in ("computation", "backtracking") and step.value is not None:
            definitions.setdefault(step.value, []).append(i)
            by_key.setdefault(step.key or (), []).append(i)
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
) -> list[Any]:
    """Valid producers equivalent to ``producer`` for ``consumer``: every valid step before the
    consumer that computes the same quantity to the same value (duplicates, verifications).

    ``same`` (quantity key and value -> valid non-conclusion steps computing it, in order) saves
    the scan over every earlier step, which made a long chain quadratic."""
    if producer == QUESTION:
        return [QUESTION]
    ref = steps[producer]
    if same is None:
        same = _producers_by_quantity(g, steps)
    out = [producer]
    for j in same.get((ref.key, ref.value), []):
        if j >= consumer:
            break
        if j != producer:
            out.append(j)
    return out


def _producers_by_quantity(
    g: nx.DiGraph, steps: Sequence[Step]
) -> dict[tuple[Any, ...], list[int]]:
    """(quantity key, value) -> the valid steps that compute it (not conclusions), in order."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for s in steps:
        if g.nodes[s.index]["valid"] and s.value is not None and s.type != "conclusion":
            out.setdefault((s.key, s.value), []).append(s.index)
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
                [producer] if data.get("given") else _alternatives(g, steps, producer, node, same)
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
    """A kept step as text: its discourse cue stripped (``Wait, 3+8=11.`` -> ``3+8=11``)."""
    text = _CUE.sub("", step.text).strip()
    if step.type == "conclusion":
        return text
    return text[:-1] if text.endswith(".") and step.equation is not None else text


def render(steps: Sequence[Step], kept: set[int]) -> str:
    """The kept steps in their original order, one a line, re-rendered as a CoT."""
    return "\n".join(render_step(s) for s in steps if s.index in kept)


def derivable(question: str, cot: str) -> tuple[bool, str]:
    """Re-execute ``cot``'s arithmetic: every equation true, each operand stated by the question
    or computed by an earlier kept step, and the final answer computed (or stated). Returns
    ``(ok, reason)``; ``reason`` names the first failing step."""
    available = question_numbers(question)
    answer = None
    for step in segment(cot):
        if step.equation is not None and step.answer is None:
            a, op, b, c = step.equation
            for v in (a, b):
                if v not in available:
                    return False, f"step {step.text!r}: operand {v} is neither given nor computed"
            if _apply(a, op, b) != c:
                return False, f"step {step.text!r}: the arithmetic is wrong"
            available.add(c)
        elif step.answer is not None:
            answer = step.answer
    if answer is None:
        return False, "no final answer"
    if answer not in available:
        return False, f"the answer {answer} is never computed"
    return True, ""


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
    gold_answer: int | None = None,
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
    ok, reason = derivable(question, text)
    if ok and gold_answer is not None and final_answer(text) != gold_answer:
        ok, reason = False, f"answer {final_answer(text)} differs from the gold {gold_answer}"
    if ok and check is not None and not check(text):
        ok, reason = False, "the task's step checker rejects the compressed CoT"
    if not ok:
        base.fallback = f"not derivable: {reason}"
        return base
    return Compression(cot, text, sorted(kept), len(steps), None, types, edges)
