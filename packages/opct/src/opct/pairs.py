"""Contrastive pairs: a prompt with a cue or wrapper, and the same request clean.

A :class:`Pair` is what consistency training consumes: ``prompt`` (x̃, what the student sees
and answers), ``clean`` (x, what the teacher sees), a ``kind`` and ``meta`` for evaluation.
The builders make the toy world's pairs (:mod:`opct.world`); :func:`load_pairs` reads a
user's own from JSONL, one object a line::

    {"prompt": "I think it's 12. What is 7+4?", "clean": "What is 7+4?", "kind": "sycophancy"}

Every pair is checked when it is made or read (:meth:`Pair.check`): an empty prompt is one
error naming the line and field, not a silent zero-length sequence in a batch.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opct.errors import OPCTError
from opct.world import (
    CUES_TRAIN,
    PRESSURE_TRAIN,
    TRAIN_FAMILIES,
    WRAPPER_FAMILIES,
    AlignmentWorld,
    forbidden_request,
    is_eval_item,
    safety_request,
    wrap,
)
from paperstack.records import atomic_write

__all__ = [
    "Pair",
    "check_lengths",
    "jailbreak_pairs",
    "load_pairs",
    "mixed_pairs",
    "safety_pairs",
    "sycophancy_pairs",
    "write_pairs",
]


@dataclass(frozen=True)
class Pair:
    """One contrastive pair: ``prompt`` (wrapped or cued) and ``clean`` (the same request)."""

    prompt: str
    clean: str
    kind: str = "custom"
    meta: Mapping[str, Any] = field(default_factory=dict)

    def check(self, where: str = "pair") -> Pair:
        """Raise :class:`OPCTError` naming ``where`` unless both prompts are non-empty text."""
        for name in ("prompt", "clean"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise OPCTError(f"{where}: field {name!r} must be a string, got {value!r}")
            if not value.strip():
                raise OPCTError(f"{where}: field {name!r} is empty")
        if not isinstance(self.kind, str) or not self.kind:
            raise OPCTError(f"{where}: field 'kind' must be a non-empty string")
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "clean": self.clean, "kind": self.kind, **(
            {"meta": dict(self.meta)} if self.meta else {}
        )}  # fmt: skip

    def student_messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.prompt}]

    def teacher_messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.clean}]


# ----------------------------------------------------------------------------- JSONL


def load_pairs(path: str | os.PathLike[str]) -> list[Pair]:
    """Pairs from a JSONL file (``prompt``, ``clean``, optional ``kind`` and ``meta``).

    Blank lines are skipped; anything else that is not a pair is one error naming the line.
    """
    from paperstack.records import iter_user_jsonl

    pairs: list[Pair] = []
    for where, obj in iter_user_jsonl(path, what="a JSONL file of pairs", error=OPCTError):
        missing = [k for k in ("prompt", "clean") if k not in obj]
        if missing:
            raise OPCTError(f"{where}: missing field {missing[0]!r}")
        unknown = sorted(set(obj) - {"prompt", "clean", "kind", "meta"})
        if unknown:
            raise OPCTError(f"{where}: unknown field {unknown[0]!r}")
        meta = obj.get("meta", {})
        if not isinstance(meta, dict):
            raise OPCTError(f"{where}: field 'meta' must be an object")
        pair = Pair(obj["prompt"], obj["clean"], obj.get("kind", "custom"), meta)
        pairs.append(pair.check(where))
    if not pairs:
        raise OPCTError(f"{path}: no pairs in the file")
    return pairs


def write_pairs(path: str | os.PathLike[str], pairs: Iterable[Pair]) -> Path:
    """Write pairs as JSONL (atomically)."""
    lines = [json.dumps(pair.check().to_dict(), sort_keys=True) for pair in pairs]
    return atomic_write(Path(path), ("\n".join(lines) + "\n").encode("utf-8"))


def check_lengths(
    pairs: Sequence[Pair],
    tokenizer: Any,
    max_completion_length: int,
    context_length: int | None,
    responses: Sequence[str] | None = None,
) -> None:
    """Refuse a pair whose chat-formatted prompt (either side) plus its response cannot fit
    the model's context: ``max_completion_length`` new tokens, or the given ``responses``
    (SFT targets) when there are any. One error names the first pair that does not fit."""
    if context_length is None:
        return
    if max_completion_length >= context_length:
        raise OPCTError(
            f"max_completion_length={max_completion_length}: responses this long do not fit "
            f"the model's context of {context_length} tokens"
        )
    for i, pair in enumerate(pairs):
        for side, messages in (
            ("prompt", pair.student_messages()),
            ("clean", pair.teacher_messages()),
        ):
            ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
                ids = ids["input_ids"]
            if responses is not None:
                extra = len(tokenizer(responses[i], add_special_tokens=False)["input_ids"]) + 1
            else:
                extra = max_completion_length
            if len(ids) + extra > context_length:
                raise OPCTError(
                    f"pair {i} ({side}): {len(ids)} prompt tokens + {extra} response tokens > "
                    f"the model's context of {context_length} tokens"
                )


# ----------------------------------------------------------------------------- builders


def _facts(world: AlignmentWorld, split: str) -> list[Any]:
    want = split == "eval"
    facts = [f for f in world.facts if is_eval_item("fact", f.entity, f.attribute) == want]
    if not facts:
        raise OPCTError(f"the world has no {split} facts (n_entities={world.n_entities})")
    return facts


def _check_split(split: str) -> None:
    if split not in ("train", "eval"):
        raise OPCTError(f"split={split!r}: must be 'train' or 'eval'")


def sycophancy_pairs(
    world: AlignmentWorld,
    n: int,
    seed: int = 0,
    templates: Sequence[str] = CUES_TRAIN,
    split: str = "train",
) -> list[Pair]:
    """``n`` pairs (a question with a *wrong* user cue, the question alone) over the facts of
    ``split`` ("train": those consistency training may see; "eval": the held-out ones)."""
    _check_split(split)
    if not templates:
        raise OPCTError("sycophancy_pairs: no cue templates")
    rng = random.Random(f"opct-sycophancy:{seed}:{split}")
    facts = _facts(world, split)
    out = []
    for _ in range(n):
        fact = rng.choice(facts)
        q = world.question(fact, rng)
        z = world.wrong_value(fact, rng)
        template = rng.choice(templates)
        meta = {**fact._asdict(), "cue": z, "template": template}
        out.append(Pair(template.format(z=z, q=q), q, "sycophancy", meta))
    return out


def jailbreak_pairs(
    world: AlignmentWorld,
    n: int,
    seed: int = 0,
    families: Sequence[str] = TRAIN_FAMILIES,
    benign_share: float = 0.5,
    split: str = "train",
) -> list[Pair]:
    """``n`` pairs (a request inside jailbreak wrappers of ``families``, the request clean).

    A ``benign_share`` of them wrap an ordinary question (kind ``benign``: the clean prompt is
    answered, so consistency keeps answering it); the rest wrap a forbidden request (kind
    ``jailbreak``: the clean prompt is refused). As in BCT, the benign pairs keep the method
    from learning "refuse whatever is wrapped".
    """
    _check_split(split)
    unknown = [f for f in families if f not in WRAPPER_FAMILIES]
    if unknown or not families:
        raise OPCTError(f"jailbreak_pairs: unknown wrapper family {unknown[:1] or families!r}")
    if not 0.0 <= benign_share <= 1.0:
        raise OPCTError(f"benign_share={benign_share}: must be in [0, 1]")
    rng = random.Random(f"opct-jailbreak:{seed}:{split}")
    facts = _facts(world, split)
    out = []
    for _ in range(n):
        fact = rng.choice(facts)
        chain = world.wrapper_chain(families, rng)
        if rng.random() < benign_share:
            clean, kind = world.question(fact, rng), "benign"
        else:
            clean, kind = forbidden_request(fact.entity, fact.attribute), "jailbreak"
        meta = {**fact._asdict(), "wrappers": list(chain)}
        out.append(Pair(wrap(clean, *chain), clean, kind, meta))
    return out


def safety_pairs(
    world: AlignmentWorld,
    n: int,
    seed: int = 0,
    templates: Sequence[str] = PRESSURE_TRAIN,
    split: str = "train",
) -> list[Pair]:
    """``n`` pairs (a safety request under pressure to skip the warning, the request alone)."""
    _check_split(split)
    if not templates:
        raise OPCTError("safety_pairs: no pressure templates")
    want = split == "eval"
    combos = [c for c in world.safety_pairs if is_eval_item("safety", *c) == want]
    rng = random.Random(f"opct-safety:{seed}:{split}")
    out = []
    for _ in range(n):
        tool, element = rng.choice(combos)
        clean = safety_request(tool, element)
        template = rng.choice(templates)
        meta = {"tool": tool, "element": element, "template": template}
        out.append(Pair(template.format(q=clean), clean, "safety", meta))
    return out


#: Share of each axis in :func:`mixed_pairs` (jailbreak pairs are half benign).
MIX: dict[str, float] = {"sycophancy": 0.4, "jailbreak": 0.4, "safety": 0.2}


def mixed_pairs(world: AlignmentWorld, n: int, seed: int = 0) -> list[Pair]:
    """The consistency-training set of the demo: training templates, families and targets on
    all three axes, in the :data:`MIX` shares, shuffled."""
    n_syc = round(n * MIX["sycophancy"])
    n_jb = round(n * MIX["jailbreak"])
    pairs = (
        sycophancy_pairs(world, n_syc, seed)
        + jailbreak_pairs(world, n_jb, seed)
        + safety_pairs(world, n - n_syc - n_jb, seed)
    )
    random.Random(f"opct-mix:{seed}").shuffle(pairs)
    return pairs
