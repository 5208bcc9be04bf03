"""The compression baselines, each at a given token budget per CoT (the matched ratio).

Every baseline keeps the CoT's final answer line intact and spends the rest of the budget on
the reasoning, so that all compressed training sets teach the answer format and differ only in
which reasoning survives:

- :func:`truncate`: the first tokens of the reasoning (head truncation);
- :func:`random_drop`: whole steps dropped at random until the budget is met;
- :func:`token_skip`: TokenSkip-style token-importance pruning (Xia et al. 2025): the least
  important tokens go first. TokenSkip scores tokens with LLMLingua-2; that model is not
  available offline here, so importance is the unigram surprisal ``-log p(piece)`` fitted on the
  training CoTs (:class:`UnigramImportance`), as the research notes plan;
- length-budget prompting is a decoding-time baseline (:func:`minpath.finetune.generate` with a
  budget): the raw-trace model answers within the budget, and an ``Answer:`` is forced when it
  runs out (a tiny model cannot read an instruction, so the budget is enforced by decoding).

SFT on uncompressed traces is the ``raw`` system itself. Budgets are in the units of
``count`` (characters by default: the toy tokenizer has one token per character).
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from minpath.errors import MinPathError
from minpath.graph import final_answer

__all__ = [
    "UnigramImportance",
    "budget_for",
    "random_drop",
    "split_conclusion",
    "token_skip",
    "truncate",
]

_PIECE = re.compile(r"-?\d+\s*|[A-Za-z]+\s*|[^\sA-Za-z\d]\s*|\s+")


def split_conclusion(cot: str) -> tuple[list[str], str]:
    """(reasoning lines, the final answer line); a CoT without one is a :class:`MinPathError`."""
    lines = [line for line in cot.splitlines() if line.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if final_answer(lines[i]) is not None:
            return lines[:i] + lines[i + 1 :], lines[i]
    raise MinPathError("the CoT has no final answer line to keep")


def budget_for(cot: str, ratio: float, count: Callable[[str], int] = len) -> int:
    """The token budget of ``cot`` at ``ratio`` of its length (at least its answer line)."""
    if not 0 < ratio <= 1:
        raise MinPathError(f"ratio={ratio!r}: must be in (0, 1]")
    _, answer = split_conclusion(cot)
    return max(count(answer), round(ratio * count(cot)))


def _join(lines: Sequence[str], answer: str) -> str:
    return "\n".join([*lines, answer])


def truncate(cot: str, budget: int) -> str:
    """The first ``budget`` characters of the CoT's reasoning, then its answer line."""
    lines, answer = split_conclusion(cot)
    room = max(0, budget - len(answer) - 1)
    head = "\n".join(lines)[:room].rstrip()
    return _join([head] if head else [], answer)


def random_drop(cot: str, budget: int, rng: random.Random) -> str:
    """Whole reasoning steps dropped in a random order until the CoT fits ``budget``."""
    lines, answer = split_conclusion(cot)
    keep = list(range(len(lines)))
    order = list(keep)
    rng.shuffle(order)
    for i in order:
        if len(_join([lines[k] for k in keep], answer)) <= budget:
            break
        keep.remove(i)
    return _join([lines[k] for k in keep], answer)


class UnigramImportance:
    """Token importance as unigram surprisal, ``-log p(piece)`` with add-one smoothing, fitted
    on a corpus of CoTs (pieces: numbers, words, single symbols, each with its trailing space)."""

    def __init__(self, texts: Iterable[str]) -> None:
        counts = Counter(p.strip() for t in texts for p in _PIECE.findall(t) if p.strip())
        self.total = sum(counts.values())
        self.counts = counts
        self.vocab = len(counts) + 1

    def __call__(self, piece: str) -> float:
        c = self.counts.get(piece.strip(), 0)
        return -math.log((c + 1) / (self.total + self.vocab))


def token_skip(cot: str, budget: int, importance: Callable[[str], float]) -> str:
    """TokenSkip-style pruning: the least important reasoning pieces removed first (ties: the
    later piece first) until the CoT fits ``budget``; the answer line is kept whole."""
    lines, answer = split_conclusion(cot)
    reasoning = "\n".join(lines)
    pieces = _PIECE.findall(reasoning)
    if "".join(pieces) != reasoning:  # pragma: no cover - the pattern covers every character
        raise MinPathError("token_skip: could not split the CoT into pieces")
    alive = [True] * len(pieces)
    length = len(reasoning) + (len(answer) + 1 if reasoning else len(answer))
    ranked = sorted(
        (i for i, p in enumerate(pieces) if p.strip()),
        key=lambda i: (importance(pieces[i]), -i),
    )
    for i in ranked:
        if length <= budget:
            break
        alive[i] = False
        length -= len(pieces[i])
    kept = "".join(p for p, a in zip(pieces, alive, strict=True) if a or not p.strip())
    kept = "\n".join(line.strip() for line in kept.splitlines() if line.strip())
    return _join([kept] if kept else [], answer)
