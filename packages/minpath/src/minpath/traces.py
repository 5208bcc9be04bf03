"""Verbose chains of thought with known gold graphs, and a loader for users' own CoTs.

:func:`verbose_traces` writes, for :class:`paperstack.tasks.Arithmetic` problems, the kind of
CoT a long-reasoning model produces: the needed reductions (the gold solution's step lines)
interleaved with restatements, planning, distractor computations that nothing uses, redundant
checks, and wrong steps revised by a ``Wait, ...`` backtrack (sometimes after a step that
already used the wrong value, which the backtrack then invalidates too), and right above each
needed reduction a restatement of the expression as it stands (``The problem is 3+4*2-5.``,
then ``That leaves 3+8-5.``). That running state is what a long-reasoning model writes to keep
its place; without it the tiny model cannot tell which of the interleaved equations rewrote the
expression, nor find the operands of the next reduction (measured on validation seed 99, see
the demo module). The generator knows
what it wrote, so every trace carries its gold step types, gold def-use edges and the gold
minimal path (the needed reductions and the answer line): graph extraction is scored
against them.

:func:`load_jsonl` reads ``{"question", "cot", "answer"[, "edges"]}`` lines.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minpath.errors import MinPathError
from paperstack.tasks import Arithmetic, Example

__all__ = ["GoldTrace", "Record", "TraceStyle", "load_jsonl", "verbose_traces", "write_jsonl"]


@dataclass(frozen=True)
class TraceStyle:
    """How verbose a generated CoT is: probabilities per problem or per needed step."""

    #: restate the problem right above its first reduction
    restate: float = 1.0
    plan: float = 0.6
    distractor: float = 0.35
    check: float = 0.4
    backtrack: float = 0.3
    #: of the backtracks, how often a step uses the wrong value before the revision
    wrong_consumer: float = 0.5
    summary: float = 0.5
    #: right above each later needed reduction, restate the expression left
    #: (``That leaves 3+8-5.``)
    state: float = 1.0


@dataclass
class GoldTrace:
    """A generated verbose CoT and what it truly is.

    ``lines`` are the steps (one a line); ``types`` their gold types; ``edges`` the gold
    def-use edges ``(producer, consumer)`` with ``"Q"`` for the question; ``path`` the gold
    minimal dependency path (indices); ``minimal`` its rendering (the gold solution).
    """

    example: Example
    lines: list[str]
    types: list[str]
    edges: set[tuple[Any, int]]
    path: set[int]

    @property
    def question(self) -> str:
        return self.example.prompt

    @property
    def cot(self) -> str:
        return "\n".join(self.lines)

    @property
    def value(self) -> int:
        return int(self.example.meta["value"])

    @property
    def minimal(self) -> str:
        return "\n".join(self.example.answer.splitlines())


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.types: list[str] = []
        self.edges: set[tuple[Any, int]] = set()
        self.path: set[int] = set()

    def add(self, text: str, kind: str, sources: Sequence[Any] = (), on_path: bool = False) -> int:
        i = len(self.lines)
        self.lines.append(text)
        self.types.append(kind)
        for s in sources:
            self.edges.add((s, i))
        if on_path:
            self.path.add(i)
        return i


def _trace(task: Arithmetic, ex: Example, rng: random.Random, style: TraceStyle) -> GoldTrace:
    tokens: list[Any] = list(ex.meta["tokens"])
    source: list[Any] = ["Q"] * len(tokens)  # producer of each token of the current expression
    w = _Writer()
    if rng.random() < style.plan:
        w.add(rng.choice(["First do * then + and -.", "Let's go step by step."]), "planning")
    first = True
    used_values = {int(t) for t in tokens[::2]} | {int(v) for v in _values(task, tokens)}
    while len(tokens) > 1:
        ops = [(i, tokens[i]) for i in range(1, len(tokens), 2)]
        i = next((i for i, op in ops if op == "*"), ops[0][0])
        a, op, b = int(tokens[i - 1]), str(tokens[i]), int(tokens[i + 1])
        c = _apply(a, op, b)
        src = [source[i - 1], source[i + 1]]
        if rng.random() < style.distractor and len(ops) > 1:
            j = rng.choice([j for j, _ in ops if j != i])
            da, dop, db = int(tokens[j - 1]), str(tokens[j]), int(tokens[j + 1])
            dc = _apply(da, dop, db)
            if dc not in used_values:
                w.add(f"{da}{dop}{db}={dc}", "computation", [source[j - 1], source[j + 1]])
                used_values.add(dc)
        # the expression as it stands, right above the reduction that rewrites it
        if rng.random() < (style.restate if first else style.state):
            now = "".join(map(str, tokens))
            w.add(f"The problem is {now}." if first else f"That leaves {now}.", "restatement")
        first = False
        producer: int
        if rng.random() < style.backtrack:
            # a near miss; farther ones only when every near one is taken (same draws as before)
            near = [c + d for d in rng.sample([1, 2, 3, -1, -2, -3], 6)]
            far = (c + sign * d for d in range(4, 10_000) for sign in (1, -1))
            wrong = next(v for v in itertools.chain(near, far) if v not in used_values)
            used_values.add(wrong)
            bad = w.add(f"{a}{op}{b}={wrong}", "computation", src)
            rest = [*tokens[: i - 1], wrong, *tokens[i + 2 :]]
            if rng.random() < style.wrong_consumer and len(rest) > 1:
                # the next reduction, done with the wrong value (if it takes it)
                ops2 = [(k, rest[k]) for k in range(1, len(rest), 2)]
                k = next((k for k, o in ops2 if o == "*"), ops2[0][0])
                if k - 1 == i - 1 or k + 1 == i - 1:
                    x, o2, y = int(rest[k - 1]), str(rest[k]), int(rest[k + 1])
                    z = _apply(x, o2, y)
                    if z not in used_values:
                        used_values.add(z)
                        srcs = [
                            bad if k - 1 == i - 1 else _src_at(source, tokens, i, k - 1),
                            bad if k + 1 == i - 1 else _src_at(source, tokens, i, k + 1),
                        ]
                        w.add(f"{x}{o2}{y}={z}", "computation", srcs)
            producer = w.add(f"Wait, {a}{op}{b}={c}", "backtracking", src, on_path=True)
        else:
            producer = w.add(f"{a}{op}{b}={c}", "computation", src, on_path=True)
        if rng.random() < style.check:
            if op in "+*":
                w.add(f"Check: {b}{op}{a}={c}", "verification", src)
            else:
                w.add(f"Check: {c}+{b}={a}", "verification", [producer, source[i + 1]])
        tokens[i - 1 : i + 2] = [c]
        source[i - 1 : i + 2] = [producer]
    last = source[0]
    if rng.random() < style.summary:
        w.add(f"So the result is {tokens[0]}.", "restatement")
    w.add(f"Answer: {tokens[0]}", "conclusion", [last], on_path=True)
    return GoldTrace(ex, w.lines, w.types, w.edges, w.path)


def _src_at(source: list[Any], tokens: list[Any], i: int, pos_after: int) -> Any:
    """The producer of the token at ``pos_after`` of the expression after reducing at ``i``."""
    return source[pos_after] if pos_after < i - 1 else source[pos_after + 2]


def _values(task: Arithmetic, tokens: Sequence[Any]) -> list[int]:
    return [int(s.split("=")[1]) for s in task.solution_steps(tokens)]


def verbose_traces(
    n: int,
    seed: int = 0,
    split: str = "train",
    task: Arithmetic | None = None,
    style: TraceStyle | None = None,
) -> list[GoldTrace]:
    """``n`` verbose CoTs (with gold graphs) for ``task``'s problems of ``split``, by seed."""
    task = task or Arithmetic(min_ops=2, max_ops=3)
    style = style or TraceStyle()
    rng = random.Random(f"minpath.traces:{seed}:{split}")
    return [_trace(task, ex, rng, style) for ex in task.generate(n, seed=seed, split=split)]  # type: ignore[arg-type]


