"""Scripted stochastic debaters with known behaviour, grouped into families, and their simulator.

A scripted model is a :class:`Profile` of four numbers: ``accuracy`` a (chance that an
independent answer is the gold option; wrong answers are uniform over the other options),
``conformity`` k (chance that, from round 1 on, the agent adopts the plurality of the other
agents' previous answers instead of answering independently again), ``parse_fail`` q (chance
that a response names no option) and ``position_bias`` b (chance that an independent answer is
simply the first option shown, whatever it is). The rule, for each call:

    independent answer:  with prob. b the first option shown, else with prob. a the gold
                         option, else a uniform wrong one
    round 0:             an independent answer
    round r >= 1:        with prob. k, and if any other agent's previous answer parsed:
                             the plurality of the others' previous answers; on a tie its own
                             previous answer if that is among the tied, else a uniform choice
                             among the tied
                         otherwise an independent answer
    then:                with prob. q the response is unparseable (whatever was chosen)

:class:`ScriptedDebater` plays the rule through the real text path: it reads the transcript the
runner renders (the options in the order this debate shows them, its own and the others'
previous responses, coded with the ledger's coder) and writes free text. Its random draws come
from the seed the runner sends with each call, so the same call always gets the same answer, in
any order and after any resume. :func:`rule_mismatches` applies the same rule directly to a
ledger's recorded inputs with the same draws: zero mismatches means the runner showed every
agent exactly what it should have and the coder read back exactly what was written.
:func:`simulate` draws the same process for many debates at once in numpy (gold at index 0,
options exchangeable, the first-shown option uniform as under shuffling): the true collapse and
correction rates the text-path ledger must reproduce.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from debate_ledger.coders import DEFAULT_CODER, code_answer
from debate_ledger.schemas import LETTERS, LedgerError, LedgerRow, Question
from paperstack.llm import RuleAgent
from paperstack.llm.base import Prompt, as_messages, check_prompts

__all__ = [
    "DEMO_MODELS",
    "Profile",
    "ScriptedDebater",
    "decide",
    "rule_mismatches",
    "simulate",
]


@dataclass(frozen=True)
class Profile:
    """A scripted model's behaviour (see the module docstring for the rule)."""

    name: str
    accuracy: float
    conformity: float
    parse_fail: float = 0.0
    position_bias: float = 0.0

    def __post_init__(self) -> None:
        for field in ("accuracy", "conformity", "parse_fail", "position_bias"):
            v = getattr(self, field)
            if not 0.0 <= v <= 1.0:
                raise LedgerError(f"profile {self.name}: {field} must be in [0, 1], got {v}")


