"""Evaluation: forget / retain / forget-adjacent accuracy and output validity (QA), and
multiple-choice accuracy by letter likelihood (for WMDP/MUSE-style JSONL)."""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from paperstack.tasks import DOMAINS, Example

__all__ = [
    "QAScores",
    "greedy_answers",
    "greedy_continuations",
    "mc_accuracy",
    "qa_scores",
]


def _cache_kwarg(model: Any) -> str:
    """transformers 5.x renamed ``past_key_values`` to ``cache``; accept either."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def greedy_answers(
    model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int, batch_size: int = 512
) -> list[str]:
    """Greedy completions of user ``prompts`` through the chat template, in input order."""
    from ra2_unlearn.data import _chat_prompt

    if not prompts:
        return []
    enc = tokenizer([_chat_prompt(tokenizer, p) for p in prompts], add_special_tokens=False)
    return greedy_continuations(model, tokenizer, enc["input_ids"], max_new_tokens, batch_size)


@torch.no_grad()
def greedy_continuations(
    model: Any,
    tokenizer: Any,
    ids: Sequence[Sequence[int]],
    max_new_tokens: int,
    batch_size: int = 512,
) -> list[str]:
    """Greedy continuations of token-id prefixes ``ids``, decoded, in input order.

    A plain KV-cached argmax loop over batches of equal prefix length (no padding, so the
    result equals a one-by-one greedy decode on any model family). ``generate`` gives the
    same tokens but its per-step overhead made evaluation 20x slower on the tiny models.
    """
    if not ids:
        return []
    by_len: dict[int, list[int]] = {}
    for i, seq in enumerate(ids):
        by_len.setdefault(len(seq), []).append(i)
    kw = _cache_kwarg(model)
    eos = tokenizer.eos_token_id
    device = next(model.parameters()).device
    out: list[str] = [""] * len(ids)
    model.eval()
    for idxs in by_len.values():
        for s in range(0, len(idxs), batch_size):
            chunk = idxs[s : s + batch_size]
            x = torch.tensor([list(ids[i]) for i in chunk], device=device)
            o = model(input_ids=x, use_cache=True)
            nxt = o.logits[:, -1].argmax(-1)
            toks = [nxt]
            done = nxt == eos
            for _ in range(max_new_tokens - 1):
                if bool(done.all()):
                    break
                past = getattr(o, "cache", None) or getattr(o, "past_key_values", None)
                o = model(input_ids=nxt[:, None], use_cache=True, **{kw: past})
                nxt = o.logits[:, -1].argmax(-1)
                toks.append(nxt)
                done = done | (nxt == eos)
            gen = torch.stack(toks, 1).tolist()
            for i, row in zip(chunk, gen, strict=True):
                if eos in row:
                    row = row[: row.index(eos)]
                out[i] = tokenizer.decode(row, skip_special_tokens=True)
    return out


@dataclass(frozen=True)
class QAScores:
    """Per-question correctness and validity (bool arrays, in input order)."""

    correct: np.ndarray
    valid: np.ndarray

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean()) if self.correct.size else 0.0

    @property
    def validity(self) -> float:
        return float(self.valid.mean()) if self.valid.size else 0.0


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0].strip(" .").lower()


def qa_scores(model: Any, tokenizer: Any, examples: Sequence[Example]) -> QAScores:
    """Greedy answers to fact-world QA ``examples``: right (first line equals the value) and
    valid (first line is *some* value of the asked attribute, the "output validity" that RMU's
    gibberish fails)."""
    if not examples:
        return QAScores(np.zeros(0, bool), np.zeros(0, bool))
    longest = max(len(e.answer) for e in examples)
    outs = greedy_answers(model, tokenizer, [e.prompt for e in examples], longest + 4)
    answers = [_first_line(o) for o in outs]
    correct = np.array([a == e.answer.lower() for a, e in zip(answers, examples, strict=True)])
    valid = np.array(
        [
            a in {v.lower() for v in DOMAINS[e.meta["domain"]][e.meta["attribute"]]}
            for a, e in zip(answers, examples, strict=True)
        ]
    )
    return QAScores(correct, valid)


@torch.no_grad()
def mc_accuracy(model: Any, tokenizer: Any, examples: Sequence[Example]) -> np.ndarray:
    """Multiple choice by likelihood: the option letter with the highest next-token logit
    after the chat prompt, compared with ``meta['letter']`` (one forward pass per question)."""
    from ra2_unlearn.data import _chat_prompt

    out = np.zeros(len(examples), bool)
    model.eval()
    for i, ex in enumerate(examples):
        n = len(ex.meta["choices"])
        letters = string.ascii_uppercase[:n]
        ids = tokenizer(_chat_prompt(tokenizer, ex.prompt), add_special_tokens=False)["input_ids"]
        x = torch.tensor([ids], device=model.device)
        logits = model(input_ids=x).logits[0, -1]
        letter_ids = [tokenizer(c, add_special_tokens=False)["input_ids"][-1] for c in letters]
        pick = int(torch.argmax(logits[letter_ids]))
        out[i] = letters[pick] == ex.meta["letter"]
    return out
