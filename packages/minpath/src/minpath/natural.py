"""A shipped set of natural GSM8K/MATH-style chains of thought with gold minimal paths.

``data/natural_cots.jsonl`` holds 30 chains of thought written for this package (not copied
from any dataset): word problems about money, time, percents, fractions and counts, solved the
way instruction-tuned models write (full sentences, ``$`` and decimals, multi-operand sums,
word operators such as *half of*, checks, a revision, restatements, and every common
final-answer form: ``The answer is N``, ``#### N``, ``\\boxed{N}``, ``Answer: $N``, or only a
concluding "So she has N left."). Each carries its gold graph as the set of sentences the
answer needs (``needed``: the computations the answer depends on and the concluding step),
which is what the Minimal Dependency Path must keep.

The set is split in two halves: ``design`` (d01-d15), on which the parser was developed, and
``heldout`` (h01-h15), written before the parser was tested on it and scored separately.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from minpath.graph import compress, derivable, parse_number, segment

__all__ = ["NaturalCoT", "NaturalResult", "load_natural", "score_natural"]


@dataclass(frozen=True)
class NaturalCoT:
    """One shipped chain of thought and its gold minimal path (``needed`` sentences)."""

    id: str
    split: str
    question: str
    cot: str
    answer: str
    needed: tuple[str, ...]


@dataclass(frozen=True)
class NaturalResult:
    """What MinPath did with one natural CoT, against its gold."""

    id: str
    split: str
    compressed: bool
    path_exact: bool
    rederived: bool
    kept: tuple[str, ...]
    fallback: str | None
    token_ratio: float

    @property
    def ok(self) -> bool:
        """Compressed to exactly the gold path, and the answer re-derived from the kept steps."""
        return self.compressed and self.path_exact and self.rederived

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "split": self.split, "ok": self.ok, "compressed": self.compressed,
            "path_exact": self.path_exact, "rederived": self.rederived, "kept": list(self.kept),
            "fallback": self.fallback, "token_ratio": self.token_ratio,
        }  # fmt: skip


def load_natural(split: str | None = None) -> list[NaturalCoT]:
    """The shipped natural CoTs (``split``: ``"design"``, ``"heldout"`` or None for all)."""
    text = resources.files("minpath").joinpath("data/natural_cots.jsonl").read_text("utf-8")
    out = []
    for line in text.splitlines():
        if line.strip():
            d = json.loads(line)
            out.append(NaturalCoT(d["id"], d["split"], d["question"], d["cot"], d["answer"],
                                  tuple(d["needed"])))  # fmt: skip
    return [c for c in out if split is None or c.split == split]


def score_one(item: NaturalCoT) -> NaturalResult:
    """Compress ``item`` with the rule typer and compare the kept sentences with the gold."""
    gold = parse_number(item.answer)
    c = compress(item.question, item.cot, gold_answer=gold)
    steps = segment(item.cot)
    kept = tuple(steps[i].text for i in c.kept) if c.compressed else ()
    ok, _ = derivable(item.question, c.text)
    return NaturalResult(
        item.id, item.split, c.compressed, set(kept) == set(item.needed) and len(kept) ==
        len(item.needed), c.compressed and ok, kept, c.fallback,
        len(c.text) / max(1, len(item.cot)),
    )  # fmt: skip


def score_natural(items: list[NaturalCoT] | None = None) -> list[NaturalResult]:
    """:func:`score_one` for every item (all shipped CoTs by default)."""
    return [score_one(item) for item in (load_natural() if items is None else items)]
