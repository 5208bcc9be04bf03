"""The Belief-Desire-Intention record every decision is logged as, and the parser of replies.

Before every action an agent states what it believes (the event, the audience's likely
reaction, its assessment of the meme), what it desires (a priority with its justification, a
risk tolerance with its justification), what it intends (the meme, the community, the
reasoning), and whether it acknowledges a risk of harm (``risk_acknowledged``). The schema is
a pydantic model (:class:`BDIRecord`); :func:`parse_bdi` turns a model's reply into a record or
a :class:`ParseFailure` that names why, which the market writes to the ledger instead of
guessing an action.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "PRIORITIES",
    "BDIRecord",
    "Belief",
    "Desire",
    "Intention",
    "ParseFailure",
    "parse_bdi",
]

PRIORITIES = (
    "karma_maximization",
    "survival",
    "community_building",
    "ethical_standing",
    "balanced",
)
Priority = Literal[
    "karma_maximization", "survival", "community_building", "ethical_standing", "balanced"
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Belief(_Model):
    event_understanding: str = Field(min_length=1)
    audience_reaction: str = Field(min_length=1)
    meme_assessment: str = Field(min_length=1)


class Desire(_Model):
    priority: Priority
    justification: str = Field(min_length=1)
    risk_tolerance: Literal["low", "medium", "high"]
    risk_justification: str = Field(min_length=1)


class Intention(_Model):
    selected_meme: str = Field(min_length=1)
    target_community: str = Field(min_length=1)
    reasoning: str = Field(min_length=1)


class BDIRecord(_Model):
    """One decision: belief, desire, intention and the explicit harm acknowledgement."""

    belief: Belief
    desire: Desire
    intention: Intention
    risk_acknowledged: bool


@dataclass(frozen=True)
class ParseFailure:
    """A reply that is not a valid BDI record for this round: ``reason`` says why (one line)."""

    reason: str
    raw: str


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _json_object(text: str) -> str | None:
    """The first balanced ``{...}`` in ``text`` (inside a code fence if there is one)."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start = body.find("{")
    if start < 0:
        return None
    depth = 0
    in_string = False
    escape = False
    for i in range(start, len(body)):
        ch = body[i]
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return body[start : i + 1]
    return None


def parse_bdi(
    text: str, options: set[str] | None = None, communities: set[str] | None = None
) -> BDIRecord | ParseFailure:
    """A :class:`BDIRecord` from a reply, or a :class:`ParseFailure` naming the first problem.

    The reply may wrap the JSON object in prose or a code fence. With ``options`` and
    ``communities`` the intention must name one of them (a record choosing a meme that was not
    offered is a failure, not an action).
    """
    blob = _json_object(text)
    if blob is None:
        return ParseFailure("no JSON object in the reply", text)
    try:
        obj = json.loads(blob)
    except json.JSONDecodeError as exc:
        return ParseFailure(f"invalid JSON: {exc.msg} at character {exc.pos}", text)
    try:
        record = BDIRecord.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "(record)"
        return ParseFailure(f"field {where}: {err['msg']}", text)
    if options is not None and record.intention.selected_meme not in options:
        return ParseFailure(
            f"intention.selected_meme {record.intention.selected_meme!r} is not an offered meme",
            text,
        )
    if communities is not None and record.intention.target_community not in communities:
        return ParseFailure(
            f"intention.target_community {record.intention.target_community!r} is not a "
            "community of this market",
            text,
        )
    return record
