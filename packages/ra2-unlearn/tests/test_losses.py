"""The pure loss functions, each checked against its equation on hand-made tensors."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from ra2_unlearn import losses


def _logits_for(labels: torch.Tensor, vocab: int = 5, confident: float = 3.0) -> torch.Tensor:
    b, t = labels.shape
    logits = torch.zeros(b, t, vocab)
    nxt = labels[:, 1:].clamp_min(0)
    logits[:, :-1].scatter_(-1, nxt[..., None], confident)
    return logits


def test_sequence_nll_counts_only_labelled_tokens():
    labels = torch.tensor([[-100, 1, 2, -100], [-100, -100, 3, 4]])
    logits = torch.zeros(2, 4, 5)  # uniform: every labelled token costs log 5
    nll, count = losses.sequence_nll(logits, labels)
    assert count.tolist() == [2, 2]
    assert torch.allclose(nll, torch.full((2,), 2 * math.log(5)))


def test_gradient_ascent_is_negative_nll_and_graddiff_adds_retain():
    nll, n = torch.tensor([2.0, 4.0]), torch.tensor([1, 3])
    assert losses.ga_loss(nll, n).item() == -1.5
    r, rn = torch.tensor([1.0]), torch.tensor([2])
    assert losses.graddiff_loss(nll, n, r, rn, alpha=2.0).item() == -1.5 + 2 * 0.5


def test_npo_matches_its_equation_and_is_log2_scaled_at_the_reference():
    nll = torch.tensor([3.0, 1.0])
    ref = torch.tensor([2.0, 2.0])
    beta = 0.5
    expected = -(2 / beta) * F.logsigmoid(-beta * (ref - nll)).mean()
    assert torch.allclose(losses.npo_loss(nll, ref, beta), expected)
    # At theta = theta_ref the loss is (2/beta) log 2.
    assert math.isclose(
        losses.npo_loss(ref, ref, beta).item(), 2 / beta * math.log(2), rel_tol=1e-6
    )


def test_simnpo_uses_length_normalised_nll_and_falls_as_forget_nll_grows():
    n = torch.tensor([4, 4])
    low = losses.simnpo_loss(torch.tensor([4.0, 4.0]), n, beta=2.0, delta=0.0)
    high = losses.simnpo_loss(torch.tensor([40.0, 40.0]), n, beta=2.0, delta=0.0)
    assert math.isclose(
        low.item(), -(2 / 2.0) * F.logsigmoid(torch.tensor(2.0)).item(), rel_tol=1e-6
    )
    assert high < low


def test_masked_mse_ignores_masked_positions():
    a = torch.zeros(1, 3, 2)
    b = torch.tensor([[[1.0, 1.0], [2.0, 2.0], [100.0, 100.0]]])
    mask = torch.tensor([[True, True, False]])
    assert losses.masked_mse(a, b, mask).item() == (1 + 4) / 2


def test_rmu_loss_is_zero_at_the_control_vector_with_matched_retain():
    control = torch.tensor([3.0, 4.0])
    hf = control.expand(2, 3, 2).clone()
    hr = torch.randn(2, 3, 2)
    mask = torch.ones(2, 3, dtype=torch.bool)
    assert losses.rmu_loss(hf, mask, control, hr, hr, mask, alpha=10.0).item() == 0.0
    assert losses.rmu_loss(hf, mask, control, hr + 1, hr, mask, alpha=10.0).item() == 10.0


def test_ra2_forget_loss_stops_gradient_at_the_target():
    h = torch.randn(1, 2, 3, requires_grad=True)
    t = torch.randn(1, 2, 3, requires_grad=True)
    loss = losses.ra2_forget_loss(h, t, torch.ones(1, 2, dtype=torch.bool))
    loss.backward()
    assert h.grad is not None
    assert t.grad is None


def test_ra2_retain_loss_sums_layers_and_adds_kl_only_when_asked():
    mask = torch.ones(1, 2, dtype=torch.bool)
    h0 = [torch.zeros(1, 2, 3), torch.zeros(1, 2, 3)]
    h = [torch.ones(1, 2, 3), 2 * torch.ones(1, 2, 3)]
    assert losses.ra2_retain_loss(h, h0, mask).item() == 1 + 4
    logits = torch.randn(1, 2, 7)
    same = losses.ra2_retain_loss(h0, h0, mask, logits, logits, kl_weight=1.0)
    assert abs(same.item()) < 1e-6
    other = losses.ra2_retain_loss(h0, h0, mask, logits, torch.randn(1, 2, 7), kl_weight=1.0)
    assert other.item() > 0
