"""Train and evaluate the toy models: GQA and SAGA from scratch on the recall task.

Training goes through ``transformers.Trainer`` (AdamW, cosine schedule, warmup) on sequences
of :class:`~saga_attention.recall.RecallTask`, loss on the answer tokens only. Attention is
dense during training (SAGA is an architecture; sparsity is a decode-time choice); the
conversion recipe may train with sparse attention on (:mod:`saga_attention.convert`).

Long contexts are reached by a length curriculum (one ``TrainSpec`` per phase, each with its
own context length): the lookup circuit forms quickly on short, filler-free sequences and then
learns to ignore fillers at 1K tokens, where training from scratch would sit on its loss
plateau for longer than the demo's CPU budget.

Evaluation (:func:`evaluate_decode`) does what a deployed model does: a dense prefill of the
prompt (``<bos>``, the context, ``<sep>``) into the KV cache, then the query region decoded
under each attention mode, teacher-forced. The query tokens go through the model in one call
with ``saga_sparse_prefill`` on, so every one of them uses exactly the attention a
token-by-token sparse decode would use over the cache (the tests check the equivalence against
step-by-step decoding). An answer counts as correct when its argmax is the bound value: for
greedy decoding that is the same as generating it.
"""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import (
    DynamicCache,
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
    cache_kwargs,
    enable_saga_attention,
    measure_recall,
)
from saga_attention.recall import BOS, PAD, SEP, RecallTask
from saga_attention.selection import AtopConfig

__all__ = [
    "EvalResult",
    "ModelSpec",
    "TrainSpec",
    "build_model",
    "evaluate",
    "evaluate_decode",
    "train",
    "train_curriculum",
]


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
    rope_theta: float = 10_000.0
    max_positions: int = 512


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
    context: int | None = None  # context length of this phase's sequences (None: the task's)


def build_model(task: RecallTask, spec: ModelSpec, seed: int = 0) -> PreTrainedModel:
    """GQA (a stock ``LlamaForCausalLM``) when ``H_k = H_v``, else a :class:`SagaForCausalLM`."""
    common: dict[str, Any] = {
        "vocab_size": task.vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.query_heads,
        "num_key_value_heads": spec.value_heads,
        "max_position_embeddings": max(spec.max_positions, task.length),
        "rope_parameters": {"rope_type": "default", "rope_theta": spec.rope_theta},
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
    if spec.context is not None:
        task = task.with_context(spec.context)
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


def train_curriculum(
    model: PreTrainedModel,
    task: RecallTask,
    phases: tuple[TrainSpec, ...],
    seed: int = 0,
) -> list[float]:
    """Train through ``phases`` in order (each with its own context and data seed)."""
    losses: list[float] = []
    for i, phase in enumerate(phases):
        losses += train(model, task, phase, seed=seed + 7919 * i)
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


@torch.no_grad()
def evaluate_decode(
    model: PreTrainedModel,
    task: RecallTask,
    n: int,
    seed: int,
    modes: tuple[str, ...] = ("dense", "exact", "atop"),
    top_n: int = 32,
    atop: AtopConfig | None = None,
    probe_recall: bool = False,
    batch_size: int | None = None,
) -> dict[str, EvalResult]:
    """Accuracy and loss on ``n`` held-out sequences, prefilled densely, decoded per ``mode``.

    One dense prefill of each prompt is shared by every mode (each mode decodes from its own
    copy of the cache). With ``probe_recall`` the ``atop`` mode also records Atop-N's recall
    against exact top-N on every decode row (:func:`~saga_attention.modeling.measure_recall`).
    """
    data = task.generate(n, seed=seed)
    prompt = task.prompt_length
    batch_size = batch_size or max(1, 4096 // task.length)
    out: dict[str, dict[str, list[np.ndarray]]] = {
        m: {"correct": [], "loss": [], "recall": []} for m in modes
    }
    model.eval()
    for start in range(0, n, batch_size):
        ids = data.input_ids[start : start + batch_size]
        enable_saga_attention(model, "dense")
        cache = DynamicCache(config=model.config)
        model(ids[:, :prompt], **cache_kwargs(model, cache), use_cache=True)
        tail = ids[:, prompt:]  # q1 a1 q2 a2 ...: logits at q_j predict a_j
        target = tail[:, 1::2]
        for mode in modes:
            enable_saga_attention(model, mode, top_n, sparse_prefill=mode != "dense", atop=atop)
            run = copy.deepcopy(cache)
            if probe_recall and mode == "atop":
                with measure_recall() as probe:
                    logits = model(tail, **cache_kwargs(model, run), use_cache=True).logits
                out[mode]["recall"].append(probe.recalls().numpy())
            else:
                logits = model(tail, **cache_kwargs(model, run), use_cache=True).logits
            pred = logits[:, 0::2]  # [b, Q, V]
            out[mode]["correct"].append((pred.argmax(-1) == target).numpy().ravel())
            ce = F.cross_entropy(pred.transpose(1, 2), target, reduction="none")
            out[mode]["loss"].append(ce.mean(-1).numpy())
    enable_saga_attention(model, "dense")
    return {
        mode: EvalResult(
            correct=np.concatenate(v["correct"]),
            seq_loss=np.concatenate(v["loss"]),
            recall=np.concatenate(v["recall"]) if v["recall"] else np.empty(0),
        )
        for mode, v in out.items()
    }
