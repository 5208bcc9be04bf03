"""The toy world's models, built from a config (random init, no hub), and the encodings the
meta-learning loops and trl's trainers share.

- :func:`reward_model`: a ``LlamaForSequenceClassification`` with one output (the reward of
  the last non-pad token), as trl's ``RewardTrainer`` expects.
- :func:`policy_model`: a ``LlamaForCausalLM``; :func:`train_sft` fits it to the behaviour
  responses in every language: the reference π_ref every DPO system starts from (or regularises
  toward).
- Tokens: :func:`paperstack.tiny.build_tokenizer` (one token per character), so a concept is one
  token in every language.

Two text formats, chosen by the tokenizer. The toy's character tokenizer (marked by
:func:`tokenizer`) keeps the world's ``<s> prompt > response </s>`` layout, in which a concept
is one token at a fixed position. Any other tokenizer (a user's model, :mod:`meta_pref.hf`)
gets its own chat template: the prompt is a user turn rendered with the generation prompt, the
response follows and ends with EOS, and the whole is truncated to the tokenizer's
``model_max_length`` (set from the model's context by :func:`meta_pref.hf.load_tokenizer`):
the response keeps its start and the prompt its end (where the generation prompt is).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    LlamaForSequenceClassification,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from meta_pref.data import PreferencePair
from meta_pref.world import SEP

__all__ = [
    "ModelShape",
    "collate_policy",
    "collate_rewards",
    "encode_policy",
    "encode_rewards",
    "is_toy",
    "max_length",
    "policy_model",
    "prompt_ids",
    "prompt_text",
    "reward_model",
    "tokenizer",
    "train_sft",
]


@dataclass(frozen=True)
class ModelShape:
    """The tiny Llama body both models share (about 90k parameters: a step takes milliseconds)."""

    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    max_position_embeddings: int = 32


def tokenizer() -> PreTrainedTokenizerBase:
    from paperstack import tiny

    tok = tiny.build_tokenizer(model_max_length=32)
    tok.padding_side = "right"
    tok.meta_pref_toy = True  # the toy world's fixed text layout (see the module docstring)
    return tok


def is_toy(tok: PreTrainedTokenizerBase) -> bool:
    """Whether ``tok`` is the toy world's character tokenizer (its ``<s> prompt >`` layout)
    rather than a model's own tokenizer (its chat template)."""
    return bool(getattr(tok, "meta_pref_toy", False))


#: ``model_max_length`` values at or above this are transformers' "no limit" sentinel.
_NO_LIMIT = 1_000_000


def max_length(tok: PreTrainedTokenizerBase) -> int | None:
    """The longest sequence a model's tokenizer may produce here (None: no truncation)."""
    limit = getattr(tok, "model_max_length", None)
    if is_toy(tok) or not isinstance(limit, int) or limit >= _NO_LIMIT:
        return None
    return limit


def _config(tok: PreTrainedTokenizerBase, shape: ModelShape, **extra: Any) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=len(tok),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_attention_heads,
        max_position_embeddings=shape.max_position_embeddings,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=True,
        **extra,
    )


def reward_model(
    tok: PreTrainedTokenizerBase, seed: int, shape: ModelShape = ModelShape()
) -> LlamaForSequenceClassification:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForSequenceClassification(_config(tok, shape, num_labels=1))


def policy_model(
    tok: PreTrainedTokenizerBase, seed: int, shape: ModelShape = ModelShape()
) -> LlamaForCausalLM:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(_config(tok, shape))
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.bos_token_id = tok.bos_token_id
    return model


# ----------------------------------------------------------------------------- encodings


def _ids(tok: PreTrainedTokenizerBase, text: str) -> list[int]:
    return list(tok(text, add_special_tokens=False)["input_ids"])


def prompt_text(tok: PreTrainedTokenizerBase, prompt: str) -> str:
    """The prompt as the model reads it before its response: ``<s>prompt>`` for the toy; a
    model's chat template applied to one user turn, with the generation prompt, otherwise."""
    if is_toy(tok):
        return str(tok.bos_token) + prompt + SEP
    return str(tok.apply_chat_template([{"role": "user", "content": prompt}],
                                       tokenize=False, add_generation_prompt=True))  # fmt: skip


def prompt_ids(tok: PreTrainedTokenizerBase, prompt: str) -> list[int]:
    """:func:`prompt_text`'s token ids (special tokens are in the text, none is added)."""
    if is_toy(tok):
        return [tok.bos_token_id, *_ids(tok, prompt + SEP)]
    return _ids(tok, prompt_text(tok, prompt))


def _response_ids(tok: PreTrainedTokenizerBase, response: str) -> list[int]:
    return [*_ids(tok, response), tok.eos_token_id]


