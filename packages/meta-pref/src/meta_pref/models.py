"""The toy world's models, built from a config (random init, no hub), and the encodings the
meta-learning loops and trl's trainers share.

- :func:`reward_model`: a ``LlamaForSequenceClassification`` with one output (the reward of
  the last non-pad token), as trl's ``RewardTrainer`` expects.
- :func:`policy_model`: a ``LlamaForCausalLM``; :func:`train_sft` fits it to the behaviour
  responses in every language: the reference π_ref every DPO system starts from (or regularises
  toward).
- Tokens: :func:`paperstack.tiny.build_tokenizer` (one token per character), so a concept is one
  token in every language.
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
    "policy_model",
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
    return tok


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


def encode_rewards(
    tok: PreTrainedTokenizerBase, pairs: Sequence[PreferencePair]
) -> list[dict[str, list[int]]]:
    """trl's tokenized preference rows: ``chosen_ids`` / ``rejected_ids`` =
    ``<s> prompt > response </s>``."""
    bos, eos = tok.bos_token_id, tok.eos_token_id
    rows = []
    for p in pairs:
        head = [bos, *_ids(tok, p.prompt + SEP)]
        rows.append(
            {
                "chosen_ids": [*head, *_ids(tok, p.chosen), eos],
                "rejected_ids": [*head, *_ids(tok, p.rejected), eos],
            }
        )
    return rows


def encode_policy(
    tok: PreTrainedTokenizerBase, pairs: Sequence[PreferencePair]
) -> list[dict[str, list[int]]]:
    """trl's tokenized DPO rows: ``prompt_ids`` = ``<s> prompt >``, ``chosen_ids`` /
    ``rejected_ids`` = ``response </s>``."""
    bos, eos = tok.bos_token_id, tok.eos_token_id
    return [
        {
            "prompt_ids": [bos, *_ids(tok, p.prompt + SEP)],
            "chosen_ids": [*_ids(tok, p.chosen), eos],
            "rejected_ids": [*_ids(tok, p.rejected), eos],
        }
        for p in pairs
    ]


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
    bos, eos = tok.bos_token_id, tok.eos_token_id
    rows = [
        {"prompt_ids": [bos, *_ids(tok, p + SEP)], "chosen_ids": [*_ids(tok, r), eos]}
        for p, r in texts
    ]
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
