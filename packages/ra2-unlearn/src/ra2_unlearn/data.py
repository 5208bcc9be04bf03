"""Forget/retain data: chat encoding, the paired dataset the trainer reads, the fact-world
splits of the demo, and optional WMDP/MUSE-style multiple-choice JSONL loaders.

The fact world (:class:`paperstack.tasks.FactWorld`) gives every entity six attributes in
three domains. :func:`fact_splits` picks *forget entities* and a *forget domain*:

- ``forget``: the forget domain's facts about the forget entities (what must go);
- ``adjacent``: the other domains' facts about the same entities (benign questions that
  need the entity but not the forgotten attribute: the paper's forget-adjacent utility);
- ``retain``: every fact about the remaining entities, split by entity into ``retain``
  (seen by the retain loss and the anchor bank) and ``retain_eval`` (never seen during
  unlearning: the retain accuracy the demo reports).

``adjacency`` names what counts as forget-adjacent (:data:`ADJACENCY`):

- ``"entity"`` (this function's default, 0.3's first design): the forget entities' *other*
  domains, as above.
  The toy's model reads text one character at a time, so an entity is a string of the same
  14 onsets and 5 vowels every entity uses, while the forget domain's attribute words
  (``element``, ``planet``) and its closed value sets appear in no other domain. The
  hypothesis the validation probe (``benchmarks/adjacent_premise_probe.py``) tests: gradient
  ascent on ``"What is the element of Bakizo?" -> "neon"`` moves what the forget domain's
  prompts and values use, which ``"What is the city of Bakizo?"`` does not use any more than
  ``"... of Rogu?"`` does, so the damage lands on the forget domain of *every* entity (a
  third of ``retain_eval``), not on the forget entities' other domains;
- ``"relation"``: the forget domain asked about the *retain-eval* entities (never seen during
  unlearning): the same attribute words in the prompt and the same value vocabulary in the
  answer as the forget facts, only the entity differs (WMDP's "general biology" next to the
  hazardous one). ``retain_eval`` then holds those entities' other domains only, so retain
  facts share neither entity nor relation with the forget facts. ``forget``, ``retain`` and
  ``holdout`` are the same as under ``"entity"``: the unlearning runs are identical, only the
  evaluation is partitioned differently.

The demo uses ``"relation"`` since 2026-12-06: on validation seeds 1001-1005 (calibrated on
1000) the baselines' retain-minus-adjacent gap is -0.176 [-0.198, -0.155] under ``"entity"``
and +0.663 [0.598, 0.728] under ``"relation"`` (``benchmarks/validation/``).
"""

from __future__ import annotations

import json
import os
import random
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch.utils.data import Dataset

from paperstack.tasks import DOMAINS, Example, FactWorld
from paperstack.tasks.facts import TRAIN_TEMPLATES, Fact
from ra2_unlearn.errors import UnlearnError

__all__ = [
    "ADJACENCY",
    "Encoded",
    "FactSplits",
    "FactWorldWithout",
    "ForgetRetainCollator",
    "ForgetRetainDataset",
    "check_vocabulary_overlap",
    "encode",
    "fact_splits",
    "load_mc_jsonl",
    "load_text_corpus",
]


#: The forget-adjacent sets :func:`fact_splits` can build (see the module doc).
ADJACENCY: tuple[str, ...] = ("entity", "relation")


@dataclass(frozen=True)
class Encoded:
    """One tokenized example: ids, labels (-100 on the prompt) and the prompt length; with
    ``value`` (a span of token indices ``[start, end)`` into ``input_ids``) when the example
    names the answer's value (``meta["value"]``, e.g. the capital in "The capital of France
    is Paris."), so RA^2 can attract only the positions that predict it."""

    input_ids: list[int]
    labels: list[int]
    prompt_len: int
    value: tuple[int, int] | None = None


def _chat_prompt(tokenizer: Any, prompt: str) -> str:
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )
        return str(text)
    return prompt


