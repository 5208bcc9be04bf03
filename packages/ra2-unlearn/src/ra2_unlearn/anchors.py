"""RA^2's anchor bank: retain hidden states at layer l, and the targets built from them.

The frozen reference model is run on retain data once; its layer-l token states ``H_r`` are the
anchors (a seeded subsample of at most ``max_anchors``). A forget token's target is a point on
the retain manifold near where that token already is, so attraction toward it removes what is
specific to the forget example without sending the state to a junk direction (RMU's ``c*u``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from ra2_unlearn.errors import UnlearnError
from ra2_unlearn.modules import capture_layers

__all__ = ["AnchorBank", "knn_targets"]


def knn_targets(
    queries: torch.Tensor,
    anchors: torch.Tensor,
    k: int,
    tau: float | None = None,
    keys: torch.Tensor | None = None,
    query_keys: torch.Tensor | None = None,
) -> torch.Tensor:
    """Kernel-weighted mean of each query's k nearest anchors.

    ``t_f = sum_{j in kNN(h_f)} softmax_j(-||h_f - H_r[j]||^2 / tau) * H_r[j]``

    ``queries`` ``[N, d]`` are the reference states ``h_f``; ``anchors`` ``[M, d]`` are ``H_r``.
    Distances are measured between ``query_keys`` and ``keys`` when given (the PCA coordinates
    of both) and default to the raw vectors. ``tau=None`` uses, per query, the mean of its k
    squared distances, so the kernel is neither one-hot nor uniform at any activation scale;
    a query sitting exactly on an anchor keeps it as its own target (weight ~1).
    """
    if anchors.shape[0] == 0:
        raise UnlearnError("anchor bank is empty (the retain set produced no tokens)")
    keys = anchors if keys is None else keys
    query_keys = queries if query_keys is None else query_keys
    k = min(k, anchors.shape[0])
    d2 = torch.cdist(query_keys.float(), keys.float()).pow(2)  # [N, M]
    dist, idx = d2.topk(k, dim=-1, largest=False)  # [N, k]
    scale = dist.mean(-1, keepdim=True).clamp_min(1e-8) if tau is None else tau
    w = torch.softmax(-dist / scale, dim=-1)  # [N, k]
    return torch.einsum("nk,nkd->nd", w, anchors.float()[idx]).to(queries.dtype)


@dataclass
class AnchorBank:
    """Layer-l retain anchors ``H_r`` ``[M, d]``, their mean norm, and an optional PCA basis."""

    anchors: torch.Tensor
    layer: int
    mean: torch.Tensor
    basis: torch.Tensor | None = None  # [d, r], orthonormal columns
    mean_norm: float = 1.0

    @classmethod
    @torch.no_grad()
    def build(
        cls,
        ref_model: nn.Module,
        batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
        layer: int,
        max_anchors: int = 20000,
        pca_rank: int | None = None,
        seed: int = 0,
    ) -> AnchorBank:
        """Run ``ref_model`` on retain ``(input_ids, attention_mask)`` batches and keep layer-l
        states of the real tokens (a seeded subsample when there are more than ``max_anchors``)."""
        states = []
        was_training = ref_model.training
        ref_model.eval()
        for ids, mask in batches:
            with capture_layers(ref_model, [layer]) as store:
                ref_model(input_ids=ids, attention_mask=mask)
            states.append(store[layer][mask.bool()].float().cpu())
        ref_model.train(was_training)
        if not states or sum(s.shape[0] for s in states) == 0:
            raise UnlearnError("retain set is empty: RA^2 needs retain tokens for its anchors")
        h = torch.cat(states)
        h = torch.unique(h, dim=0)  # shared prefixes repeat exactly; one copy each suffices
        if h.shape[0] > max_anchors:
            g = torch.Generator().manual_seed(seed)
            h = h[torch.randperm(h.shape[0], generator=g)[:max_anchors]]
        mean = h.mean(0)
        basis = None
        if pca_rank is not None:
            r = min(pca_rank, h.shape[1], h.shape[0])
            _, _, v = torch.linalg.svd(h - mean, full_matrices=False)
            basis = v[:r].T.contiguous()
        return cls(h, layer, mean, basis, float(h.norm(dim=-1).mean()))

    def to(self, device: torch.device | str) -> AnchorBank:
        self.anchors = self.anchors.to(device)
        self.mean = self.mean.to(device)
        if self.basis is not None:
            self.basis = self.basis.to(device)
        return self

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """PCA coordinates ``(x - mean) @ basis`` (the identity without a basis)."""
        if self.basis is None:
            return x
        return (x.float() - self.mean) @ self.basis

    @torch.no_grad()
    def targets(
        self, ref_states: torch.Tensor, k: int, tau: float | None, mode: str = "knn"
    ) -> torch.Tensor:
        """Targets ``t_f`` ``[N, d]`` for reference states ``h_f`` ``[N, d]``.

        ``knn``: :func:`knn_targets` (neighbours found in PCA coordinates when a basis exists).
        ``pca``: ``t_f = mean + P P^T (h_f - mean)``, rescaled to the mean anchor norm: the
        part of h_f the retain subspace supports, at a retain-typical norm.
        """
        if mode == "pca":
            if self.basis is None:
                raise UnlearnError("target 'pca' needs an anchor bank built with pca_rank")
            proj = self.mean + self.project(ref_states) @ self.basis.T
            norm = proj.norm(dim=-1, keepdim=True).clamp_min(1e-8)
            return (proj * (self.mean_norm / norm)).to(ref_states.dtype)
        keys = self.project(self.anchors) if self.basis is not None else None
        qk = self.project(ref_states) if self.basis is not None else None
        return knn_targets(ref_states, self.anchors, k, tau, keys, qk)
