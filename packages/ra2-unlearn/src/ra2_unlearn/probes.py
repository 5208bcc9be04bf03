"""Robustness probes: is the forgotten knowledge gone, or only hidden?

- :func:`value_probe`: a logistic-regression probe on layer-l states, fitted on questions about
  some entities and tested on *other* entities, decodes the asked value; its control task
  (random labels per entity) shows the probe reads the value, not the entity.
- :func:`teacher_forced_correct` with ``patch``: the patch test of RA^2's targets.
- :func:`mean_difference_direction` + :func:`ablated_scores`: project the mean
  forget-minus-retain direction out of layer l's output (Arditi et al.'s attack on RMU) and
  ask the forget questions again.
- :func:`relearn`: a short fine-tune on a slice of the forget facts, then the rest are asked.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from paperstack.tasks import Example
from ra2_unlearn.anchors import AnchorBank
from ra2_unlearn.config import UnlearnConfig
from ra2_unlearn.data import encode, pad_batch
from ra2_unlearn.evaluate import QAScores, qa_scores
from ra2_unlearn.losses import sequence_nll
from ra2_unlearn.modules import ablate_direction, capture_layers, replace_states

__all__ = [
    "ablated_scores",
    "layer_states",
    "mean_difference_direction",
    "random_labels",
    "relearn",
    "relearn_split",
    "teacher_forced_correct",
    "value_probe",
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


def _fit_probe(
    x_tr: torch.Tensor, y_tr: torch.Tensor, classes: int, seed: int, steps: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Multinomial logistic regression (L2 1e-3, LBFGS) on standardised features."""
    mu, sd = x_tr.mean(0), x_tr.std(0).clamp_min(1e-6)
    x = (x_tr - mu) / sd
    g = torch.Generator().manual_seed(seed)
    w = (0.01 * torch.randn(x.shape[1], classes, generator=g)).requires_grad_(True)
    b = torch.zeros(classes, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(x @ w + b, y_tr) + 1e-3 * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach(), mu, sd


def random_labels(examples: Sequence[Example], values: Sequence[str], seed: int) -> list[str]:
    """The control task's labels: each (entity, attribute) gets a random value of the
    attribute's set, the same for all its phrasings (Hewitt & Liang's control task), drawn
    independently of the truth."""
    import random

    out = []
    for e in examples:
        key = f"control-{seed}-{e.meta['entity']}-{e.meta['attribute']}"
        pool = sorted(v for v in values if v in _attribute_values(e))
        out.append(random.Random(key).choice(pool))
    return out


def _attribute_values(e: Example) -> set[str]:
    from paperstack.tasks import DOMAINS

    return set(DOMAINS[e.meta["domain"]][e.meta["attribute"]])


def value_probe(
    model: nn.Module,
    tokenizer: Any,
    train: Sequence[Example],
    test: Sequence[Example],
    layer: int,
    seed: int = 0,
    steps: int = 300,
    control: bool = False,
) -> np.ndarray:
    """Per-question correctness ``[len(test)]`` of a linear probe reading the asked value from
    the last prompt token's layer-l state, fitted on ``train`` and tested on ``test``.

    The two sets must ask about *different entities* (the demo fits on retain entities and
    tests on the forget entities), so the probe can only score by reading a value code shared
    across entities, not by recognising which entity is asked about. With ``control=True``
    the labels of both sets are :func:`random_labels` (a control task): a probe that still
    scores above chance there measures something other than the value.
    """
    overlap = {e.meta["entity"] for e in train} & {e.meta["entity"] for e in test}
    if overlap:
        raise ValueError(f"probe train and test share entities {sorted(overlap)[:3]}")
    if not train or not test:
        return np.zeros(0, bool)
    values = sorted({v for e in [*train, *test] for v in _attribute_values(e)})
    if control:
        y_train, y_test = random_labels(train, values, seed), random_labels(test, values, seed)
    else:
        y_train, y_test = [e.answer for e in train], [e.answer for e in test]
    y_tr = torch.tensor([values.index(v) for v in y_train])
    y_te = torch.tensor([values.index(v) for v in y_test])
    x_tr = layer_states(model, tokenizer, train, layer, last_only=True).cpu()
    x_te = layer_states(model, tokenizer, test, layer, last_only=True).cpu()
    w, b, mu, sd = _fit_probe(x_tr, y_tr, len(values), seed, steps)
    pred = (((x_te - mu) / sd) @ w + b).argmax(-1)
    return (pred == y_te).numpy()


@torch.no_grad()
def teacher_forced_correct(
    model: nn.Module,
    tokenizer: Any,
    examples: Sequence[Example],
    patch: tuple[UnlearnConfig, AnchorBank] | None = None,
    batch_size: int = 256,
) -> np.ndarray:
    """Per-example: does the model predict every answer token (EOS excluded) given the prompt
    and the answer so far? For a greedy decoder this equals "the answer comes out".

    ``patch=(config, bank)`` is the patch test of RA^2's targets: the layer-l states at the
    positions RA^2 would attract are replaced by their targets inside this frozen model,
    everything else left as it is. If the targets carry the forgotten answer, it still comes
    out; if they do not, it does not. No training is involved, so this isolates what the
    targets are from how well an optimiser reaches them.
    """
    from ra2_unlearn.trainer import ra2_positions

    enc = encode(tokenizer, examples)
    pad = int(tokenizer.pad_token_id or 0)
    eos = tokenizer.eos_token_id
    device = next(model.parameters()).device
    if patch is not None:
        patch = (patch[0].for_model(model), patch[1])  # layer None: the model's middle layer
        patch[1].to(device)
    out: list[bool] = []
    model.eval()
    for s in range(0, len(enc), batch_size):
        b = {k: v.to(device) for k, v in pad_batch(enc[s : s + batch_size], pad).items()}
        ids, mask = b["input_ids"], b["attention_mask"]
        if patch is None:
            logits = model(input_ids=ids, attention_mask=mask).logits
        else:
            config, bank = patch
            ell = int(config.layer or 0)  # resolved above
            with capture_layers(model, [ell]) as store:
                ref_logits = model(input_ids=ids, attention_mask=mask).logits
            states = store[ell]
            where, exclude = ra2_positions(
                config, bank, states, ref_logits, b, [] if eos is None else [eos]
            )
            targets = bank.targets(states[where], config.k, config.tau, config.target, exclude)
            with replace_states(model, ell, where, targets):
                logits = model(input_ids=ids, attention_mask=mask).logits
        nxt = b["labels"][:, 1:]
        scored = (nxt != -100) & (nxt != (eos if eos is not None else -1))
        right = (logits[:, :-1].argmax(-1) == nxt) | ~scored
        out.extend(right.all(-1).tolist())
    return np.array(out, dtype=bool)


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
