"""The baselines NuMuon is compared with, built the same way for a fair comparison.

- ``adamw``: ``torch.optim.AdamW`` on every parameter.
- ``muon``: ``torch.optim.Muon`` on the hidden matrices plus ``torch.optim.AdamW`` on the rest
  (``torch.optim.Muon`` accepts 2-D parameters only), chained as one optimizer.
- ``muon-polar``: NuMuon at ``r = 1``, the exact polar factor: the like-for-like control
  that isolates NuMuon's rank constraint.
- ``muon-ns``: a Newton-Schulz Muon reference (Keller Jordan's ``muon.py``) written as a
  :class:`~numuon.NuMuon` subclass that only swaps the direction, so it shares NuMuon's
  momentum, scaling, weight decay and AdamW fallback; tests check it against ``torch.optim.Muon``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn

from numuon.errors import NumuonError
from numuon.optimizer import NuMuon, param_groups

__all__ = [
    "NS_COEFFICIENTS",
    "ChainedOptimizer",
    "NewtonSchulzMuon",
    "build_optimizer",
    "newton_schulz",
]

#: Keller Jordan's quintic Newton-Schulz coefficients (a, b, c): chosen to maximise the slope at
#: zero, so five steps push every singular value into roughly [0.5, 1.5] rather than exactly to
#: one; the resulting ``U S' Vᵀ`` trains as well as ``U Vᵀ`` and costs five matmul triples.
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def newton_schulz(
    G: torch.Tensor,
    steps: int = 5,
    coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
    eps: float = 1e-7,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Approximate polar factor of ``G`` by the quintic Newton-Schulz iteration:

        X₀ = G / ‖G‖_F,   X_{j+1} = a X_j + (b A_j + c A_j²) X_j,   A_j = X_j X_jᵀ

    run on the wide orientation (``X Xᵀ`` is the smaller Gram matrix), with the same ``addmm``
    calls as ``torch.optim.Muon`` so that in bfloat16 the two give the same bits (tested).
    ``dtype``: the precision of the iteration. ``torch.optim.Muon`` always runs it in
    bfloat16; the default here is bfloat16 on CUDA (as in ``muon.py``) and float32 elsewhere
    (CPU bfloat16 matmuls are slow), and the bench runs both settings explicitly.
    """
    a, b, c = coefficients
    if dtype is None:
        dtype = torch.bfloat16 if G.is_cuda else torch.float32
    X = G.to(dtype)
    tall = G.shape[0] > G.shape[1]
    if tall:
        X = X.mT
    X = X / X.norm().clamp(min=eps)
    for _ in range(steps):
        A = X @ X.mT
        B = torch.addmm(A, A, A, beta=b, alpha=c)
        X = torch.addmm(X, B, X, beta=a)
    if tall:
        X = X.mT
    return X.to(G.dtype)