#: The demo's scripted world: six families of two models each (family = how its agents treat
#: each other: conformity, care, position habits; model = how much it knows). With the tiny
#: transformers family that makes G = 7 families, as in the paper's screen.
DEMO_MODELS: tuple[tuple[str, Profile], ...] = (
    ("indep", Profile("indep-strong", accuracy=0.75, conformity=0.15, parse_fail=0.01)),
    ("indep", Profile("indep-weak", accuracy=0.45, conformity=0.20, parse_fail=0.03)),
    ("herd", Profile("herd-strong", accuracy=0.70, conformity=0.85)),
    ("herd", Profile("herd-weak", accuracy=0.50, conformity=0.80, parse_fail=0.05)),
    ("mid", Profile("mid-a", accuracy=0.60, conformity=0.50, parse_fail=0.02)),
    ("mid", Profile("mid-b", accuracy=0.65, conformity=0.45, parse_fail=0.02)),
    ("sloppy", Profile("sloppy-a", accuracy=0.55, conformity=0.35, parse_fail=0.15)),
    ("sloppy", Profile("sloppy-b", accuracy=0.60, conformity=0.30, parse_fail=0.10)),
    ("biased", Profile("biased-a", accuracy=0.55, conformity=0.40, position_bias=0.30)),
    ("biased", Profile("biased-b", accuracy=0.65, conformity=0.40, position_bias=0.20)),
    ("stubborn", Profile("stubborn-a", accuracy=0.60, conformity=0.05, parse_fail=0.02)),
    ("stubborn", Profile("stubborn-b", accuracy=0.50, conformity=0.10, parse_fail=0.02)),
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
_OPTION = re.compile(r" ([A-J])\) ")
_OTHER_LINE = re.compile(r"^Agent (\d+): (.*)$")
_OWN_LINE = re.compile(r"^Your previous answer: (.*)$")


@dataclass(frozen=True)
class Draws:
    """The uniforms one call consumes, in a fixed order."""

    conform: float
    tie: float
    bias: float
    correct: float
    wrong: float
    fail: float

    @classmethod
    def of(cls, rng: random.Random) -> Draws:
        return cls(*(rng.random() for _ in range(6)))


def decide(
    profile: Profile,
    n_options: int,
    gold: str,
    own: str | None,
    others: Sequence[str],
    later: bool,
    u: Draws,
) -> str | None:
    """The rule: the shown letter this call answers, or ``None`` (an unparseable response).
    ``gold`` is the gold option's shown letter; ``own``/``others`` are shown letters."""
    letters = LETTERS[:n_options]
    if later and u.conform < profile.conformity and others:
        counts = {x: list(others).count(x) for x in letters}
        top = max(counts.values())
        tied = [x for x in letters if counts[x] == top]
        choice = own if own in tied else tied[int(u.tie * len(tied))]
    elif u.bias < profile.position_bias:
        choice = letters[0]
    elif u.correct < profile.accuracy:
        choice = gold
    else:
        wrong = [x for x in letters if x != gold]
        choice = wrong[int(u.wrong * len(wrong))]
    return None if u.fail < profile.parse_fail else choice


def _text(choice: str | None, u: Draws) -> str:
    style = int(u.fail * 1e6) % 4
    if choice is None:
        return _FAIL_TEXTS[style % len(_FAIL_TEXTS)]
    return _ANSWER_TEXTS[style].format(x=choice)


def parse_question(line: str) -> tuple[str, list[str]]:
    """(text, options in shown order) of a rendered ``text A) x B) y ...`` line."""
    parts = _OPTION.split(" " + line if line.startswith("A) ") else line)
    if len(parts) < 5 or parts[1] != "A":
        raise LedgerError(f"not a rendered multiple-choice question: {line[:60]!r}")
    text, rest = parts[0], parts[1:]
    letters, options = rest[0::2], rest[1::2]
    if "".join(letters) != LETTERS[: len(letters)]:
        raise LedgerError(f"options out of order in {line[:60]!r}")
    return text, [o.strip() for o in options]


class ScriptedDebater(RuleAgent):
    """One scripted model's agents, answering through text. ``key`` maps a question (its text
    and its set of options) to the gold option's text, so the agent finds the gold letter in
    whatever order the debate shows the options; everything else (its own and the others'
    previous answers) it reads from the transcript, coding them with ``coder``."""

    def __init__(
        self,
        profile: Profile,
        key: dict[tuple[str, frozenset[str]], str],
        *,
        seed: int = 0,
        coder: str = DEFAULT_CODER,
    ) -> None:
        super().__init__(seed, name=f"scripted/{profile.name}")
        self.profile = profile
        self.key = key
        self.coder = coder

    @classmethod
    def for_questions(
        cls, profile: Profile, questions: Sequence[Question], **kw: Any
    ) -> ScriptedDebater:
        key = {
            (q.text, frozenset(q.options)): q.options[q.letters.index(q.gold)] for q in questions
        }
        return cls(profile, key, **kw)

    def draws(self, seed: int | None, messages: list[dict[str, Any]]) -> Draws:
        """The call's uniforms: from the seed sent with it (the runner's per-call seed) and
        this model's own seed and name; from the conversation when no seed is sent."""
        if seed is None:
            return Draws.of(self.rng(messages))
        blob = f"{self.seed}|{self.profile.name}|{seed}".encode()
        return Draws.of(random.Random(int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")))

    def read(self, messages: list[dict[str, Any]]) -> tuple[int, str, str | None, list[str], bool]:
        """(n_options, gold shown letter, own shown letter, others' shown letters, later)."""
        lines = str(messages[-1]["content"]).split("\n")
        text, options = parse_question(lines[0])
        gold_text = self.key.get((text, frozenset(options)))
        if gold_text is None:
            raise LedgerError(f"{self.name}: question not in the answer key: {text[:60]!r}")
        n = len(options)
        gold = LETTERS[options.index(gold_text)]
        own: str | None = None
        others: list[str] = []
        later = False
        for line in lines[1:]:
            if m := _OWN_LINE.match(line):
                own, later = code_answer(m.group(1), n, self.coder), True
            elif m := _OTHER_LINE.match(line):
                later = True
                coded = code_answer(m.group(2), n, self.coder)
                if coded is not None:
                    others.append(coded)
        return n, gold, own, others, later

    def respond(self, messages: list[dict[str, Any]]) -> str:
        return self._reply(messages, None)

    def _reply(self, messages: list[dict[str, Any]], seed: int | None) -> str:
        n, gold, own, others, later = self.read(messages)
        u = self.draws(seed, messages)
        return _text(decide(self.profile, n, gold, own, others, later, u), u)

    def generate(  # type: ignore[override]
        self, prompts: Sequence[Prompt], *, n: int = 1, seed: int | None = None, **_: Any
    ) -> list[list[str]]:
        """One reply per prompt, drawn with ``seed`` (``n`` copies of it); a rule has no
        temperature, token budget or stop strings."""
        return [[self._reply(as_messages(p), seed)] * n for p in check_prompts(prompts)]


def rule_mismatches(debater: ScriptedDebater, rows: Sequence[LedgerRow]) -> tuple[int, int]:
    """(mismatches, rows checked): each row's response recomputed by applying the rule to the
    ledger's own record of what the agent was shown (the option order, its own and the other
    agents' previous responses, coded with the debater's coder) with the row's seed."""
    by_key = {r.key: r for r in rows}
    agents = 1 + max(r.agent for r in rows if r.sample == 0)
    bad = 0
    for r in rows:
        n = r.n_options
        letters = LETTERS[:n]
        gold = letters[r.order.index(r.gold)]
        own: str | None = None
        others: list[str] = []
        if r.round > 0:
            prev = [by_key[(r.debate_id, a, r.round - 1, 0)] for a in range(agents)]
            own = code_answer(prev[r.agent].response, n, debater.coder)
            for a, p in enumerate(prev):
                coded = code_answer(p.response, n, debater.coder)
                if a != r.agent and coded is not None:
                    others.append(coded)
        u = debater.draws(r.seed, [])
        expected = _text(decide(debater.profile, n, gold, own, others, r.round > 0, u), u)
        bad += expected != r.response
    return bad, len(rows)


def simulate(
    profile: Profile,
    n_debates: int,
    agents: int,
    rounds: int,
    n_options: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Answers of ``n_debates`` debates under ``profile``'s rule, shape (D, A, R + 1), as option
    indices with the gold option at 0 and -1 for a parse failure (options are exchangeable, so
    fixing gold at 0 loses nothing; the option shown first is uniform per debate, as under
    shuffling). ``rounds`` counts the rounds after round 0."""
    if n_debates < 1 or agents < 1 or rounds < 0 or n_options < 2:
        raise LedgerError("simulate needs n_debates >= 1, agents >= 1, rounds >= 0, options >= 2")
    d, a, k = n_debates, agents, n_options
    out = np.empty((d, a, rounds + 1), dtype=np.int8)
    first = rng.integers(0, k, size=(d, 1))  # the option each debate shows as "A"

    def independent(shape: tuple[int, ...]) -> np.ndarray:
        biased = rng.random(shape) < profile.position_bias
        correct = rng.random(shape) < profile.accuracy
        wrong = 1 + (rng.random(shape) * (k - 1)).astype(np.int64)
        return np.where(biased, first, np.where(correct, 0, wrong))

    chosen = independent((d, a))
    out[:, :, 0] = np.where(rng.random((d, a)) < profile.parse_fail, -1, chosen)
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
        conform = (u_conform < profile.conformity) & (n_tied > 0)
        chosen = np.where(conform, plurality, independent((d, a)))
        out[:, :, r] = np.where(rng.random((d, a)) < profile.parse_fail, -1, chosen)
    return out
