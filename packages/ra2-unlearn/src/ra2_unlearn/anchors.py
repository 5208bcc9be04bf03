"""RA^2's core: retain anchors at layer l that do not carry the forgotten answer, and the
targets built from them.

The frozen reference model theta_0 is run on retain data once. Every real retain token gives
an anchor: its layer-l state ``H_r[j]`` and what it *supports*, ``s_j``, the frozen model's
next-token prediction at that position (``argmax p_theta0(. | x_<=j)``). A forget position
``t`` whose frozen prediction is the forgotten token ``y_t`` (the position *carries* the
forgotten content) gets the target

``t_f = sum_{j in kNN(h_f; s_j != y_t)} softmax_j(-||h_f - H_r[j]||^2 / tau) * H_r[j]``

over its k nearest anchors *that do not support* ``y_t``. Why the exclusion is the step that
matters: by layer l a forget state is organised by the value it is about to recall, and the
retain set holds the same relation for other entities, so without it a large share of a
forget state's nearest anchors predict the very same answer (measured on the toy world: 41%
of the 8 nearest, chance about 10%) and attraction toward their blend keeps the fact (forget
accuracy 0.90 after patching the targets straight into the frozen model). Positions that do
not carry the content, and exact twins of a retain state (a shared prompt prefix), get no
target: the retain loss keeps them where they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from ra2_unlearn.errors import UnlearnError
from ra2_unlearn.modules import capture_layers

__all__ = ["AnchorBank", "carrying_positions", "knn_targets"]

#: A forget state closer than this (relative squared distance) to an anchor is its exact twin.
TWIN_TOLERANCE = 1e-8


def knn_targets(
    queries: torch.Tensor,
    anchors: torch.Tensor,
    k: int,
    tau: float | None = None,
    keys: torch.Tensor | None = None,
    query_keys: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """Kernel-weighted mean of each query's k nearest (allowed) anchors.

    ``t_f = sum_{j in kNN(h_f)} softmax_j(-||h_f - H_r[j]||^2 / tau) * H_r[j]``

    ``queries`` ``[N, d]`` are the reference states ``h_f``; ``anchors`` ``[M, d]`` are ``H_r``.
    Distances are measured between ``query_keys`` and ``keys`` when given (the PCA coordinates
    of both) and default to the raw vectors. ``allowed`` ``[N, M]`` (bool) restricts each
    query's neighbours (RA^2: anchors that do not support the forgotten token). ``tau=None``
    uses, per query, the mean of its k squared distances, so the kernel is neither one-hot nor
    uniform at any activation scale. It is not sharp: an anchor at distance 0 among k - 1 at
    distance 1 gets weight ``1 / (1 + (k-1) exp(-k/(k-1)))``, about 0.31 for k = 8, so exact
    twins are not left to the kernel (RA^2 leaves them out, see :meth:`AnchorBank.twins`).
    """
    if anchors.shape[0] == 0:
        raise UnlearnError("anchor bank is empty (the retain set produced no tokens)")
    keys = anchors if keys is None else keys
    query_keys = queries if query_keys is None else query_keys
    d2 = torch.cdist(query_keys.float(), keys.float()).pow(2)  # [N, M]
    if allowed is not None:
        if not bool(allowed.any(-1).all()):
            raise UnlearnError("every anchor supports the forgotten token: no target exists")
        d2 = d2.masked_fill(~allowed, float("inf"))
    k = min(k, anchors.shape[0])
    dist, idx = d2.topk(k, dim=-1, largest=False)  # [N, k]
    finite = torch.isfinite(dist)
    safe = torch.where(finite, dist, torch.zeros_like(dist))
    count = finite.sum(-1, keepdim=True).clamp_min(1)
    mean = safe.sum(-1, keepdim=True) / count
    scale = mean.clamp_min(1e-8) if tau is None else torch.full_like(mean, float(tau))
    logits = torch.where(finite, -safe / scale, torch.full_like(safe, float("-inf")))
    w = torch.softmax(logits, dim=-1)  # [N, k]
    return torch.einsum("nk,nkd->nd", w, anchors.float()[idx]).to(queries.dtype)


def carrying_positions(
    ref_logits: torch.Tensor, labels: torch.Tensor, stop_ids: Iterable[int] = ()
) -> torch.Tensor:
    """Positions that carry the forgotten content: ``[B, T]`` bool.

    Position ``t`` carries it when the next token ``labels[t+1]`` is a target (not -100, not
    one of ``stop_ids`` such as EOS: ending the answer is not the fact) and the frozen model
    predicts it there (``argmax ref_logits[t] == labels[t+1]``): the states from which the
    model recalls the answer.
    """
    nxt = labels[:, 1:]
    pred = ref_logits[:, :-1].argmax(-1)
    carry = (nxt != -100) & (pred == nxt)
    for stop in stop_ids:
        carry &= nxt != stop
    out = torch.zeros_like(labels, dtype=torch.bool)
    out[:, :-1] = carry
    return out


@dataclass
class AnchorBank:
    """Layer-l retain anchors ``H_r`` ``[M, d]``, what each supports (the frozen model's next
    token there, ``support`` ``[M]``), their mean and mean norm, and an optional PCA basis."""

    anchors: torch.Tensor
    layer: int
    mean: torch.Tensor
    basis: torch.Tensor | None = None  # [d, r], orthonormal columns
    mean_norm: float = 1.0
    support: torch.Tensor | None = None  # [M] long: argmax p_theta0 at the anchor's position

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
        """Run ``ref_model`` on retain ``(input_ids, attention_mask)`` batches and keep the
        layer-l states of the real tokens with the token the model predicts after each (a
        seeded subsample when there are more than ``max_anchors``)."""
        states, supports = [], []
        was_training = ref_model.training
        ref_model.eval()
        for ids, mask in batches:
            with capture_layers(ref_model, [layer]) as store:
                out = ref_model(input_ids=ids, attention_mask=mask)
            real = mask.bool()
            states.append(store[layer][real].float().cpu())
            supports.append(out.logits.argmax(-1)[real].cpu())
        ref_model.train(was_training)
        if not states or sum(s.shape[0] for s in states) == 0:
            raise UnlearnError("retain set is empty: RA^2 needs retain tokens for its anchors")
        h, s = torch.cat(states), torch.cat(supports)
        # Shared prefixes repeat exactly (same state, same prediction): one copy each suffices.
        h, inverse = torch.unique(h, dim=0, return_inverse=True)
        support = torch.empty(h.shape[0], dtype=torch.long).scatter_(0, inverse, s)
        if h.shape[0] > max_anchors:
            g = torch.Generator().manual_seed(seed)
            keep = torch.randperm(h.shape[0], generator=g)[:max_anchors]
            h, support = h[keep], support[keep]
        mean = h.mean(0)
        basis = None
        if pca_rank is not None:
            r = min(pca_rank, h.shape[1], h.shape[0])
            _, _, v = torch.linalg.svd(h - mean, full_matrices=False)
            basis = v[:r].T.contiguous()
        return cls(h, layer, mean, basis, float(h.norm(dim=-1).mean()), support)

    def to(self, device: torch.device | str) -> AnchorBank:
        self.anchors = self.anchors.to(device)
        self.mean = self.mean.to(device)
        if self.basis is not None:
            self.basis = self.basis.to(device)
        if self.support is not None:
            self.support = self.support.to(device)
        return self

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """PCA coordinates ``(x - mean) @ basis`` (the identity without a basis)."""
        if self.basis is None:
            return x
        return (x.float() - self.mean) @ self.basis

    def twins(self, ref_states: torch.Tensor) -> torch.Tensor:
        """``[N]`` bool: states that equal an anchor (up to rounding), e.g. a shared prefix."""
        d2 = torch.cdist(ref_states.float(), self.anchors.float()).pow(2).min(-1).values
        scale = ref_states.float().pow(2).sum(-1).clamp_min(1e-12)
        return d2 <= TWIN_TOLERANCE * scale

    @torch.no_grad()
    def targets(
        self,
        ref_states: torch.Tensor,
        k: int,
        tau: float | None,
        mode: str = "knn",
        exclude: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Targets ``t_f`` ``[N, d]`` for reference states ``h_f`` ``[N, d]``.

        ``exclude`` ``[N]`` (token ids): each query's neighbours are only anchors whose
        ``support`` differs from its entry (RA^2's "anchors that do not carry the answer").
        ``knn``: :func:`knn_targets` (neighbours found in PCA coordinates when a basis exists).
        ``pca``: ``t_f = mean + P P^T (h_f - mean)``, rescaled to the mean anchor norm: the
        part of h_f the retain subspace supports, at a retain-typical norm (no exclusion).
        """
        if mode == "pca":
            if self.basis is None:
                raise UnlearnError("target 'pca' needs an anchor bank built with pca_rank")
            proj = self.mean + self.project(ref_states) @ self.basis.T
            norm = proj.norm(dim=-1, keepdim=True).clamp_min(1e-8)
            return (proj * (self.mean_norm / norm)).to(ref_states.dtype)
        allowed = None
        if exclude is not None:
            if self.support is None:
                raise UnlearnError("this anchor bank stores no support: rebuild it with build()")
            allowed = self.support[None, :] != exclude.to(self.support)[:, None]
        keys = self.project(self.anchors) if self.basis is not None else None
        qk = self.project(ref_states) if self.basis is not None else None
        return knn_targets(ref_states, self.anchors, k, tau, keys, qk, allowed)
