"""Multilingual preference pairs: the record, JSONL loading and writing, and the checks that
turn bad input into one clear error (a language with no pairs, identical chosen and rejected,
an unknown language code).

A JSONL line is one pair: ``{"lang": "sw", "prompt": "...", "chosen": "...", "rejected": "..."}``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from meta_pref.errors import MetaPrefError

__all__ = [
    "PreferencePair",
    "by_language",
    "check_pairs",
    "load_pairs",
    "select_languages",
    "write_pairs",
]

FIELDS = ("lang", "prompt", "chosen", "rejected")


@dataclass(frozen=True)
class PreferencePair:
    """One preference: in language ``lang``, ``chosen`` is preferred to ``rejected`` as a
    response to ``prompt``."""

    lang: str
    prompt: str
    chosen: str
    rejected: str


def check_pairs(pairs: Iterable[PreferencePair], where: str = "pairs") -> list[PreferencePair]:
    """The pairs as a list, or one error naming the first pair whose chosen and rejected
    responses are identical (it carries no preference: its Bradley-Terry and DPO gradients are
    zero) or whose language code is empty."""
    out = list(pairs)
    for i, pair in enumerate(out):
        if not pair.lang:
            raise MetaPrefError(f"{where} {i}: empty language code")
        if pair.chosen == pair.rejected:
            raise MetaPrefError(
                f"{where} {i} (language {pair.lang!r}): chosen and rejected are identical "
                f"({pair.chosen!r}), so the pair states no preference"
            )
    return out


def by_language(pairs: Iterable[PreferencePair]) -> dict[str, list[PreferencePair]]:
    """Pairs grouped by language code, in first-seen order."""
    out: dict[str, list[PreferencePair]] = {}
    for pair in pairs:
        out.setdefault(pair.lang, []).append(pair)
    return out


def select_languages(
    tasks: Mapping[str, Sequence[PreferencePair]], codes: Iterable[str], role: str = "language"
) -> dict[str, list[PreferencePair]]:
    """``{code: pairs}`` for the requested codes: one error for a code the data does not know
    and one for a language that has no pairs (meta-learning needs every task to have some)."""
    out: dict[str, list[PreferencePair]] = {}
    for code in codes:
        if code not in tasks:
            known = ", ".join(sorted(tasks)) or "none"
            raise MetaPrefError(f"unknown language code {code!r} for {role}; known: {known}")
        if not tasks[code]:
            raise MetaPrefError(f"{role} {code!r} has no pairs")
        out[code] = list(tasks[code])
    return out


def load_pairs(path: str | os.PathLike[str]) -> list[PreferencePair]:
    """Read a multilingual preference JSONL file (one pair per line, blank lines skipped).
    Every error names the file and the line."""
    from paperstack.records import iter_user_jsonl

    pairs: list[PreferencePair] = []
    lines = iter_user_jsonl(path, what="a JSONL file of pairs", error=MetaPrefError)
    for where, record in lines:
        for name in FIELDS:
            if name not in record:
                raise MetaPrefError(f"{where}: missing field {name!r}")
            if not isinstance(record[name], str):
                raise MetaPrefError(f"{where}: field {name!r} is not a string")
            if name in ("lang", "chosen", "rejected") and not record[name]:
                raise MetaPrefError(f"{where}: field {name!r} is empty")
        pair = PreferencePair(*(record[name] for name in FIELDS))
        if pair.chosen == pair.rejected:
            raise MetaPrefError(
                f"{where}: chosen and rejected are identical ({pair.chosen!r}), so the pair "
                "states no preference"
            )
        pairs.append(pair)
    if not pairs:
        raise MetaPrefError(f"{path}: no pairs")
    return pairs


def write_pairs(path: str | os.PathLike[str], pairs: Iterable[PreferencePair]) -> Path:
    """Write pairs as JSONL (atomically: a killed run leaves no half-written file)."""
    from paperstack.records import atomic_write

    path = Path(path)
    body = "".join(json.dumps(asdict(p), ensure_ascii=False) + "\n" for p in pairs)
    atomic_write(path, body)
    return path
