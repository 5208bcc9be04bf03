"""RA^2's targets: kernel-weighted nearest retain anchors, and the PCA variant."""

from __future__ import annotations

import pytest
import torch
from ra2_unlearn.anchors import AnchorBank, knn_targets
from ra2_unlearn.errors import UnlearnError


def test_query_on_an_anchor_with_a_sharp_kernel_targets_that_anchor():
    anchors = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    t = knn_targets(anchors[1:2], anchors, k=3, tau=1e-3)
    assert torch.allclose(t, anchors[1:2])


def test_target_is_a_convex_combination_of_the_k_nearest_only():
    anchors = torch.tensor([[0.0, 0.0], [1.0, 0.0], [100.0, 100.0]])
    t = knn_targets(torch.tensor([[0.4, 0.0]]), anchors, k=2)
    assert 0.0 <= t[0, 0] <= 1.0
    assert t[0, 1] == 0.0


def test_k_larger_than_the_bank_is_clipped_and_empty_bank_is_refused():
    anchors = torch.randn(3, 4)
    assert knn_targets(torch.randn(5, 4), anchors, k=10).shape == (5, 4)
    with pytest.raises(UnlearnError, match="empty"):
        knn_targets(torch.randn(5, 4), torch.zeros(0, 4), k=2)


def test_pca_target_lies_in_the_retain_subspace_at_the_retain_norm():
    g = torch.Generator().manual_seed(0)
    basis = torch.linalg.qr(torch.randn(6, 2, generator=g))[0]
    h = torch.randn(50, 2, generator=g) @ basis.T  # retain data in a 2-d subspace
    bank = AnchorBank(h, layer=0, mean=h.mean(0))
    _, _, v = torch.linalg.svd(h - bank.mean, full_matrices=False)
    bank.basis, bank.mean_norm = v[:2].T, float(h.norm(dim=-1).mean())
    t = bank.targets(torch.randn(4, 6, generator=g), k=4, tau=None, mode="pca")
    assert torch.allclose(t.norm(dim=-1), torch.full((4,), bank.mean_norm), atol=1e-4)
    # Before the rescaling the target is mean + P P^T (h - mean): its direction is kept.
    proj = bank.mean + ((torch.randn(1, 6) - bank.mean) @ bank.basis) @ bank.basis.T
    assert torch.allclose(
        (proj - bank.mean) @ bank.basis @ bank.basis.T, proj - bank.mean, atol=1e-5
    )


def test_bank_from_a_model_keeps_real_token_states(micro, splits):
    from ra2_unlearn.config import UnlearnConfig
    from ra2_unlearn.trainer import build_anchor_bank

    model, tok = micro
    bank = build_anchor_bank(model, tok, splits.retain, UnlearnConfig(layer=1, pca_rank=4))
    assert bank.anchors.shape[1] == model.config.hidden_size
    assert bank.basis is not None
    assert bank.basis.shape == (model.config.hidden_size, 4)
    t = bank.targets(bank.anchors[:3], k=4, tau=None)
    assert t.shape == (3, model.config.hidden_size)
