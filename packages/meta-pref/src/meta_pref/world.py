"""The synthetic multilingual world: languages as partial token remappings and word-order
changes of one concept grammar, with a known true reward on concepts.

Concepts are ``0..C-1``. A *prompt* is two concepts ``(q, z)``: a topic ``q`` and a distractor
``z``; the answer to ``q`` is ``answer[q]``, a fixed permutation shared by every language (the
transferable knowledge). A *response* is 1 to 3 concepts. The true reward lives on concepts::

    r*(q, y) = 1[answer(q) ∈ y] - 0.2 (|y| - 1) - 0.5 · #repeats(y)

so the best response is the answer alone. A *language* writes concept ``c`` as the letter
``surface[c]``: the identity (the base grammar, letters ``a``, ``b``, ...) except on a subset of
``round(distance · C)`` concepts whose letters it permutes among themselves (a partial token
remapping), and from ``distance >= 0.5`` on it also reverses word order (distractor first,
response written back to front). ``distance`` is the knob that moves a language away from the
base grammar: two languages share every concept's spelling outside their remapped subsets, so
transfer is real, and conflicts on the remapped letters, so it is not trivial.

Text is one character per concept; the prompt and response are joined by :data:`SEP` and are
tokenized by :func:`paperstack.tiny.build_tokenizer` (one token per character).
"""

from __future__ import annotations

import random
import string
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from meta_pref.data import PreferencePair
from meta_pref.errors import MetaPrefError

__all__ = [
    "SEP",
    "Language",
    "MultilingualWorld",
    "default_world",
]

#: Separates the prompt from the response in a reward model's input and a policy's prompt.
SEP = ">"


@dataclass(frozen=True)
class Language:
    """One language: its code, its distance from the base grammar and its spelling."""

    code: str
    distance: float
    surface: tuple[str, ...]  # surface[c]: the letter that writes concept c
    reversed: bool

    def write(self, concepts: Sequence[int]) -> str:
        return "".join(self.surface[c] for c in concepts)

    def read(self, text: str) -> list[int | None]:
        """Concepts of ``text``; ``None`` for a character that writes no concept."""
        inverse = {s: c for c, s in enumerate(self.surface)}
        return [inverse.get(ch) for ch in text]


def _code_seed(code: str, seed: int) -> int:
    return zlib.crc32(f"{seed}:{code}".encode())