def encode(tokenizer: Any, examples: Sequence[Example], max_length: int = 256) -> list[Encoded]:
    """Chat-format ``examples`` (prompt as the user turn, answer + EOS as the reply).

    Labels cover the answer and EOS only: the NLL-based baselines (GA, NPO, SimNPO) act on
    what the model says, the latent methods read every token's state. A raw-text passage
    (``meta["raw"]``, from :func:`load_text_corpus`) is encoded as plain text with every token
    a target, as the WMDP RMU code trains on its forget corpus (truncated at ``max_length``).
    """
    out = []
    eos = tokenizer.eos_token or ""
    for ex in examples:
        if ex.meta.get("raw"):  # a corpus passage: plain text, every token is a target
            ids = list(tokenizer(ex.answer + eos, add_special_tokens=False)["input_ids"])
            ids = ids[:max_length]
            out.append(Encoded(ids, list(ids), 0))
            continue
        prompt = _chat_prompt(tokenizer, ex.prompt)
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        a_ids = tokenizer(ex.answer + eos, add_special_tokens=False)["input_ids"]
        ids = (list(p_ids) + list(a_ids))[:max_length]
        labels = ([-100] * len(p_ids) + list(a_ids))[:max_length]
        span = _value_span(tokenizer, ex, len(p_ids), len(ids))
        out.append(Encoded(ids, labels, min(len(p_ids), max_length), span))
    return out


def _value_span(tokenizer: Any, ex: Example, offset: int, length: int) -> tuple[int, int] | None:
    """Token indices ``[start, end)`` of ``ex.meta["value"]`` (its last occurrence in the
    answer) in the encoded example: the answer tokens whose characters overlap it, from a fast
    tokenizer's offsets. None when there is no span to mark: no value, a value the answer does
    not spell out (a multiple-choice letter), no offsets (a slow tokenizer), or a value cut off
    by truncation. (The fact world's examples carry ``meta["value"]`` as well.)"""
    value = ex.meta.get("value")
    if not value or not getattr(tokenizer, "is_fast", False):
        return None
    start = ex.answer.rfind(str(value))
    if start < 0:
        return None
    enc = tokenizer(ex.answer, add_special_tokens=False, return_offsets_mapping=True)
    end = start + len(str(value))
    hit = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if a < end and b > start]
    if not hit or offset + hit[-1] >= length:
        return None
    return offset + hit[0], offset + hit[-1] + 1


def check_vocabulary_overlap(tokenizer: Any, examples: Sequence[Example], name: str) -> None:
    """Refuse a set whose text maps (almost) entirely to the unknown token: nothing to unlearn."""
    unk = tokenizer.unk_token_id
    if unk is None or not examples:
        return
    texts = [e.prompt + " " + e.answer for e in examples[:200]]
    ids = [i for row in tokenizer(texts, add_special_tokens=False)["input_ids"] for i in row]
    known = sum(1 for i in ids if i != unk)
    if not ids or known / len(ids) < 0.5:
        raise UnlearnError(
            f"{name} set: {known}/{len(ids)} tokens are in the model's vocabulary "
            "(the text shares almost nothing with the tokenizer)"
        )


class ForgetRetainDataset(Dataset[dict[str, Encoded]]):
    """Pairs of (forget, retain) examples; item ``i`` is ``forget[i % F], retain[i % R]``, so
    an epoch covers both sets whichever is larger (the Trainer shuffles the indices)."""

    def __init__(self, forget: Sequence[Encoded], retain: Sequence[Encoded]) -> None:
        if not forget:
            raise UnlearnError("forget set is empty: nothing to unlearn")
        if not retain:
            raise UnlearnError("retain set is empty: every method here needs retain examples")
        self.forget = list(forget)
        self.retain = list(retain)

    def __len__(self) -> int:
        return max(len(self.forget), len(self.retain))

    def __getitem__(self, i: int) -> dict[str, Encoded]:
        return {
            "forget": self.forget[i % len(self.forget)],
            "retain": self.retain[i % len(self.retain)],
        }


