"""A user's model as the reward model or the policy: any causal LM from a folder, a hub id or
the ``smollm2-135m-instruct`` preset.

- :func:`load_tokenizer`: the model's own tokenizer, made fit for training with
  :func:`paperstack.llm.prepare_tokenizer` (a pad token from EOS; GPT-2-style tokenizers without
  a chat template get paperstack's fallback ``User:/Assistant:`` template), right padding, and
  ``model_max_length`` set to the model's context (or ``max_length`` when smaller), which
  :mod:`meta_pref.models` truncates every encoded pair to.
- :func:`load_reward_model`: the checkpoint as a sequence classifier with one output (trl's
  ``RewardTrainer`` layout). A causal LM's body is kept and a new ``score`` head is initialised
  (transformers' ``AutoModelForSequenceClassification`` maps every zoo architecture); a saved
  reward model (a classifier with one label) loads as it is.
- :func:`load_policy`: the checkpoint as a causal LM (the DPO policy and π_ref).

Every load goes through :func:`paperstack.checkpoint.load_pretrained`, so a truncated weights
file or a folder without a config is one line, and an architecture transformers cannot load as
a classifier is refused naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from meta_pref.errors import MetaPrefError

__all__ = ["load_policy", "load_reward_model", "load_tokenizer", "model_type"]


def model_type(path: str) -> str | None:
    """The ``model_type`` of a local checkpoint's config (None when there is no local one)."""
    config = Path(path).expanduser() / "config.json"
    try:
        return str(json.loads(config.read_text(encoding="utf-8")).get("model_type")) or None
    except (OSError, ValueError, AttributeError):
        return None


def load_tokenizer(path: str, max_length: int | None = None) -> Any:
    """The checkpoint's tokenizer, ready for preference training (see the module docstring).

    A folder without a tokenizer (a training run's checkpoint often has none) is refused in
    one line naming the missing tokenizer."""
    from transformers import AutoConfig, AutoTokenizer

    from paperstack.checkpoint import load_pretrained
    from paperstack.llm import prepare_tokenizer
    from paperstack.llm.local import model_max_positions

    local = Path(path).expanduser()
    if local.is_dir() and not any(
        (local / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json")
    ):
        raise MetaPrefError(f"--model {path}: no tokenizer in the folder (tokenizer.json missing)")
    tok = load_pretrained(path, AutoTokenizer.from_pretrained)
    prepare_tokenizer(tok, need_chat_template=True, name=str(path), chat_template="fallback")
    tok.padding_side = "right"
    config = load_pretrained(path, AutoConfig.from_pretrained)
    context = model_max_positions(config)
    limits = [n for n in (context[0] if context else None, max_length) if n]
    own = getattr(tok, "model_max_length", None)
    if isinstance(own, int) and own < 1_000_000:
        limits.append(own)
    if limits:
        tok.model_max_length = min(limits)
    return tok


def _pad_config(model: Any, tok: Any) -> Any:
    """The tokenizer's pad token in the model's config (a sequence classifier finds each row's
    last token through it) and in its generation config."""
    model.config.pad_token_id = tok.pad_token_id
    generation = getattr(model, "generation_config", None)
    if generation is not None:
        generation.pad_token_id = tok.pad_token_id
        if generation.eos_token_id is None:
            generation.eos_token_id = tok.eos_token_id
    return model


def load_reward_model(path: str, tok: Any) -> Any:
    """The checkpoint as a one-output sequence classifier (a new reward head on a causal LM)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from paperstack.checkpoint import load_pretrained

    # An architecture without a sequence-classification class fails inside from_pretrained;
    # load_pretrained turns that into one line naming the checkpoint.
    model = load_pretrained(path, AutoModelForSequenceClassification.from_pretrained,
                            num_labels=1, dtype=torch.float32)  # fmt: skip
    return _pad_config(model, tok)


def load_policy(path: str, tok: Any) -> Any:
    """The checkpoint as a causal LM (the DPO policy; π_ref is a frozen copy of it)."""
    import torch
    from transformers import AutoModelForCausalLM

    from paperstack.checkpoint import load_pretrained

    model = load_pretrained(path, AutoModelForCausalLM.from_pretrained, dtype=torch.float32)
    return _pad_config(model, tok)