class NewtonSchulzMuon(NuMuon):
    """Muon with the Newton-Schulz polar factor: NuMuon's harness, full rank, no SVD.

    ``dtype`` is the Newton-Schulz precision (see :func:`newton_schulz`): ``torch.bfloat16``
    is ``torch.optim.Muon`` (the same step, tested), ``torch.float32`` the same algorithm in
    float32, which ``torch.optim.Muon`` cannot run (it casts to bfloat16 unconditionally): the
    fp32 Muon control of the bench.
    """

    def __init__(
        self,
        params: Iterable[Any],
        ns_steps: int = 5,
        dtype: torch.dtype | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("rank_schedule", 1.0)
        super().__init__(params, **kwargs)
        self.ns_steps = ns_steps
        self.ns_dtype = dtype

    def direction(
        self, update: torch.Tensor, k: int, state: dict[str, Any], group: dict[str, Any], gen: Any
    ) -> torch.Tensor:
        return newton_schulz(update, steps=self.ns_steps, dtype=self.ns_dtype)


class ChainedOptimizer(torch.optim.Optimizer):
    """Several optimizers stepped as one (for ``torch.optim.Muon`` + ``AdamW``).

    Exposes the union of their ``param_groups`` (so learning-rate schedulers and the HF Trainer
    see every group) and a state dict holding each member's (``members_state()`` merges their
    per-parameter state).
    """

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer]) -> None:
        # Not calling super().__init__: the members own the parameters and the state.
        self.optimizers = list(optimizers)
        self.defaults: dict[str, Any] = {}
        self._optimizer_step_pre_hooks: dict[int, Callable[..., Any]] = {}
        self._optimizer_step_post_hooks: dict[int, Callable[..., Any]] = {}
        # The members' own group dicts (not copies), so a scheduler's lr change reaches them.
        self.param_groups = [g for opt in self.optimizers for g in opt.param_groups]
        # Per-parameter state lives in the members; this view is filled from them on demand.
        self.state = defaultdict(dict)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for opt in self.optimizers:
            opt.step()
        return loss

    def members_state(self) -> dict[torch.Tensor, Any]:
        """The per-parameter state of every member, merged."""
        merged: dict[torch.Tensor, Any] = {}
        for opt in self.optimizers:
            merged.update(opt.state)
        return merged

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:  # type: ignore[override]
        return {"members": [opt.state_dict() for opt in self.optimizers]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:  # type: ignore[override]
        members = state_dict.get("members", [])
        if len(members) != len(self.optimizers):
            raise NumuonError(
                f"state dict: {len(members)} member optimizers, expected {len(self.optimizers)}"
            )
        for opt, sd in zip(self.optimizers, members, strict=True):
            opt.load_state_dict(sd)


def build_optimizer(
    name: str,
    model: nn.Module,
    *,
    lr: float = 0.02,
    adamw_lr: float = 3e-3,
    weight_decay: float = 0.0,
    rank_schedule: Any = 0.25,
    seed: int = 0,
    **numuon_kwargs: Any,
) -> torch.optim.Optimizer:
    """One of ``numuon``, ``muon-polar``, ``muon``, ``muon-ns``, ``adamw`` for ``model``, with
    shared settings.

    ``muon-polar`` is the like-for-like Muon control of NuMuon: the same optimizer at
    ``rank_schedule=1.0`` (the exact polar factor ``U Vᵀ`` from an SVD, the same momentum,
    scale, weight decay and AdamW fallback), so NuMuon differs from it only by the rank
    constraint. ``muon`` is ``torch.optim.Muon`` (Newton-Schulz), ``muon-ns`` the Newton-Schulz
    reference in NuMuon's harness.

    ``lr`` is the matrix step size of the Muon family; ``adamw_lr`` is used by AdamW, both for
    the ``adamw`` baseline's every parameter and for the embeddings, head and 1-D parameters of
    the Muon family, so all optimizers treat those parameters identically. ``weight_decay``
    applies to matrices only in every optimizer.
    """
    groups = param_groups(model)
    matrices = [p for g in groups if g["use_numuon"] for _, p in g["params"]]
    others = [p for g in groups if not g["use_numuon"] for _, p in g["params"]]
    betas = (0.9, 0.95)
    if name in ("numuon", "muon-polar"):
        return NuMuon(
            groups,
            lr=lr,
            weight_decay=weight_decay,
            rank_schedule=rank_schedule if name == "numuon" else 1.0,
            adamw_lr=adamw_lr,
            adamw_betas=betas,
            seed=seed,
            **numuon_kwargs,
        )
    if name == "muon-ns":
        return NewtonSchulzMuon(
            groups, lr=lr, weight_decay=weight_decay, adamw_lr=adamw_lr, adamw_betas=betas
        )
    if name == "muon":
        members: list[torch.optim.Optimizer] = [
            torch.optim.Muon(matrices, lr=lr, weight_decay=weight_decay, momentum=0.95)
        ]
        if others:
            members.append(torch.optim.AdamW(others, lr=adamw_lr, betas=betas, weight_decay=0.0))
        return ChainedOptimizer(members)
    if name == "adamw":
        return torch.optim.AdamW(
            [
                {"params": matrices, "weight_decay": weight_decay},
                {"params": others, "weight_decay": 0.0},
            ],
            lr=adamw_lr,
            betas=betas,
        )
    raise NumuonError(
        f"optimizer {name!r}: expected one of adamw, muon, muon-ns, muon-polar, numuon"
    )
