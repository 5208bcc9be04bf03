"""Scripted stochastic agent families with known behaviour, and their vectorised simulator.

A family is three numbers: ``accuracy`` a (chance that an independent answer is the gold one;
wrong answers are uniform over the other options), ``conformity`` k (chance that, from round 1
on, an agent adopts the plurality of the other agents' previous answers instead of answering
independently again) and ``parse_fail`` q (chance that a response names no option). The rule:

    round 0:  independent answer
    round r:  with prob. k, and if any other agent's previous answer parsed:
                  the plurality of the others' previous answers; on a tie, its own previous
                  answer if that is among the tied, else a uniform choice among the tied
              otherwise: an independent answer
    then:     with prob. q the response is unparseable (whatever was chosen)

:class:`ScriptedDebater` plays the rule through the real text path (it reads the transcript the
runner renders, with the same coder the ledger uses, and writes free text), while
:func:`simulate` draws the same process for many debates at once in numpy. Because both follow
one rule, the simulator gives the true collapse and correction rates that the text-path ledger
must reproduce: a check on the runner, the coder and the ledger analysis together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from debate_ledger.coders import code_answer
from debate_ledger.schemas import LETTERS, LedgerError, Question
from paperstack.llm import RuleAgent

__all__ = ["DEMO_FAMILIES", "Family", "ScriptedDebater", "simulate"]


@dataclass(frozen=True)
class Family:
    name: str
    accuracy: float
    conformity: float
    parse_fail: float = 0.0

    def __post_init__(self) -> None:
        for field in ("accuracy", "conformity", "parse_fail"):
            v = getattr(self, field)
            if not 0.0 <= v <= 1.0:
                raise LedgerError(f"family {self.name}: {field} must be in [0, 1], got {v}")


# Six families spanning weak/strong and independent/conformist agents, so collapse risk varies
# across families for the screen (G = 6 scripted + the tiny transformers family = 7).
DEMO_FAMILIES = (
    Family("indep-strong", accuracy=0.75, conformity=0.15, parse_fail=0.01),
    Family("indep-weak", accuracy=0.45, conformity=0.20, parse_fail=0.03),
    Family("mid", accuracy=0.60, conformity=0.50, parse_fail=0.02),
    Family("herd-strong", accuracy=0.70, conformity=0.85, parse_fail=0.00),
    Family("herd-weak", accuracy=0.50, conformity=0.80, parse_fail=0.05),
    Family("sloppy", accuracy=0.55, conformity=0.35, parse_fail=0.15),
)

_ANSWER_TEXTS = (
    "I think the answer is ({x}).",
    "After weighing the options, my answer is ({x}).",
    "({x})",
    "The correct option should be ({x}), since the others do not fit.",
)
_FAIL_TEXTS = (
    "I am not sure which of these is right.",
    "It could be more than one of them; hard to say.",
    "Let me think about the question again.",
)
_OTHER_LINE = re.compile(r"^Agent (\d+): (.*)$")
_OWN_LINE = re.compile(r"^Your previous answer: (.*)$")


class ScriptedDebater(RuleAgent):
    """One family's agents, answering through text. ``key`` maps a rendered question (first
    line of the user message) to its gold letter; the agent reads everything else (its own and
    the others' previous answers) from the transcript, parsing with ``coder``."""

    def __init__(
        self, family: Family, key: dict[str, str], *, seed: int = 0, coder: str = "letter-v1"
    ) -> None:
        super().__init__(seed, name=f"scripted/{family.name}")
        self.family = family
        self.key = key
        self.coder = coder

    @classmethod
    def for_questions(cls, family: Family, questions: list[Question], **kw: Any) -> ScriptedDebater:
        return cls(family, {q.render(): q.gold for q in questions}, **kw)

    def respond(self, messages: list[dict[str, Any]]) -> str:
        user = str(messages[-1]["content"])
        lines = user.split("\n")
        question = lines[0].split(" (independent sample")[0]
        if question not in self.key:
            raise LedgerError(f"{self.name}: question not in the answer key: {question[:60]!r}")
        gold = self.key[question]
        n = len(re.findall(r"(?:^| )[A-J]\) ", question))
        letters = LETTERS[:n]
        own: str | None = None
        others: list[str] = []
        for line in lines[1:]:
            if m := _OWN_LINE.match(line):
                own = code_answer(m.group(1), n, self.coder)
            elif m := _OTHER_LINE.match(line):
                coded = code_answer(m.group(2), n, self.coder)
                if coded is not None:
                    others.append(coded)
        later = len(lines) > 1
        rng = self.rng(messages)
        u_conform, u_tie, u_correct, u_wrong, u_fail = (rng.random() for _ in range(5))
        f = self.family
        if later and u_conform < f.conformity and others:
            counts = {x: others.count(x) for x in letters}
            top = max(counts.values())
            tied = [x for x in letters if counts[x] == top]
            choice = own if own in tied else tied[int(u_tie * len(tied))]
        elif u_correct < f.accuracy:
            choice = gold
        else:
            wrong = [x for x in letters if x != gold]
            choice = wrong[int(u_wrong * len(wrong))]
        style = int(u_fail * 1e6) % 4
        if u_fail < f.parse_fail:
            return _FAIL_TEXTS[style % len(_FAIL_TEXTS)]
        return _ANSWER_TEXTS[style].format(x=choice)


def simulate(
    family: Family,
    n_debates: int,
    agents: int,
    rounds: int,
    n_options: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Answers of ``n_debates`` debates under ``family``'s rule, shape (D, A, R + 1), as option
    indices with the gold option at 0 and -1 for a parse failure (options are exchangeable, so
    fixing gold at 0 loses nothing). ``rounds`` counts the rounds after round 0."""
    if n_debates < 1 or agents < 1 or rounds < 0 or n_options < 2:
        raise LedgerError("simulate needs n_debates >= 1, agents >= 1, rounds >= 0, options >= 2")
    d, a, k = n_debates, agents, n_options
    out = np.empty((d, a, rounds + 1), dtype=np.int8)

    def independent(shape: tuple[int, ...]) -> np.ndarray:
        correct = rng.random(shape) < family.accuracy
        wrong = 1 + (rng.random(shape) * (k - 1)).astype(np.int64)
        return np.where(correct, 0, wrong)

    chosen = independent((d, a))
    visible = np.where(rng.random((d, a)) < family.parse_fail, -1, chosen)
    out[:, :, 0] = visible
    for r in range(1, rounds + 1):
        prev = out[:, :, r - 1].astype(np.int64)
        onehot = (prev[:, :, None] == np.arange(k)).astype(np.int64)  # (D, A, K), -1 -> zeros
        others = onehot.sum(axis=1, keepdims=True) - onehot  # counts among the other agents
        top = others.max(axis=2, keepdims=True)
        tied = (others == top) & (top > 0)
        n_tied = tied.sum(axis=2)
        own_tied = np.take_along_axis(tied, np.clip(prev, 0, None)[:, :, None], 2)[:, :, 0]
        own_tied &= prev >= 0
        u_conform, u_tie = rng.random((d, a)), rng.random((d, a))
        pick = (u_tie * np.maximum(n_tied, 1)).astype(np.int64)  # index among the tied
        rank = np.cumsum(tied, axis=2) - 1
        tie_choice = np.argmax(tied & (rank == pick[:, :, None]), axis=2)
        plurality = np.where(own_tied, prev, tie_choice)
        conform = (u_conform < family.conformity) & (n_tied > 0)
        chosen = np.where(conform, plurality, independent((d, a)))
        out[:, :, r] = np.where(rng.random((d, a)) < family.parse_fail, -1, chosen)
    return out