@dataclass
class MultilingualWorld:
    """Concepts, the answer map, the true reward and the languages (see the module docstring).

    ``languages`` maps a code to its distance from the base grammar; each language's remapped
    subset and permutation are drawn from ``(seed, code)``, so a world is the same everywhere.
    """

    languages: dict[str, float]
    concepts: int = 8
    max_response: int = 3
    seed: int = 0
    answer: tuple[int, ...] = field(init=False)
    _langs: dict[str, Language] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 2 <= self.concepts <= 26:
            raise MetaPrefError(f"concepts={self.concepts}: must be between 2 and 26")
        rng = random.Random(self.seed)
        answer = list(range(self.concepts))
        while any(a == i for i, a in enumerate(answer)):
            rng.shuffle(answer)
        self.answer = tuple(answer)
        self._langs = {}
        for code, distance in self.languages.items():
            if not 0.0 <= distance <= 1.0:
                raise MetaPrefError(f"language {code!r}: distance {distance} is not in [0, 1]")
            self._langs[code] = self._make(code, distance)

    def _make(self, code: str, distance: float) -> Language:
        rng = random.Random(_code_seed(code, self.seed))
        letters = list(string.ascii_lowercase[: self.concepts])
        k = round(distance * self.concepts)
        subset = sorted(rng.sample(range(self.concepts), k)) if k >= 2 else []
        rotated = subset[1:] + subset[:1]  # a derangement of the subset: every one changes
        surface = list(letters)
        for c, d in zip(subset, rotated, strict=True):
            surface[c] = letters[d]
        return Language(code, distance, tuple(surface), reversed=distance >= 0.5)

    # ------------------------------------------------------------------ languages

    @property
    def codes(self) -> list[str]:
        return list(self._langs)

    def language(self, code: str) -> Language:
        try:
            return self._langs[code]
        except KeyError:
            raise MetaPrefError(
                f"unknown language code {code!r}; this world has: {', '.join(self._langs)}"
            ) from None

    def check_codes(self, codes: Iterable[str]) -> None:
        for code in codes:
            self.language(code)

    # ------------------------------------------------------------------ reward

    def true_reward(self, q: int, response: Sequence[int | None]) -> float:
        """r*(q, y) on concepts (see the module docstring); a character that writes no
        concept counts toward the length, and an empty response scores -1."""
        if not response:
            return -1.0
        known = [c for c in response if c is not None]
        repeats = len(known) - len(set(known))
        hit = 1.0 if self.answer[q] in known else 0.0
        return hit - 0.2 * (len(response) - 1) - 0.5 * repeats

    def reward_of_text(self, code: str, prompt: str, response: str) -> float:
        """r* of a response written in language ``code`` to ``prompt`` (both surface text)."""
        lang = self.language(code)
        read = lang.read(prompt)
        q = read[-1] if lang.reversed else read[0]
        if q is None:
            raise MetaPrefError(f"prompt {prompt!r} does not start with a concept of {code!r}")
        return self.true_reward(q, lang.read(response))

    # ------------------------------------------------------------------ text

    def prompt_text(self, code: str, q: int, z: int) -> str:
        lang = self.language(code)
        return lang.write([z, q] if lang.reversed else [q, z])

    def response_text(self, code: str, concepts: Sequence[int]) -> str:
        lang = self.language(code)
        return lang.write(list(reversed(concepts)) if lang.reversed else concepts)

    def sample_prompt(self, rng: random.Random) -> tuple[int, int]:
        q = rng.randrange(self.concepts)
        z = rng.randrange(self.concepts - 1)
        return q, z + (z >= q)

    def sample_response(self, rng: random.Random, q: int) -> list[int]:
        """The behaviour distribution both the SFT data and the preference pairs come from:
        1 to ``max_response`` concepts, each the answer with probability 0.3, else uniform."""
        n = rng.randint(1, self.max_response)
        return [
            self.answer[q] if rng.random() < 0.3 else rng.randrange(self.concepts) for _ in range(n)
        ]

    # ------------------------------------------------------------------ data

    def pairs(self, code: str, n: int, seed: int) -> list[PreferencePair]:
        """``n`` preference pairs in language ``code``: two behaviour responses to one prompt,
        the one with the higher true reward chosen (ties redrawn)."""
        lang = self.language(code)
        rng = random.Random(_code_seed(code, seed) ^ 0x5EED)
        out: list[PreferencePair] = []
        while len(out) < n:
            q, z = self.sample_prompt(rng)
            a, b = self.sample_response(rng, q), self.sample_response(rng, q)
            ra, rb = self.true_reward(q, a), self.true_reward(q, b)
            if ra == rb:
                continue
            chosen, rejected = (a, b) if ra > rb else (b, a)
            out.append(
                PreferencePair(
                    lang=lang.code,
                    prompt=self.prompt_text(code, q, z),
                    chosen=self.response_text(code, chosen),
                    rejected=self.response_text(code, rejected),
                )
            )
        return out

    def sft_texts(self, codes: Iterable[str], n: int, seed: int) -> list[tuple[str, str]]:
        """``(prompt, response)`` pairs from the behaviour distribution in every language:
        the monolingual text the reference policy is trained on."""
        rng = random.Random(seed)
        codes = list(codes)
        out = []
        for i in range(n):
            code = codes[i % len(codes)]
            q, z = self.sample_prompt(rng)
            out.append(
                (
                    self.prompt_text(code, q, z),
                    self.response_text(code, self.sample_response(rng, q)),
                )
            )
        return out

    def eval_prompts(self, code: str, n: int, seed: int) -> list[str]:
        rng = random.Random(_code_seed(code, seed) ^ 0xE7A1)
        return [self.prompt_text(code, *self.sample_prompt(rng)) for _ in range(n)]


#: The demo's languages: six sources a quarter to a half away from the base grammar (one of
#: them reversed), a near target (0.25, same order), a far target (0.75, reversed) and a
#: validation language that only ever serves to choose hyper-parameters.
DEFAULT_LANGUAGES: dict[str, float] = {
    "s1": 0.25,
    "s2": 0.25,
    "s3": 0.25,
    "s4": 0.375,
    "s5": 0.375,
    "s6": 0.5,
    "near": 0.25,
    "far": 0.75,
    "val": 0.375,
}
SOURCES = ("s1", "s2", "s3", "s4", "s5", "s6")
TARGETS = {"near": "near", "far": "far"}


def default_world(seed: int = 0) -> MultilingualWorld:
    return MultilingualWorld(dict(DEFAULT_LANGUAGES), seed=seed)
