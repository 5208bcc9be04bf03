"""Robustness probes: is the forgotten knowledge gone, or only hidden?

- :func:`linear_probe_accuracy`: a logistic-regression probe on layer-l states of the forget
  questions, fitted on some phrasings and tested on a held-out one, decodes the forgotten value.
- :func:`mean_difference_direction` + :func:`ablated_scores`: project the mean
  forget-minus-retain direction out of layer l's output (Arditi et al.'s attack on RMU) and
  ask the forget questions again.
- :func:`relearn`: a short fine-tune on a slice of the forget facts, then the rest are asked.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from paperstack.tasks import Example
from paperstack.tasks.facts import TRAIN_TEMPLATES
from ra2_unlearn.data import encode, pad_batch
from ra2_unlearn.evaluate import QAScores, qa_scores
from ra2_unlearn.losses import sequence_nll
from ra2_unlearn.modules import ablate_direction, capture_layers

__all__ = [
    "ablated_scores",
    "layer_states",
    "linear_probe_accuracy",
    "mean_difference_direction",
    "relearn",
    "relearn_split",
]


@torch.no_grad()
def layer_states(
    model: nn.Module, tokenizer: Any, examples: Sequence[Example], layer: int, last_only: bool
) -> torch.Tensor:
    """Layer-``layer`` states of the prompts (chat-formatted, no answer): the last prompt
    token's ``[N, d]`` when ``last_only``, else every real token's ``[sum T, d]``."""
    enc = encode(tokenizer, examples)
    prompts = [
        type(e)(e.input_ids[: e.prompt_len], e.labels[: e.prompt_len], e.prompt_len) for e in enc
    ]
    batch = pad_batch(prompts, int(tokenizer.pad_token_id or 0))
    device = next(model.parameters()).device
    ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
    model.eval()
    with capture_layers(model, [layer]) as store:
        model(input_ids=ids, attention_mask=mask)
    h = store[layer].float()
    if last_only:
        return h[torch.arange(len(prompts), device=device), mask.sum(1) - 1]
    return h[mask.bool()]


def linear_probe_accuracy(
    model: nn.Module,
    tokenizer: Any,
    forget: Sequence[Example],
    layer: int,
    seed: int = 0,
    steps: int = 300,
) -> tuple[float, int]:
    """Held-out-phrasing accuracy of a linear probe reading the forgotten value at layer l.

    Features: the last prompt token's layer-l state (standardised). Fitted (multinomial
    logistic regression, L2 1e-3, LBFGS) on the questions phrased with all but the last
    training template, tested on the last one, so the probe must find the value in the
    representation rather than memorise one phrasing. Returns ``(accuracy, n_test)``.
    """
    held = TRAIN_TEMPLATES[-1]
    train = [e for e in forget if e.meta.get("template") != held]
    test = [e for e in forget if e.meta.get("template") == held]
    if not train or not test:
        return 0.0, 0
    values = sorted({e.answer for e in forget})
    y_tr = torch.tensor([values.index(e.answer) for e in train])
    y_te = torch.tensor([values.index(e.answer) for e in test])
    x_tr = layer_states(model, tokenizer, train, layer, last_only=True).cpu()
    x_te = layer_states(model, tokenizer, test, layer, last_only=True).cpu()
    mu, sd = x_tr.mean(0), x_tr.std(0).clamp_min(1e-6)
    x_tr, x_te = (x_tr - mu) / sd, (x_te - mu) / sd
    g = torch.Generator().manual_seed(seed)
    w = (0.01 * torch.randn(x_tr.shape[1], len(values), generator=g)).requires_grad_(True)
    b = torch.zeros(len(values), requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(x_tr @ w + b, y_tr) + 1e-3 * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        acc = float(((x_te @ w + b).argmax(-1) == y_te).float().mean())
    return acc, len(test)


def mean_difference_direction(
    model: nn.Module,
    tokenizer: Any,
    forget: Sequence[Example],
    retain: Sequence[Example],
    layer: int,
) -> torch.Tensor:
    """``mean(h_l on forget tokens) - mean(h_l on retain tokens)`` in the unlearned model."""
    hf = layer_states(model, tokenizer, forget, layer, last_only=False)
    hr = layer_states(model, tokenizer, retain, layer, last_only=False)
    return hf.mean(0) - hr.mean(0)


def ablated_scores(
    model: nn.Module,
    tokenizer: Any,
    forget: Sequence[Example],
    retain: Sequence[Example],
    layer: int,
) -> QAScores:
    """Forget-question scores with the mean forget-minus-retain direction projected out of
    layer l's output at every position (a recovery attack: high = knowledge came back)."""
    direction = mean_difference_direction(model, tokenizer, forget, retain, layer)
    with ablate_direction(model, layer, direction):
        return qa_scores(model, tokenizer, forget)


def relearn_split(
    forget: Sequence[Example], fraction: float = 0.1, seed: int = 0
) -> tuple[list[Example], list[Example]]:
    """Split forget questions by fact: a ``fraction`` slice to relearn on, the rest to ask."""
    import random

    facts = sorted({(e.meta["entity"], e.meta["attribute"]) for e in forget})
    random.Random(f"relearn-{seed}").shuffle(facts)
    k = max(1, round(fraction * len(facts)))
    chosen = set(facts[:k])
    slice_ = [e for e in forget if (e.meta["entity"], e.meta["attribute"]) in chosen]
    rest = [e for e in forget if (e.meta["entity"], e.meta["attribute"]) not in chosen]
    return slice_, rest


def relearn(
    model: nn.Module,
    tokenizer: Any,
    examples: Sequence[Example],
    steps: int = 20,
    lr: float = 1e-3,
    batch_size: int = 8,
    seed: int = 0,
) -> nn.Module:
    """A copy of ``model`` fine-tuned for ``steps`` AdamW steps (all weights) on ``examples``
    (answer-token NLL): the relearning attack. The input model is left unchanged."""
    attacked = copy.deepcopy(model)
    attacked.train()
    for p in attacked.parameters():
        p.requires_grad_(True)
    enc = encode(tokenizer, examples)
    opt = torch.optim.AdamW(attacked.parameters(), lr=lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(seed)
    device = next(attacked.parameters()).device
    pad = int(tokenizer.pad_token_id or 0)
    for _ in range(steps):
        idx = torch.randint(len(enc), (batch_size,), generator=g).tolist()
        b = pad_batch([enc[i] for i in idx], pad)
        logits = attacked(
            input_ids=b["input_ids"].to(device), attention_mask=b["attention_mask"].to(device)
        ).logits
        nll, n = sequence_nll(logits, b["labels"].to(device))
        loss = nll.sum() / n.sum().clamp_min(1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    attacked.eval()
    return attacked
