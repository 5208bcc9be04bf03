"""The toy language-modelling world of the demo: synthetic text, a tiny Llama, a training loop.

Text: examples of paperstack's synthetic tasks (two-digit addition, multi-step arithmetic with
its worked steps, fact-world questions and answers) rendered as ``prompt + answer`` and packed
into fixed-length character sequences; held-out text comes from the tasks' test splits. It has
structure worth compressing (a few formats, a small fact table, digit arithmetic), unlike
random tokens. Model: ``LlamaForCausalLM`` built from a ``LlamaConfig`` with paperstack's
character tokenizer. Training: next-token cross-entropy on every token, one loop shared by
every optimizer (same data order, warmup + cosine learning-rate schedule, gradient clipping).
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from numuon.errors import NumuonError
from paperstack import tasks
from paperstack.tiny import build_tokenizer

__all__ = [
    "MAX_TEXT_BYTES",
    "ModelShape",
    "TextData",
    "build_llama",
    "lm_loss",
    "lm_losses",
    "load_model",
    "load_text_file",
    "make_text",
    "train_lm",
]

#: Tasks whose rendered examples make the corpus.
TASK_MIX = ("addition", "arithmetic", "facts")


@dataclass(frozen=True)
class ModelShape:
    """A tiny Llama's size (hidden width, MLP width, layers, heads)."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4


@dataclass(frozen=True)
class TextData:
    """Packed token sequences: ``train`` (``N x (L+1)``), ``val`` and ``calib`` (held out)."""

    train: torch.Tensor
    val: torch.Tensor
    calib: torch.Tensor
    vocab_size: int

    def to(self, device: torch.device | str) -> TextData:
        """The same data on ``device``."""
        return TextData(
            self.train.to(device), self.val.to(device), self.calib.to(device), self.vocab_size
        )


def _stream(
    tokenizer: PreTrainedTokenizerBase,
    split: str,
    n: int,
    seed: int,
    task_mix: tuple[str, ...] = TASK_MIX,
) -> list[int]:
    examples = [
        ex
        for name in task_mix
        for ex in tasks.get(name).generate(n, seed=seed, split=split)  # type: ignore[arg-type]
    ]
    random.Random(seed).shuffle(examples)
    text = "".join(f"{ex.prompt}{ex.answer}\n" for ex in examples)
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids


def _pack(ids: list[int], length: int, limit: int | None = None) -> torch.Tensor:
    count = len(ids) // length
    if limit is not None:
        count = min(count, limit)
    return torch.tensor(ids[: count * length], dtype=torch.long).reshape(count, length)


def make_text(
    seq_len: int = 128,
    train_examples: int = 6000,
    val_sequences: int = 64,
    calib_sequences: int = 64,
    seed: int = 0,
    tokenizer_path: str | None = None,
    task_mix: tuple[str, ...] = TASK_MIX,
) -> tuple[TextData, PreTrainedTokenizerBase]:
    """The corpus: ``train_examples`` per task of ``task_mix`` from the train split; validation
    and calibration sequences from the test split (disjoint from each other), ``seq_len + 1``
    tokens each. ``tokenizer_path`` (a model id or directory) replaces paperstack's character
    tokenizer."""
    tokenizer = _tokenizer(tokenizer_path)
    length = seq_len + 1
    train = _pack(_stream(tokenizer, "train", train_examples, seed, task_mix), length)
    need = (val_sequences + calib_sequences) * length
    per_task = max(200, need // (40 * len(task_mix)) + 1)
    held = _pack(_stream(tokenizer, "test", per_task, seed + 1, task_mix), length)
    if held.shape[0] < val_sequences + calib_sequences:
        held = _pack(_stream(tokenizer, "test", per_task * 4, seed + 1, task_mix), length)
    data = TextData(
        train=train,
        val=held[:val_sequences],
        calib=held[val_sequences : val_sequences + calib_sequences],
        vocab_size=len(tokenizer),
    )
    return data, tokenizer


def _tokenizer(path: str | None) -> PreTrainedTokenizerBase:
    if path is None:
        return build_tokenizer(model_max_length=10**9)
    from transformers import AutoTokenizer

    try:
        tok: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(path)
    # The tokenizers library raises a bare Exception for a corrupt tokenizer.json: at this
    # boundary every failure is the user's folder, so it becomes one line naming it.
    except Exception as exc:
        raise NumuonError(f"--model {path}: cannot load a tokenizer ({_first_line(exc)})") from None
    tok.model_max_length = 10**9  # we pack long streams ourselves
    return tok


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


#: Largest text file :func:`load_text_file` reads. The corpus is read whole and tokenised into
#: a Python list (tens of bytes per token), so a 1 GB file grew to 22 GB resident and was
#: killed by the kernel with no message (issue #46). 16 MiB is twenty times the tokens the
#: full demo trains on (1000 steps of 16 x 49) and peaks near 1.5 GB.
MAX_TEXT_BYTES = 16 * 2**20


def load_text_file(
    path: str | os.PathLike[str],
    seq_len: int,
    val_sequences: int,
    calib_sequences: int,
    tokenizer_path: str | None = None,
    *,
    what: str = "--dataset",
) -> tuple[TextData, PreTrainedTokenizerBase]:
    """A user's UTF-8 text file as the corpus: packed into ``seq_len + 1``-token sequences; the
    last ``val_sequences + calib_sequences`` are held out (validation, then calibration).
    ``what`` names the file in errors (the flag it came from)."""
    if seq_len < 1:
        raise NumuonError(f"--seq-len {seq_len}: must be >= 1")
    limit = MAX_TEXT_BYTES
    shown = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit} bytes"
    too_big = (
        f"{what} {path}: larger than {shown}, the limit for a corpus read whole into memory; "
        "pass its first part"
    )
    try:
        if os.stat(path).st_size > limit:  # refused before a byte is read
            raise NumuonError(too_big)
        with open(path, "rb") as handle:  # a pipe or device reports no size: read bounded
            raw = handle.read(limit + 1)
        if len(raw) > limit:
            raise NumuonError(too_big)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise NumuonError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise NumuonError(f"{what} {path}: is a directory, not a text file") from None
    except (OSError, UnicodeDecodeError) as exc:
        first = _first_line(exc)
        raise NumuonError(f"{what} {path}: cannot read as UTF-8 text ({first})") from None
    tokenizer = _tokenizer(tokenizer_path)
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    seqs = _pack(ids, seq_len + 1)
    held = val_sequences + calib_sequences
    if seqs.shape[0] < held + 8:
        raise NumuonError(
            f"{what} {path}: {len(ids)} tokens make {seqs.shape[0]} sequences of "
            f"{seq_len + 1}; need at least {held + 8} ({held} held out)"
        )
    data = TextData(
        train=seqs[:-held],
        val=seqs[-held : seqs.shape[0] - calib_sequences],
        calib=seqs[seqs.shape[0] - calib_sequences :],
        vocab_size=len(tokenizer),
    )
    return data, tokenizer


