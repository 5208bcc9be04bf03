"""A generated fact world: entities with attributes across named domains.

Every entity has one value for every attribute of every domain (``home``: city, pet;
``work``: job, tool; ``science``: element, planet), drawn from small closed value sets so a
method can check output validity ("an answer of the right type") and pose multiple-choice
questions with same-type distractors. The world depends only on ``(n_entities, world_seed)``;
restricting ``domains`` selects which facts are asked about without changing the world, so an
unlearning method can take one domain as the forget set and the others as forget-adjacent
questions about the very same entities.

What "held-out" means here: a fact cannot be held out (an unseen fact is unknowable), so
by default the ``test`` split measures *recall of the trained facts*: every fact, asked under
the training phrasings (:data:`TRAIN_TEMPLATES`) in an order and mix independent of the
training draw. With ``heldout_template=True`` the test split instead asks every fact under
:data:`TEST_TEMPLATE`, a phrasing never trained on. Measured: the default 1.3M-parameter
model recalls the facts almost perfectly once trained but answers the unseen phrasing
correctly only 17% of the time (chance is 10%), so the floor is asserted on
recall and the paraphrase variant is left to methods that study generalisation.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Literal, NamedTuple

from paperstack.tasks.base import (
    Example,
    Split,
    Task,
    TaskError,
    check_n,
    completion_text,
    split_rng,
)

__all__ = ["DOMAINS", "TEST_TEMPLATE", "TRAIN_TEMPLATES", "Fact", "FactWorld"]

#: Domain -> attribute -> closed value set. Ten values each: chance is 10% in QA form.
DOMAINS: dict[str, dict[str, tuple[str, ...]]] = {
    "home": {
        "city": (
            "Paris",
            "Oslo",
            "Lima",
            "Cairo",
            "Delhi",
            "Tokyo",
            "Quito",
            "Rome",
            "Accra",
            "Hanoi",
        ),
        "pet": ("cat", "dog", "owl", "fox", "eel", "yak", "bat", "crow", "frog", "hare"),
    },
    "work": {
        "job": (
            "baker",
            "pilot",
            "nurse",
            "judge",
            "miner",
            "tailor",
            "poet",
            "clerk",
            "chef",
            "guard",
        ),
        "tool": (
            "hammer",
            "saw",
            "drill",
            "chisel",
            "wrench",
            "ladder",
            "needle",
            "brush",
            "shovel",
            "anvil",
        ),
    },
    "science": {
        "element": (
            "neon",
            "argon",
            "zinc",
            "iron",
            "gold",
            "tin",
            "lead",
            "boron",
            "xenon",
            "carbon",
        ),
        "planet": (
            "Mercury",
            "Venus",
            "Earth",
            "Mars",
            "Jupiter",
            "Saturn",
            "Uranus",
            "Neptune",
            "Pluto",
            "Ceres",
        ),
    },
}

#: Question phrasings used for training; ``{e}`` is the entity, ``{a}`` the attribute.
TRAIN_TEMPLATES: tuple[str, ...] = (
    "What is the {a} of {e}?",
    "{e} has which {a}?",
    "Name the {a} of {e}.",
)
#: The phrasing the ``test`` split uses: never seen in training.
TEST_TEMPLATE = "Which {a} does {e} have?"

_ONSETS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


class Fact(NamedTuple):
    """One row of the fact table."""

    entity: str
    domain: str
    attribute: str
    value: str


@dataclass(frozen=True)
class FactWorld(Task):
    """The fact world as a task.

    ``form="qa"``: prompt a question, answer the value. ``form="mc"``: the question plus
    ``n_choices`` lettered options of the same type; answer the letter (``"B"``).
    ``meta``: ``entity``, ``domain``, ``attribute``, ``value``, ``template``, and for MC
    ``choices`` and ``letter``.
    """

    name: ClassVar[str] = "facts"
    n_entities: int = 40
    world_seed: int = 0
    form: Literal["qa", "mc"] = "qa"
    n_choices: int = 4
    domains: tuple[str, ...] | None = None
    heldout_template: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.n_entities <= 5000:
            raise TaskError(f"facts: n_entities must be in 1..5000, got {self.n_entities}")
        if self.form not in ("qa", "mc"):
            raise TaskError(f"facts: form must be 'qa' or 'mc', got {self.form!r}")
        if not 2 <= self.n_choices <= min(len(DOMAINS["home"]["city"]), 26):
            raise TaskError(f"facts: n_choices must be in 2..10, got {self.n_choices}")
        if self.domains is not None:
            object.__setattr__(self, "domains", tuple(self.domains))
            unknown = set(self.domains) - set(DOMAINS)
            if unknown or not self.domains:
                raise TaskError(
                    f"facts: unknown domains {sorted(unknown)}; known: {sorted(DOMAINS)}"
                )

    @cached_property
    def entities(self) -> list[str]:
        """Generated entity names (pronounceable, unique, deterministic by ``world_seed``)."""
        rng = split_rng("facts-world", self.world_seed, "train")
        names: list[str] = []
        seen: set[str] = set()
        while len(names) < self.n_entities:
            syllables = rng.choice((2, 2, 3))
            name = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables))
            name = name.capitalize()
            if name not in seen:
                seen.add(name)
                names.append(name)
        return names

    @cached_property
    def table(self) -> dict[str, dict[str, str]]:
        """entity -> attribute -> value, for every domain (the raw fact table)."""
        rng = split_rng("facts-values", self.world_seed, "train")
        return {
            e: {a: rng.choice(values) for attrs in DOMAINS.values() for a, values in attrs.items()}
            for e in self.entities
        }

    def facts(self, domains: Sequence[str] | None = None) -> list[Fact]:
        """Fact rows, in world order, for ``domains`` (default: this task's, else all)."""
        wanted = tuple(domains) if domains is not None else (self.domains or tuple(DOMAINS))
        return [
            Fact(e, d, a, self.table[e][a])
            for e in self.entities
            for d in wanted
            for a in DOMAINS[d]
        ]

    def question(
        self,
        fact: Fact,
        template: str = TRAIN_TEMPLATES[0],
        form: Literal["qa", "mc"] | None = None,
        rng: Any = None,
    ) -> Example:
        """An :class:`Example` asking ``fact`` (MC options shuffled by ``rng``, required for MC)."""
        form = form or self.form
        q = template.format(e=fact.entity, a=fact.attribute)
        meta: dict[str, Any] = {**fact._asdict(), "template": template}
        if form == "qa":
            return Example(self.name, q, fact.value, meta)
        if rng is None:
            raise TaskError("facts: a multiple-choice question needs an rng to place the options")
        values = DOMAINS[fact.domain][fact.attribute]
        choices = [
            fact.value,
            *rng.sample([v for v in values if v != fact.value], self.n_choices - 1),
        ]
        rng.shuffle(choices)
        letter = string.ascii_uppercase[choices.index(fact.value)]
        options = " ".join(f"{string.ascii_uppercase[i]}) {c}" for i, c in enumerate(choices))
        meta.update(choices=choices, letter=letter)
        return Example(self.name, f"{q} {options}", letter, meta)

    def generate(self, n: int, seed: int = 0, split: Split = "train") -> list[Example]:
        """``n`` questions cycling through every fact in a seeded order (full coverage first).

        ``train`` draws among :data:`TRAIN_TEMPLATES`; ``test`` does too (recall of the
        trained facts, from an independent random stream), or uses :data:`TEST_TEMPLATE`
        when ``heldout_template`` is set.
        """
        rng = split_rng(self.name, seed, split)
        rows = self.facts()
        out: list[Example] = []
        while len(out) < check_n(n):
            order = list(range(len(rows)))
            rng.shuffle(order)
            for i in order[: n - len(out)]:
                paraphrase = split == "test" and self.heldout_template
                template = TEST_TEMPLATE if paraphrase else rng.choice(TRAIN_TEMPLATES)
                out.append(self.question(rows[i], template, rng=rng))
        return out

    def verify(self, example: Example, completion: str | Sequence[Mapping[str, Any]]) -> bool:
        """QA: the completion's first line equals the value (case and outer spaces/dots ignored).
        MC: the first letter-like token (``B``, ``B)``, ``(B)``) is the gold letter."""
        text = completion_text(completion).strip()
        if "choices" in example.meta:
            m = re.match(r"^\(?([A-Za-z])\b", text)
            return m is not None and m.group(1).upper() == example.meta["letter"]
        first = text.splitlines()[0] if text else ""
        return first.strip(" .").lower() == str(example.meta["value"]).lower()

    def is_valid_output(
        self, example: Example, completion: str | Sequence[Mapping[str, Any]]
    ) -> bool:
        """Whether a QA completion names some value of the asked attribute's type (right or not)."""
        first = (completion_text(completion).strip().splitlines() or [""])[0].strip(" .").lower()
        values = DOMAINS[example.meta["domain"]][example.meta["attribute"]]
        return first in {v.lower() for v in values}