def pad_batch(items: Sequence[Encoded], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad to the longest: ``input_ids``, ``attention_mask``, ``labels``, ``prompt_len``
    and ``value_mask`` (True on the tokens of each example's value span; all False without)."""
    width = max(len(e.input_ids) for e in items)
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    labels = torch.full((len(items), width), -100, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    value = torch.zeros((len(items), width), dtype=torch.bool)
    for i, e in enumerate(items):
        n = len(e.input_ids)
        ids[i, :n] = torch.tensor(e.input_ids)
        labels[i, :n] = torch.tensor(e.labels)
        mask[i, :n] = 1
        if e.value is not None:
            value[i, e.value[0] : e.value[1]] = True
    plen = torch.tensor([e.prompt_len for e in items])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "prompt_len": plen,
            "value_mask": value}  # fmt: skip


@dataclass
class ForgetRetainCollator:
    """Collate dataset items into ``forget_*`` and ``retain_*`` tensors for the trainer."""

    pad_token_id: int

    def __call__(self, items: Sequence[dict[str, Encoded]]) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for side in ("forget", "retain"):
            for key, value in pad_batch([it[side] for it in items], self.pad_token_id).items():
                out[f"{side}_{key}"] = value
        return out


@dataclass(frozen=True)
class FactWorldWithout(FactWorld):
    """The fact world with some facts never shown: the *retain model* of TOFU's forget
    quality (a model trained on everything but the forget set) is trained on this.

    ``without`` lists ``(entity, attribute)`` pairs; :meth:`facts` (and so ``generate``, which
    draws from it) leaves them out, everything else is the world of the same
    ``(n_entities, world_seed)``.
    """

    name: ClassVar[str] = "facts-without"
    without: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "without", tuple(sorted(tuple(p) for p in self.without)))

    def facts(self, domains: Sequence[str] | None = None) -> list[Fact]:
        gone = set(self.without)
        return [f for f in super().facts(domains) if (f.entity, f.attribute) not in gone]


@dataclass(frozen=True)
class FactSplits:
    """The demo's data: training sets and evaluation questions (all QA form)."""

    world: FactWorld
    forget_domain: str
    forget_entities: tuple[str, ...]
    forget: list[Example]
    adjacent: list[Example]
    retain: list[Example]
    retain_eval: list[Example]
    #: Forget-domain questions about entities the model never saw (the non-members of the
    #: membership-inference attacks): the same world grown by ``n_holdout`` entities.
    holdout: list[Example] = field(default_factory=list)

    def retain_world(self) -> FactWorldWithout:
        """The world minus the forget facts: what the retain model of forget quality learns."""
        pairs = sorted({(e.meta["entity"], e.meta["attribute"]) for e in self.forget})
        return FactWorldWithout(
            n_entities=self.world.n_entities, world_seed=self.world.world_seed, without=tuple(pairs)
        )

    @property
    def chance(self) -> float:
        """Chance accuracy of a QA answer of the right type (1 / values per attribute)."""
        sizes = [len(v) for v in DOMAINS[self.forget_domain].values()]
        return float(sum(1 / s for s in sizes) / len(sizes))


def _questions(world: FactWorld, entities: Sequence[str], domains: Sequence[str]) -> list[Example]:
    """Every fact of ``entities`` in ``domains`` under every training phrasing."""
    chosen = set(entities)
    return [
        world.question(f, template)
        for f in world.facts(domains)
        if f.entity in chosen
        for template in TRAIN_TEMPLATES
    ]


def fact_splits(
    world: FactWorld,
    forget_domain: str = "science",
    n_forget: int = 12,
    n_retain_train: int | None = None,
    split_seed: int = 0,
    n_holdout: int = 0,
    adjacency: str = "entity",
) -> FactSplits:
    """Split ``world`` by entity into forget / retain-train / retain-eval (see module doc).

    Entities are assigned by a seeded shuffle independent of the world; the remaining
    entities after the forget ones are halved between retain-train and retain-eval unless
    ``n_retain_train`` says otherwise. ``n_holdout`` entities beyond the world give the
    never-trained questions of :attr:`FactSplits.holdout`. ``adjacency``: ``"entity"`` (the
    forget entities' other domains) or ``"relation"`` (the forget domain of the retain-eval
    entities; ``retain_eval`` keeps their other domains), see the module doc.
    """
    if adjacency not in ADJACENCY:
        raise UnlearnError(f"adjacency {adjacency!r}: not one of {', '.join(ADJACENCY)}")
    if forget_domain not in DOMAINS:
        raise UnlearnError(f"forget_domain {forget_domain!r}: not one of {', '.join(DOMAINS)}")
    entities = list(world.entities)
    if not 1 <= n_forget < len(entities) - 1:
        raise UnlearnError(f"n_forget {n_forget}: need 1..{len(entities) - 2} of the entities")
    random.Random(f"ra2-splits-{split_seed}").shuffle(entities)
    rest = entities[n_forget:]
    n_rt = len(rest) // 2 if n_retain_train is None else n_retain_train
    if not 1 <= n_rt < len(rest):
        raise UnlearnError(f"n_retain_train {n_rt}: need 1..{len(rest) - 1}")
    forget_e = entities[:n_forget]
    others = [d for d in DOMAINS if d != forget_domain]
    if adjacency == "entity":
        adjacent = _questions(world, forget_e, others)
        retain_eval = _questions(world, rest[n_rt:], list(DOMAINS))
    else:
        adjacent = _questions(world, rest[n_rt:], [forget_domain])
        retain_eval = _questions(world, rest[n_rt:], others)
    return FactSplits(
        world=world,
        forget_domain=forget_domain,
        forget_entities=tuple(forget_e),
        forget=_questions(world, forget_e, [forget_domain]),
        adjacent=adjacent,
        retain=_questions(world, rest[:n_rt], list(DOMAINS)),
        retain_eval=retain_eval,
        holdout=_holdout(world, forget_domain, n_holdout),
    )


def _holdout(world: FactWorld, domain: str, n: int) -> list[Example]:
    """Questions in ``domain`` about ``n`` entities added after the world's own (never seen in
    training: the world's entities and values are a prefix of any larger world's)."""
    if n <= 0:
        return []
    bigger = FactWorld(n_entities=world.n_entities + n, world_seed=world.world_seed)
    return _questions(bigger, bigger.entities[world.n_entities :], [domain])


def load_mc_jsonl(path: str | os.PathLike[str], task: str = "mc") -> list[Example]:
    """WMDP / MUSE-style multiple-choice JSONL (optional, for users who have the data).

    One object per line with ``question``, ``choices`` (list of strings) and ``answer`` (the
    index of the right choice, or its letter). Becomes a prompt with lettered options and the
    letter as the answer, the form :func:`encode` and the MC evaluation read.
    """
    p = Path(path)
    if p.is_dir():
        raise UnlearnError(f"{p}: is a directory; name a JSONL file")
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UnlearnError(f"{p}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise UnlearnError(
            f"{p}: not UTF-8 text (byte {exc.start}; a binary file?); expected question/"
            "choices/answer JSONL"
        ) from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            question, choices, answer = obj["question"], list(obj["choices"]), obj["answer"]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            # ValueError: bad JSON, or an integer beyond Python's 4300-digit limit
            raise UnlearnError(
                f"{p}:{n}: not a question/choices/answer object ({type(exc).__name__}: {exc})"
            ) from None
        letters = string.ascii_uppercase[: len(choices)]
        if isinstance(answer, str) and answer.upper() in letters and len(answer) == 1:
            answer = letters.index(answer.upper())
        if not isinstance(answer, int) or not 0 <= answer < len(choices) or len(choices) < 2:
            raise UnlearnError(f"{p}:{n}: field 'answer' {answer!r} does not index 'choices'")
        options = " ".join(f"{letters[i]}) {c}" for i, c in enumerate(choices))
        meta = {"choices": choices, "letter": letters[answer], "source": str(p)}
        out.append(Example(task, f"{question} {options}", letters[answer], meta))
    if not out:
        raise UnlearnError(f"{p}: no questions (empty file)")
    return out


def load_text_corpus(
    path: str | os.PathLike[str], field: str = "text", min_chars: int = 1
) -> list[Example]:
    """A raw-text corpus, the form WMDP's RMU trains on (``bio-forget-corpus.jsonl``).

    ``.jsonl``: one object per line with a ``text`` field (WMDP's forget and retain corpora;
    other fields such as ``title`` or ``doi`` are kept in ``meta``). Any other file: plain text,
    one passage per block of lines separated by a blank line. Passages shorter than
    ``min_chars`` are dropped (the WMDP code keeps those longer than 50 characters). Each
    passage becomes an :class:`Example` with ``meta["raw"]`` set, which :func:`encode` turns
    into plain text with every token a target.
    """
    p = Path(path)
    if p.is_dir():
        raise UnlearnError(f"{p}: is a directory; name a corpus file (.jsonl or .txt)")
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UnlearnError(f"{p}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise UnlearnError(f"{p}: not UTF-8 text (byte {exc.start}; a binary file?)") from None
    passages: list[tuple[str, dict[str, Any]]] = []
    if p.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                body = obj[field]
            except (ValueError, KeyError, TypeError, RecursionError) as exc:
                raise UnlearnError(
                    f"{p}:{n}: not an object with a {field!r} field ({type(exc).__name__})"
                ) from None
            if not isinstance(body, str):
                raise UnlearnError(f"{p}:{n}: field {field!r} is not a string")
            extra = {k: v for k, v in obj.items() if k != field and isinstance(v, (str, int))}
            passages.append((body, {**extra, "line": n}))
    else:
        for block in text.split("\n\n"):
            passages.append((block, {}))
    out = [
        Example("corpus", "", body.strip(), {**meta, "raw": True, "source": str(p)})
        for body, meta in passages
        if len(body.strip()) >= max(1, min_chars)
    ]
    if not out:
        raise UnlearnError(f"{p}: no passages (empty file, or all shorter than {min_chars})")
    return out