def load_model(path: str, seed: int) -> PreTrainedModel:
    """A causal LM through ``from_pretrained`` (a hub id or a directory) to train further."""
    from transformers import AutoModelForCausalLM

    from paperstack.checkpoint import load_pretrained

    torch.manual_seed(seed)
    # The core's loader checks a local folder first (config.json, whole safetensors files, the
    # shard index), so a truncated checkpoint is one line naming the file, not SafetensorError.
    model: PreTrainedModel = load_pretrained(path, AutoModelForCausalLM.from_pretrained)
    return model


def build_llama(
    shape: ModelShape, tokenizer: PreTrainedTokenizerBase, seq_len: int, seed: int
) -> LlamaForCausalLM:
    """A randomly initialised tiny ``LlamaForCausalLM`` (tied embeddings, as in small Llamas)."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_attention_heads,
        max_position_embeddings=max(seq_len + 1, 64),
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config)


def lm_loss(model: torch.nn.Module, seqs: torch.Tensor, batch_size: int = 32) -> float:
    """Mean next-token cross-entropy (nats per token) of ``model`` on ``seqs`` (``N x (L+1)``)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, seqs.shape[0], batch_size):
            x = seqs[start : start + batch_size]
            logits = model(input_ids=x[:, :-1]).logits
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(), x[:, 1:].reshape(-1), reduction="sum"
            )
            total += float(loss)
            count += x[:, 1:].numel()
    model.train(was_training)
    return total / count


def lm_losses(model: torch.nn.Module, seqs: torch.Tensor, batch_size: int = 32) -> list[float]:
    """Mean next-token cross-entropy of each sequence of ``seqs`` (``N x (L+1)``): per-item
    values, so two models evaluated on the same sequences compare paired."""
    was_training = model.training
    model.eval()
    out: list[float] = []
    with torch.no_grad():
        for start in range(0, seqs.shape[0], batch_size):
            x = seqs[start : start + batch_size]
            logits = model(input_ids=x[:, :-1]).logits.float()
            loss = F.cross_entropy(logits.mT, x[:, 1:], reduction="none").mean(dim=1)
            out.extend(float(v) for v in loss)
    model.train(was_training)
    return out


def train_lm(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    data: TextData,
    steps: int,
    batch_size: int = 32,
    seed: int = 0,
    warmup_frac: float = 0.05,
    eval_every: int = 50,
    progress: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Train ``model`` in place; returns train losses per step, ``(step, val loss)`` pairs and
    the wall time. Learning rates follow linear warmup then cosine decay to 10% of each
    group's initial value; gradients are clipped to norm 1 for every optimizer alike."""
    warmup = max(1, int(warmup_frac * steps))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        t = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * t))

    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(data.train.shape[0], generator=gen)
    cursor = 0
    losses: list[float] = []
    curve: list[tuple[int, float]] = [(0, lm_loss(model, data.val))]
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    start = time.perf_counter()
    for step in range(steps):
        if cursor + batch_size > order.numel():
            order, cursor = torch.randperm(data.train.shape[0], generator=gen), 0
        x = data.train[order[cursor : cursor + batch_size]]
        cursor += batch_size
        logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        sched.step()
        losses.append(float(loss.detach()))
        if (step + 1) % eval_every == 0 or step == steps - 1:
            curve.append((step + 1, lm_loss(model, data.val)))
        if progress is not None:
            progress(step, losses[-1])
    model.eval()
    return {"losses": losses, "val_curve": curve, "seconds": time.perf_counter() - start}