def _fit(
    head: list[int], tails: Sequence[list[int]], limit: int | None
) -> tuple[list[int], list[list[int]]]:
    """Truncate ``head + tail`` (for every tail) to ``limit`` tokens: each tail keeps its start,
    at least half the limit (or all of it when shorter); the head keeps its end (the chat
    template's generation prompt) in what is left after the longest tail."""
    if limit is None or len(head) + max(len(t) for t in tails) <= limit:
        return head, [list(t) for t in tails]
    room = max(limit - len(head), limit // 2)
    cut = [list(t[:room]) for t in tails]
    keep = limit - max(len(t) for t in cut)
    return (head[len(head) - keep :] if keep > 0 else []), cut


def encode_rewards(
    tok: PreTrainedTokenizerBase, pairs: Sequence[PreferencePair]
) -> list[dict[str, list[int]]]:
    """trl's tokenized preference rows: ``chosen_ids`` / ``rejected_ids`` = prompt then
    response then EOS (``<s> prompt > response </s>`` in the toy; the chat template's user
    turn and generation prompt otherwise, truncated to the model's context)."""
    limit = max_length(tok)
    rows = []
    for p in pairs:
        head = prompt_ids(tok, p.prompt)
        chosen = _fit(head, [_response_ids(tok, p.chosen)], limit)
        rejected = _fit(head, [_response_ids(tok, p.rejected)], limit)
        rows.append(
            {
                "chosen_ids": [*chosen[0], *chosen[1][0]],
                "rejected_ids": [*rejected[0], *rejected[1][0]],
            }
        )
    return rows


def encode_policy(
    tok: PreTrainedTokenizerBase, pairs: Sequence[PreferencePair]
) -> list[dict[str, list[int]]]:
    """trl's tokenized DPO rows: ``prompt_ids`` = ``<s> prompt >`` (the toy) or the chat
    template's user turn with the generation prompt, ``chosen_ids`` / ``rejected_ids`` =
    ``response </s>``; truncated to the model's context (one prompt for both responses)."""
    limit = max_length(tok)
    rows = []
    for p in pairs:
        head, (chosen, rejected) = _fit(
            prompt_ids(tok, p.prompt),
            [_response_ids(tok, p.chosen), _response_ids(tok, p.rejected)],
            limit,
        )
        rows.append({"prompt_ids": head, "chosen_ids": chosen, "rejected_ids": rejected})
    return rows


def _pad(rows: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([list(r) + [value] * (width - len(r)) for r in rows])


def collate_rewards(rows: Sequence[dict[str, list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Chosen rows then rejected rows in one right-padded batch (trl's layout)."""
    seqs = [r["chosen_ids"] for r in rows] + [r["rejected_ids"] for r in rows]
    ids = _pad(seqs, pad_id)
    mask = _pad([[1] * len(s) for s in seqs], 0)
    return {"input_ids": ids, "attention_mask": mask}


def collate_policy(rows: Sequence[dict[str, Any]], pad_id: int) -> dict[str, torch.Tensor]:
    """Prompt + chosen rows then prompt + rejected rows, right-padded, with the completion
    mask (and the reference log-probabilities when the rows carry them)."""
    seqs = [r["prompt_ids"] + r["chosen_ids"] for r in rows]
    seqs += [r["prompt_ids"] + r["rejected_ids"] for r in rows]
    comp = [[0] * len(r["prompt_ids"]) + [1] * len(r["chosen_ids"]) for r in rows]
    comp += [[0] * len(r["prompt_ids"]) + [1] * len(r["rejected_ids"]) for r in rows]
    out = {
        "input_ids": _pad(seqs, pad_id),
        "attention_mask": _pad([[1] * len(s) for s in seqs], 0),
        "completion_mask": _pad(comp, 0),
    }
    if rows and "ref_chosen_logps" in rows[0]:
        out["ref_chosen_logps"] = torch.tensor([r["ref_chosen_logps"] for r in rows])
        out["ref_rejected_logps"] = torch.tensor([r["ref_rejected_logps"] for r in rows])
    return out


@torch.no_grad()
def add_reference_logps(
    ref: PreTrainedModel, rows: list[dict[str, Any]], pad_id: int, batch: int = 256
) -> list[dict[str, Any]]:
    """Each DPO row with π_ref's summed log-probabilities of its chosen and rejected response."""
    from meta_pref.loss import sequence_logps

    ref.eval()
    out = []
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        b = collate_policy(chunk, pad_id)
        logits = ref(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        logps = sequence_logps(logits, b["input_ids"], b["completion_mask"])
        chosen, rejected = logps.chunk(2)
        for r, c, j in zip(chunk, chosen.tolist(), rejected.tolist(), strict=True):
            out.append({**r, "ref_chosen_logps": c, "ref_rejected_logps": j})
    return out


def train_sft(
    model: LlamaForCausalLM,
    tok: PreTrainedTokenizerBase,
    texts: Sequence[tuple[str, str]],
    steps: int,
    batch: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Next-token training on the response tokens of ``(prompt, response)`` texts: the
    reference policy (it writes behaviour responses in every language, knowing nothing of the
    reward). Returns the loss per step."""
    rng = random.Random(seed)
    rows = []
    for p, r in texts:
        head, (tail,) = _fit(prompt_ids(tok, p), [_response_ids(tok, r)], max_length(tok))
        rows.append({"prompt_ids": head, "chosen_ids": tail})
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        chunk = rng.sample(rows, min(batch, len(rows)))
        seqs = [r["prompt_ids"] + r["chosen_ids"] for r in chunk]
        ids = _pad(seqs, tok.pad_token_id)
        mask = _pad([[1] * len(s) for s in seqs], 0)
        comp = _pad([[0] * len(r["prompt_ids"]) + [1] * len(r["chosen_ids"]) for r in chunk], 0)
        labels = ids.masked_fill(comp == 0, -100)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses
