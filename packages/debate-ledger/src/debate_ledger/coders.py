"""Answer coders: versioned parsers from an agent's free text to one option letter.

A coder never guesses. When a response names no option, or names two different options with
equal standing, the coder returns ``None`` and the ledger records a parse failure; the audits
report the rate. Coders are versioned because changing a parser changes every downstream count:
a ledger row names the coder that produced its ``answer``, and ``rebuild`` can re-code the raw
responses with a newer coder to show what moved.

``letter-v1`` (the default) looks, in order of precedence, for
  1. an explicit final-answer phrase: ``answer is (C)``, ``Answer: C``, ``final answer: (C)``;
  2. a parenthesised letter ``(C)`` (the Du et al. debate format); the last one wins, because
     debaters often restate others' answers before giving their own;
  3. a response that is just a letter, optionally followed by ``)`` or ``.`` (what tiny models
     trained on the fact world emit).
Letters outside the question's options are ignored, never clamped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from debate_ledger.schemas import LETTERS, LedgerError

__all__ = ["CODERS", "DEFAULT_CODER", "code_answer", "get_coder"]

Coder = Callable[[str, int], "str | None"]

_FINAL = re.compile(r"(?i:final\s+answer|answer)\s*(?i:is|:)?\s*:?\s*\(?([A-J])\)?(?![A-Za-z])")
_PAREN = re.compile(r"\(([A-J])\)")
_BARE = re.compile(r"^\s*\(?([A-J])\)?[.)]?\s*$")


def _letter_v1(text: str, n_options: int) -> str | None:
    letters = LETTERS[:n_options]
    finals = [m.group(1) for m in _FINAL.finditer(text)]
    finals = [x for x in finals if x in letters]
    if finals:
        return finals[-1]
    parens = [m.group(1) for m in _PAREN.finditer(text) if m.group(1) in letters]
    if parens:
        return parens[-1]
    bare = _BARE.match(text)
    if bare and bare.group(1) in letters:
        return bare.group(1)
    return None


def _strict_paren_v1(text: str, n_options: int) -> str | None:
    """Only ``(X)``, and only when every parenthesised letter agrees (Du et al.'s parser is
    looser: it takes the last one). Useful to measure how much the default coder's fallbacks
    contribute."""
    letters = LETTERS[:n_options]
    found = {m.group(1) for m in _PAREN.finditer(text) if m.group(1) in letters}
    return found.pop() if len(found) == 1 else None


CODERS: dict[str, Coder] = {"letter-v1": _letter_v1, "strict-paren-v1": _strict_paren_v1}
DEFAULT_CODER = "letter-v1"


def get_coder(name: str) -> Coder:
    try:
        return CODERS[name]
    except KeyError:
        raise LedgerError(f"unknown coder {name!r}; known: {', '.join(sorted(CODERS))}") from None


def code_answer(text: str, n_options: int, coder: str = DEFAULT_CODER) -> str | None:
    """The option letter ``text`` commits to, or ``None`` (a recorded parse failure)."""
    if not 2 <= n_options <= len(LETTERS):
        raise LedgerError(f"n_options must be in 2..{len(LETTERS)}, got {n_options}")
    return get_coder(coder)(text, n_options)
