"""Post-training compression by low-rank factorisation: plain truncated SVD and SVD-LLM whitening.

Each target ``nn.Linear`` (``y = x Wᵀ + b``, ``W`` is ``d_out x d_in``) is replaced by two
Linears ``d_in -> r -> d_out`` holding ``W ≈ B A`` (``B`` is ``d_out x r``, ``A`` is
``r x d_in``). The rank for a parameter reduction ``ρ`` is the largest ``r`` with
``r (d_out + d_in) <= (1 - ρ) d_out d_in``, the same ``ρ`` for every matrix.

- ``svd``: ``A, B`` from the truncated SVD of ``W`` (best rank-``r`` in Frobenius norm of the
  weights, blind to the inputs).
- ``whitened``: SVD-LLM (Wang et al., 2024). With calibration inputs ``X`` (tokens x
  ``d_in``) and the Cholesky factor ``S`` of ``XᵀX = S Sᵀ``, truncating the SVD of ``W S``
  and folding ``S⁻¹`` back minimises the output error ``‖(W - W') Xᵀ‖_F`` instead, because
  ``‖(W - W') Xᵀ‖_F = ‖(W - W') S‖_F`` and truncation error of ``W S`` is exactly the sum
  of the dropped squared singular values.

Targets are the matrices NuMuon trains (every ``nn.Linear`` but the output head, and GPT-2's
``Conv1D``, whose weight is stored ``d_in x d_out``), so the same function compresses any
transformers causal LM.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import torch
from torch import nn

from numuon.errors import NumuonError
from numuon.spectra import hidden_matrices

__all__ = [
    "LowRankLinear",
    "collect_grams",
    "compress",
    "rank_for_reduction",
    "truncated_svd_factors",
    "whitened_svd_factors",
]

Method = Literal["svd", "whitened"]


class LowRankLinear(nn.Module):
    """``x -> B (A x) + b``: a rank-``r`` stand-in for an ``nn.Linear``."""

    def __init__(self, A: torch.Tensor, B: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        r, d_in = A.shape
        d_out = B.shape[0]
        self.down = nn.Linear(d_in, r, bias=False)
        self.up = nn.Linear(r, d_out, bias=bias is not None)
        with torch.no_grad():
            self.down.weight.copy_(A)
            self.up.weight.copy_(B)
            if bias is not None:
                assert self.up.bias is not None
                self.up.bias.copy_(bias)
        self.in_features, self.out_features, self.rank = d_in, d_out, r

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(self.down(x))


def rank_for_reduction(shape: Sequence[int], reduction: float) -> int:
    """Largest ``r >= 1`` with ``r (d_out + d_in) <= (1 - ρ) d_out d_in`` (``ρ`` = reduction)."""
    if not 0.0 < reduction < 1.0:
        raise NumuonError(f"reduction: {reduction!r} must be in (0, 1)")
    d_out, d_in = int(shape[0]), int(shape[1])
    return max(1, math.floor((1.0 - reduction) * d_out * d_in / (d_out + d_in)))


def truncated_svd_factors(W: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A, B)`` with ``B A = U_r Σ_r V_rᵀ``: ``B = U_r Σ_r^½``, ``A = Σ_r^½ V_rᵀ``."""
    U, S, Vh = torch.linalg.svd(W.detach().double(), full_matrices=False)
    root = S[:r].sqrt()
    return (root[:, None] * Vh[:r]).to(W.dtype), (U[:, :r] * root).to(W.dtype)


def _cholesky(gram: torch.Tensor) -> torch.Tensor:
    """Lower Cholesky factor of ``gram``, damped until it exists (rank-deficient activations,
    e.g. a dead input dimension, make ``XᵀX`` singular; SVD-LLM adds to the diagonal too)."""
    eye = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
    scale = float(gram.diagonal().mean().clamp(min=1e-12))
    damp = 1e-6
    for _ in range(12):
        L, info = torch.linalg.cholesky_ex(gram + damp * scale * eye)
        if int(info) == 0:
            return L
        damp *= 10
    raise NumuonError("whitened SVD: calibration Gram matrix is not positive definite")


