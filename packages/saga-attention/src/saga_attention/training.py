"""Train and evaluate the toy models: GQA and SAGA from scratch on the recall task.

Training goes through ``transformers.Trainer`` (AdamW, cosine schedule, warmup) on sequences
of :class:`~saga_attention.recall.RecallTask`, loss on the answer tokens only. Attention is
dense during training (SAGA is an architecture; sparsity is a decode-time choice); the
conversion recipe may train with sparse attention on (:mod:`saga_attention.convert`).

Evaluation scores every answer of held-out sequences in one teacher-forced forward pass with
``saga_sparse_prefill`` on, so that every position uses exactly the attention a token-by-token
sparse decode would use (the tests check the equivalence against step-by-step decoding with
the cache). An answer counts as correct when its argmax is the bound value: for greedy decoding
that is the same as generating it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PrinterCallback,
    Trainer,
    TrainingArguments,
)

from saga_attention.heads import SagaError
from saga_attention.modeling import (
    SagaConfig,
    SagaForCausalLM,
    enable_saga_attention,
    measure_recall,
)
from saga_attention.recall import BOS, PAD, SEP, RecallTask
from saga_attention.selection import AtopConfig

__all__ = ["EvalResult", "ModelSpec", "TrainSpec", "build_model", "evaluate", "train"]


@dataclass(frozen=True)
class ModelSpec:
    """A tiny Llama-style decoder: ``H_q`` query heads, ``H_k`` key heads, ``H_v`` value heads."""

    hidden_size: int = 128
    intermediate_size: int = 256
    layers: int = 2
    query_heads: int = 8
    key_heads: int = 4
    value_heads: int = 4
    init_std: float = 0.02


@dataclass(frozen=True)
class TrainSpec:
    """Optimisation settings (chosen on this machine for the recall task; see the README)."""

    steps: int = 1500
    batch_size: int = 32
    lr: float = 3e-3
    warmup: float = 0.05
    weight_decay: float = 0.0
    sparse: str = "dense"  # attention during training: dense, exact or atop (sparse prefill)
    top_n: int = 16


def build_model(task: RecallTask, spec: ModelSpec, seed: int = 0) -> PreTrainedModel:
    """GQA (a stock ``LlamaForCausalLM``) when ``H_k = H_v``, else a :class:`SagaForCausalLM`."""
    common: dict[str, Any] = {
        "vocab_size": task.vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.query_heads,
        "num_key_value_heads": spec.value_heads,
        "max_position_embeddings": max(512, task.length),
        "pad_token_id": PAD,
        "bos_token_id": BOS,
        "eos_token_id": SEP,
        "tie_word_embeddings": True,
        "initializer_range": spec.init_std,
    }
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if spec.key_heads == spec.value_heads:
            model: PreTrainedModel = LlamaForCausalLM(LlamaConfig(**common))
        else:
            model = SagaForCausalLM(SagaConfig(num_key_heads=spec.key_heads, **common))
    enable_saga_attention(model, "dense")
    return model


class _Sequences(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __init__(self, input_ids: torch.Tensor, labels: torch.Tensor) -> None:
        self.input_ids, self.labels = input_ids, labels

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.input_ids[i], "labels": self.labels[i]}


def train(
    model: PreTrainedModel,
    task: RecallTask,
    spec: TrainSpec,
    seed: int = 0,
    progress: bool = False,
) -> list[float]:
    """Train ``model`` in place with ``transformers.Trainer``; returns the logged losses."""
    if spec.steps < 1:
        raise SagaError(f"steps: must be >= 1, got {spec.steps}")
    data = task.generate(spec.steps * spec.batch_size, seed=10_000 + seed)
    enable_saga_attention(model, spec.sparse, spec.top_n, sparse_prefill=spec.sparse != "dense")
    with tempfile.TemporaryDirectory(prefix="saga-train-") as tmp:
        args = TrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=spec.batch_size,
            max_steps=spec.steps,
            learning_rate=spec.lr,
            warmup_steps=spec.warmup,
            lr_scheduler_type="cosine",
            weight_decay=spec.weight_decay,
            logging_steps=max(1, spec.steps // 20),
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            seed=seed,
            data_seed=seed,
            dataloader_num_workers=0,
            disable_tqdm=not progress,
            log_level="error",
        )
        trainer = Trainer(
            model=model, args=args, train_dataset=_Sequences(data.input_ids, data.labels)
        )
        trainer.remove_callback(PrinterCallback)  # losses are returned, not printed
        trainer.train()
        losses = [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]
    enable_saga_attention(model, "dense")
    model.eval()
    return losses


@dataclass
class EvalResult:
    """Per-answer correctness, per-sequence answer loss and (Atop-N only) per-row recall."""

    correct: np.ndarray
    seq_loss: np.ndarray
    recall: np.ndarray = field(default_factory=lambda: np.empty(0))

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean())


@torch.no_grad()
def evaluate(
    model: PreTrainedModel,
    task: RecallTask,
    n: int,
    seed: int,
    mode: str = "dense",
    top_n: int = 16,
    batch_size: int = 64,
    atop: AtopConfig | None = None,
    probe_recall: bool = False,
) -> EvalResult:
    """Accuracy and loss on ``n`` held-out sequences under attention ``mode``.

    ``mode`` is ``dense``, ``exact`` (exact top-N) or ``atop`` (Atop-N); sparse modes apply at
    every position (``saga_sparse_prefill``), i.e. as in a token-by-token sparse decode.
    """
    enable_saga_attention(model, mode, top_n, sparse_prefill=mode != "dense", atop=atop)
    model.eval()
    data = task.generate(n, seed=seed)
    correct, losses, recalls = [], [], []
    for start in range(0, n, batch_size):
        ids = data.input_ids[start : start + batch_size]
        pos = data.answer_positions[start : start + batch_size]
        if probe_recall:
            with measure_recall() as probe:
                logits = model(ids).logits
            recalls.append(probe.recalls().numpy())
        else:
            logits = model(ids).logits
        pred_logits = logits.gather(
            1, (pos - 1).unsqueeze(-1).expand(-1, -1, logits.shape[-1])
        )  # [b, Q, V]: the logits that predict each answer
        target = ids.gather(1, pos)
        correct.append((pred_logits.argmax(-1) == target).numpy().ravel())
        ce = F.cross_entropy(pred_logits.transpose(1, 2), target, reduction="none")
        losses.append(ce.mean(-1).numpy())
    enable_saga_attention(model, "dense")
    return EvalResult(
        correct=np.concatenate(correct),
        seq_loss=np.concatenate(losses),
        recall=np.concatenate(recalls) if recalls else np.empty(0),
    )
