"""How low-rank a weight matrix is: stable rank, effective rank and the singular spectrum.

Both ranks are smooth surrogates of the rank that do not depend on a threshold, and both are
what the paper reports for Muon- vs NuMuon-trained weights:

- stable rank ``‖W‖_F² / ‖W‖_2² = Σ σ_i² / σ_1²``: how many directions carry the energy of the
  largest one; it bounds how much a truncated SVD of a given rank can keep.
- effective rank (Roy and Vetterli, 2007) ``exp(H(p))`` with ``p_i = σ_i / Σ σ_j`` and
  ``H`` the Shannon entropy: the number of equally strong directions with the same entropy.
"""

from __future__ import annotations

import torch
from torch import nn

from numuon.optimizer import param_groups

__all__ = ["effective_rank", "energy_kept", "hidden_matrices", "model_ranks", "stable_rank"]


def stable_rank(W: torch.Tensor) -> float:
    """``‖W‖_F² / ‖W‖_2²`` (``W`` 2-D); 0 for the zero matrix."""
    s = torch.linalg.svdvals(W.detach().float())
    top = float(s[0]) if s.numel() else 0.0
    return float((s.square().sum() / top**2).item()) if top > 0 else 0.0


def effective_rank(W: torch.Tensor) -> float:
    """``exp(-Σ p_i log p_i)`` with ``p_i = σ_i / Σ_j σ_j``; 0 for the zero matrix."""
    s = torch.linalg.svdvals(W.detach().float())
    total = s.sum()
    if float(total) <= 0:
        return 0.0
    p = s / total
    entropy = -(p * torch.log(p.clamp(min=1e-30))).sum()
    return float(torch.exp(entropy).item())


def energy_kept(W: torch.Tensor, reduction: float) -> float:
    """``Σ_{i<=r} σ_i² / Σ_i σ_i²``: the fraction of ``‖W‖_F²`` that the best rank-``r``
    approximation keeps, with ``r`` the rank a ``reduction`` of the parameters allows
    (:func:`numuon.compression.rank_for_reduction`). A random Gaussian matrix keeps about
    0.52 at a 60% reduction of a square matrix (Marchenko-Pastur); a low-rank one keeps more."""
    from numuon.compression import rank_for_reduction

    s = torch.linalg.svdvals(W.detach().float()).square()
    total = float(s.sum())
    if total <= 0:
        return 0.0
    r = rank_for_reduction(W.shape, reduction)
    return float(s[:r].sum()) / total


def hidden_matrices(model: nn.Module) -> dict[str, torch.Tensor]:
    """The matrices NuMuon trains (``nn.Linear`` and ``Conv1D`` weights but the output head),
    by name."""
    groups = param_groups(model, warn=False)
    return {name: p for g in groups if g["use_numuon"] for name, p in g["params"]}


def model_ranks(model: nn.Module) -> dict[str, float]:
    """Mean stable rank and mean effective rank over the hidden matrices, and the mean
    stable rank relative to ``min(d_out, d_in)`` (comparable across shapes)."""
    mats = list(hidden_matrices(model).values())
    if not mats:
        return {"stable_rank": 0.0, "effective_rank": 0.0, "stable_rank_frac": 0.0}
    sr = [stable_rank(W) for W in mats]
    er = [effective_rank(W) for W in mats]
    frac = [s / min(W.shape) for s, W in zip(sr, mats, strict=True)]
    return {
        "stable_rank": sum(sr) / len(sr),
        "effective_rank": sum(er) / len(er),
        "stable_rank_frac": sum(frac) / len(frac),
    }