def whitened_svd_factors(
    W: torch.Tensor, gram: torch.Tensor, r: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """SVD-LLM factors: ``S = chol(XᵀX)``, ``W S = U Σ Vᵀ``, ``B = U_r Σ_r^½``,
    ``A = Σ_r^½ V_rᵀ S⁻¹`` (``gram`` = ``XᵀX``, ``d_in x d_in``)."""
    S = _cholesky(gram.double())
    U, sig, Vh = torch.linalg.svd(W.detach().double() @ S, full_matrices=False)
    root = sig[:r].sqrt()
    A = torch.linalg.solve_triangular(S, root[:, None] * Vh[:r], upper=False, left=False)
    return A.to(W.dtype), (U[:, :r] * root).to(W.dtype)


@torch.no_grad()
def collect_grams(
    model: nn.Module, batches: Iterable[torch.Tensor], names: Sequence[str] | None = None
) -> dict[str, torch.Tensor]:
    """``XᵀX`` (float64) of the inputs of each named ``nn.Linear`` over ``batches`` of
    ``input_ids``, from one forward pass per batch with hooks (padding included; the toy data
    has none)."""
    modules = dict(model.named_modules())
    targets = list(names) if names is not None else _target_modules(model)
    grams: dict[str, torch.Tensor] = {}
    hooks = []

    def hook(name: str) -> Any:
        def record(_m: nn.Module, inputs: tuple[torch.Tensor, ...], _out: Any) -> None:
            x = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).double()
            g = x.mT @ x
            grams[name] = grams[name] + g if name in grams else g

        return record

    for name in targets:
        hooks.append(modules[name].register_forward_hook(hook(name)))
    was_training = model.training
    model.eval()
    try:
        for ids in batches:
            model(input_ids=ids)
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    return grams


def _target_modules(model: nn.Module) -> list[str]:
    """Names of the Linear (and Conv1D) modules whose weights :func:`hidden_matrices` lists."""
    weights = {id(w) for w in hidden_matrices(model).values()}
    return [
        n
        for n, m in model.named_modules()
        if isinstance(getattr(m, "weight", None), torch.Tensor) and id(m.weight) in weights
    ]


def _linear_weight(module: nn.Module) -> torch.Tensor:
    """The ``d_out x d_in`` matrix of a Linear, or of a ``Conv1D`` (stored transposed)."""
    weight = module.weight
    assert isinstance(weight, torch.Tensor)
    return weight if isinstance(module, nn.Linear) else weight.mT


def compress(
    model: nn.Module,
    reduction: float,
    method: Method = "svd",
    calibration: Iterable[torch.Tensor] | None = None,
    grams: dict[str, torch.Tensor] | None = None,
) -> tuple[nn.Module, dict[str, float]]:
    """A copy of ``model`` with every hidden Linear replaced by a rank-``r`` pair.

    ``reduction`` (``ρ`` in (0, 1)) is the fraction of the target matrices' parameters removed;
    ``method="whitened"`` needs ``calibration``, batches of ``input_ids``, or ``grams`` from
    :func:`collect_grams` (to reuse one calibration pass for several reductions). Returns the
    model and ``{"params_before", "params_after", "reduction"}`` over the target matrices.
    """
    if method not in ("svd", "whitened"):
        raise NumuonError(f"method: {method!r} must be 'svd' or 'whitened'")
    rank_for_reduction((2, 2), reduction)  # validates reduction
    names = _target_modules(model)
    if not names:
        raise NumuonError("compress: the model has no nn.Linear layers to compress")
    if method == "whitened" and grams is None:
        if calibration is None:
            raise NumuonError("compress: method 'whitened' needs calibration batches")
        grams = collect_grams(model, calibration, names)
    out = copy.deepcopy(model)
    modules = dict(out.named_modules())
    before = after = 0
    for name in names:
        lin = modules[name]
        W = _linear_weight(lin)
        r = rank_for_reduction(W.shape, reduction)
        if method == "whitened":
            if grams is None or name not in grams:
                raise NumuonError(f"compress: calibration never reached layer {name!r}")
            A, B = whitened_svd_factors(W, grams[name], r)
        else:
            A, B = truncated_svd_factors(W, r)
        bias = getattr(lin, "bias", None)
        low = LowRankLinear(A, B, bias.detach() if isinstance(bias, torch.Tensor) else None)
        parent_name, _, child = name.rpartition(".")
        parent = out.get_submodule(parent_name) if parent_name else out
        setattr(parent, child, low.to(W.device))
        before += W.numel()
        after += r * (W.shape[0] + W.shape[1])
    return out, {
        "params_before": float(before),
        "params_after": float(after),
        "reduction": 1.0 - after / before,
    }