@dataclass
class Record:
    """A user's CoT: the question, the chain of thought, the final answer (and, optionally,
    dependency edges between step indices, which are checked for cycles)."""

    question: str
    cot: str
    answer: str
    edges: list[tuple[int, int]] = field(default_factory=list)
    where: str = ""


def load_jsonl(path: str | Path) -> list[Record]:
    """Read ``{"question", "cot", "answer"[, "edges"]}`` JSON lines; any bad line (not UTF-8,
    not JSON, a missing or non-text field) is one :class:`MinPathError` naming file and line."""
    from minpath.graph import check_number_sizes
    from paperstack.records import iter_user_jsonl

    records: list[Record] = []
    for where, obj in iter_user_jsonl(path, error=MinPathError):
        for name in ("question", "cot", "answer"):
            if not isinstance(obj.get(name), (str, int)) or isinstance(obj.get(name), bool):
                raise MinPathError(f"{where}: field {name!r} is missing or not text")
            check_number_sizes(str(obj[name]), f"{where}: field {name!r}")
        edges = obj.get("edges", [])
        if not isinstance(edges, list) or not all(
            isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) for x in e)
            for e in edges
        ):
            raise MinPathError(f"{where}: field 'edges' must be a list of [from, to] step indices")
        pairs = [(int(a), int(b)) for a, b in edges]
        records.append(
            Record(str(obj["question"]), str(obj["cot"]), str(obj["answer"]), pairs, where)
        )
    if not records:
        raise MinPathError(f"{path}: no records")
    return records


def write_jsonl(path: str | Path, traces: Sequence[GoldTrace]) -> Path:
    """The traces as the JSONL :func:`load_jsonl` reads (question, cot, answer)."""
    from paperstack.records import atomic_write

    lines = [
        json.dumps({"question": t.question, "cot": t.cot, "answer": str(t.value)}) for t in traces
    ]
    path = Path(path)
    atomic_write(path, "\n".join(lines) + "\n")
    return path
