"""Meta-learning over languages as tasks: first-order MAML and Reptile with ``torch.func``.

Each source language ℓ is a task with preference pairs D_ℓ. An outer step draws a meta-batch
of languages; for each, a support set S_ℓ and a disjoint query set Q_ℓ of pairs. The inner loop
adapts the shared initialisation φ to the language with k plain gradient steps of the
preference loss L (Bradley-Terry for a reward model, DPO for a policy; :mod:`meta_pref.loss`)::

    φ'_ℓ = φ;   repeat k times:   φ'_ℓ ← φ'_ℓ - α ∇_φ L(φ'_ℓ; S_ℓ)

and the outer step moves φ toward parameters that adapt well:

- first-order MAML (FOMAML): the query-set gradient at the adapted parameters, averaged over
  the meta-batch, is φ's gradient (second-order terms dropped), applied by Adam (lr β)::

      g = (1/|B|) Σ_ℓ ∇ L(φ'_ℓ; Q_ℓ)

- Reptile: φ moves a fraction ε of the way to the adapted parameters (no query set)::

      φ ← φ + ε (1/|B|) Σ_ℓ (φ'_ℓ - φ)

The inner loop is functional: ``torch.func.functional_call`` runs the Hugging Face model on a
dict of parameter tensors and ``torch.func.grad`` differentiates the loss with respect to that
dict, so the module's own parameters (φ) are untouched until the outer step. Only parameters
with ``requires_grad`` are meta-learned: with a peft LoRA model that is the adapter (and the
reward head), the LoRA-only option; the frozen body enters the forward unchanged.

:func:`joint_train` is the baseline initialisation: the same loss on all source languages'
pairs pooled, Adam, compute-matched to the meta-learner by default (the same number of
forward/backward passes of the same batch size).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch.func import functional_call, grad

from meta_pref.errors import MetaPrefError
from meta_pref.loss import bradley_terry_loss, dpo_loss, sequence_logps

__all__ = [
    "MetaConfig",
    "MetaResult",
    "Objective",
    "bradley_terry_objective",
    "dpo_objective",
    "joint_train",
    "meta_train",
]

Params = dict[str, torch.Tensor]
#: ``objective(model, params, batch) -> loss``: a functional preference loss.
Objective = Callable[[torch.nn.Module, Params, Mapping[str, torch.Tensor]], torch.Tensor]
#: ``collate(rows) -> batch``: tokenized rows of one language to a tensor batch.
Collate = Callable[[Sequence[Any]], dict[str, torch.Tensor]]


def bradley_terry_objective(
    model: torch.nn.Module, params: Params, batch: Mapping[str, torch.Tensor]
) -> torch.Tensor:
    """L_BT of a sequence-classification reward model on a chosen-then-rejected batch."""
    out = functional_call(
        model,
        params,
        (),
        {
            "input_ids": batch["input_ids"],
            "attention_mask": batch["attention_mask"],
            "use_cache": False,
        },
        strict=False,
    )
    chosen, rejected = out.logits.squeeze(-1).chunk(2)
    return bradley_terry_loss(chosen, rejected)


def dpo_objective(beta: float) -> Objective:
    """L_DPO (with β) of a causal LM on a chosen-then-rejected batch carrying π_ref's
    log-probabilities (:func:`meta_pref.models.add_reference_logps`)."""

    def objective(
        model: torch.nn.Module, params: Params, batch: Mapping[str, torch.Tensor]
    ) -> torch.Tensor:
        out = functional_call(
            model, params, (), {"input_ids": batch["input_ids"],
                                "attention_mask": batch["attention_mask"], "use_cache": False},
            strict=False,
        )  # fmt: skip
        logps = sequence_logps(out.logits, batch["input_ids"], batch["completion_mask"])
        chosen, rejected = logps.chunk(2)
        return dpo_loss(
            chosen, rejected, batch["ref_chosen_logps"], batch["ref_rejected_logps"], beta
        )

    return objective


@dataclass(frozen=True)
class MetaConfig:
    """Budgets and step sizes of meta-training (the demo's defaults; see its module docstring
    for how they were chosen). ``inner_lr`` = α, ``outer_lr`` = β (FOMAML's Adam),
    ``reptile_step`` = ε, ``inner_steps`` = k, ``meta_batch`` = |B| languages per outer step."""

    algorithm: Literal["fomaml", "reptile"] = "fomaml"
    outer_steps: int = 100
    meta_batch: int = 3
    inner_steps: int = 3
    inner_lr: float = 0.01  # 0.2's choice; the full demo takes meta-pref tune's (demo.FULL)
    outer_lr: float = 5e-4
    reptile_step: float = 0.5
    support: int = 32
    query: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        if self.algorithm not in ("fomaml", "reptile"):
            raise MetaPrefError(f"algorithm={self.algorithm!r}: must be 'fomaml' or 'reptile'")
        for name in ("outer_steps", "meta_batch", "inner_steps", "support", "query"):
            if getattr(self, name) < 1:
                raise MetaPrefError(f"{name}={getattr(self, name)}: must be >= 1")
        for name in ("inner_lr", "outer_lr", "reptile_step"):
            if not getattr(self, name) > 0:
                raise MetaPrefError(f"{name}={getattr(self, name)}: must be > 0")

    @property
    def passes_per_step(self) -> int:
        """Forward/backward passes of one outer step (k inner + 1 query per language)."""
        query = 1 if self.algorithm == "fomaml" else 0
        return self.meta_batch * (self.inner_steps + query)


@dataclass
class MetaResult:
    """What a meta-training (or joint) run did: the loss per outer step and its wall time."""

    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0


def _trainable(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if not params:
        raise MetaPrefError("the model has no trainable parameters to meta-learn")
    return params


def _check_tasks(tasks: Mapping[str, Sequence[Any]], need: int) -> None:
    if not tasks:
        raise MetaPrefError("meta-learning needs at least one source language; got none")
    for code, rows in tasks.items():
        if not rows:
            raise MetaPrefError(f"source language {code!r} has no pairs")
    for code, rows in tasks.items():
        if len(rows) < need:
            raise MetaPrefError(
                f"source language {code!r} has {len(rows)} pairs; a support plus query split "
                f"needs at least {need}"
            )


def _split(rows: Sequence[Any], support: int, query: int, rng: random.Random) -> tuple[list, list]:
    picked = rng.sample(range(len(rows)), support + query)
    return [rows[i] for i in picked[:support]], [rows[i] for i in picked[support:]]


def adapt_functional(
    model: torch.nn.Module,
    start: Params,
    batch: Mapping[str, torch.Tensor],
    objective: Objective,
    steps: int,
    lr: float,
) -> Params:
    """The inner loop: ``steps`` plain gradient steps of ``objective`` from ``start`` on one
    support batch, through ``torch.func.grad`` (no autograd graph kept between steps)."""
    fast = {n: t.detach() for n, t in start.items()}
    loss_grad = grad(lambda p: objective(model, p, batch))
    for _ in range(steps):
        g = loss_grad(fast)
        fast = {n: fast[n] - lr * g[n] for n in fast}
    return fast


def meta_train(
    model: torch.nn.Module,
    tasks: Mapping[str, Sequence[Any]],
    objective: Objective,
    collate: Collate,
    config: MetaConfig = MetaConfig(),
    on_step: Callable[[int, float], None] | None = None,
) -> MetaResult:
    """Meta-train ``model``'s trainable parameters in place over ``tasks`` (language code ->
    tokenized rows) with FOMAML or Reptile (see the module docstring). Returns the mean query
    loss (FOMAML) or support loss after adaptation (Reptile) per outer step."""
    need = config.support + (config.query if config.algorithm == "fomaml" else 0)
    _check_tasks(tasks, need)
    rng = random.Random(config.seed)
    phi = _trainable(model)
    codes = list(tasks)
    outer = torch.optim.Adam(phi.values(), lr=config.outer_lr)
    result = MetaResult()
    start_time = time.perf_counter()
    model.train()
    for step in range(config.outer_steps):
        languages = rng.sample(codes, min(config.meta_batch, len(codes)))
        total = {n: torch.zeros_like(p) for n, p in phi.items()}
        losses = []
        for code in languages:
            support, query = _split(tasks[code], config.support, config.query, rng)
            support_batch = collate(support)
            fast = adapt_functional(
                model, dict(phi), support_batch, objective, config.inner_steps, config.inner_lr
            )
            if config.algorithm == "fomaml":
                query_batch = collate(query)
                loss, g = _loss_and_grad(model, fast, query_batch, objective)
                for n in total:
                    total[n] += g[n]
            else:
                with torch.no_grad():
                    loss = objective(model, fast, support_batch)
                for n in total:
                    total[n] += phi[n].detach() - fast[n]  # -(φ' - φ): a descent direction
            losses.append(float(loss))
        if config.algorithm == "fomaml":
            for n, p in phi.items():
                p.grad = total[n] / len(languages)
            outer.step()
            outer.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                for n, p in phi.items():
                    p.sub_(config.reptile_step * total[n] / len(languages))
        result.losses.append(sum(losses) / len(losses))
        result.steps += 1
        if on_step is not None:
            on_step(step, result.losses[-1])
    result.seconds = time.perf_counter() - start_time
    model.eval()
    return result


def _loss_and_grad(
    model: torch.nn.Module, params: Params, batch: Mapping[str, torch.Tensor], objective: Objective
) -> tuple[torch.Tensor, Params]:
    def with_value(p: Params) -> tuple[torch.Tensor, torch.Tensor]:
        loss = objective(model, p, batch)
        return loss, loss.detach()

    g, loss = grad(with_value, has_aux=True)(params)
    return loss, g


def joint_train(
    model: torch.nn.Module,
    tasks: Mapping[str, Sequence[Any]],
    objective: Objective,
    collate: Collate,
    steps: int,
    batch: int = 32,
    lr: float = 5e-4,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
) -> MetaResult:
    """The joint multi-task baseline: Adam on ``objective`` over every source language's rows
    pooled, ``steps`` batches of ``batch`` rows (trains ``model`` in place)."""
    _check_tasks(tasks, 1)
    rng = random.Random(seed)
    pooled = [row for rows in tasks.values() for row in rows]
    phi = _trainable(model)
    opt = torch.optim.Adam(phi.values(), lr=lr)
    result = MetaResult()
    start_time = time.perf_counter()
    model.train()
    for step in range(steps):
        b = collate(rng.sample(pooled, min(batch, len(pooled))))
        loss = objective(model, dict(phi), b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        result.losses.append(float(loss.detach()))
        result.steps += 1
        if on_step is not None:
            on_step(step, result.losses[-1])
    result.seconds = time.perf_counter() - start_time
    model.eval()
    return result
