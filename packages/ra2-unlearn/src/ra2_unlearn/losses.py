"""Every method's loss as a pure PyTorch function of tensors (unit-tested on its own).

The trainer only gathers hidden states and logits and calls these. Shapes: ``B`` sequences,
``T`` positions, ``d`` hidden size, ``V`` vocabulary; ``mask`` is a bool ``[B, T]`` of the
positions that count; ``labels`` uses -100 for positions without a target.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

__all__ = [
    "ga_loss",
    "graddiff_loss",
    "masked_mse",
    "npo_loss",
    "ra2_forget_loss",
    "ra2_retain_loss",
    "rmu_loss",
    "sequence_nll",
    "simnpo_loss",
]


def sequence_nll(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence summed NLL of the labelled tokens and their count: ``([B], [B])``.

    ``NLL(y|x) = -sum_t log p(y_t | x, y_<t)``; logits at position t predict labels at t+1.
    """
    shift_logits = logits[:, :-1].float()
    shift_labels = labels[:, 1:]
    valid = shift_labels != -100
    tok = F.cross_entropy(
        shift_logits.reshape(-1, shift_logits.shape[-1]),
        shift_labels.clamp_min(0).reshape(-1),
        reduction="none",
    ).view_as(shift_labels)
    tok = tok * valid
    return tok.sum(-1), valid.sum(-1)


def _mean_token_nll(nll: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    return nll.sum() / count.sum().clamp_min(1)


def ga_loss(forget_nll: torch.Tensor, forget_count: torch.Tensor) -> torch.Tensor:
    """Gradient ascent: ``L = -NLL_f`` (mean over forget tokens), i.e. maximise forget loss."""
    return -_mean_token_nll(forget_nll, forget_count)


def graddiff_loss(
    forget_nll: torch.Tensor,
    forget_count: torch.Tensor,
    retain_nll: torch.Tensor,
    retain_count: torch.Tensor,
    alpha: float,
) -> torch.Tensor:
    """Gradient difference: ``L = -NLL_f + alpha * NLL_r`` (token means)."""
    return ga_loss(forget_nll, forget_count) + alpha * _mean_token_nll(retain_nll, retain_count)


def npo_loss(
    forget_nll: torch.Tensor,
    ref_forget_nll: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """NPO (Zhang et al. 2024): ``L = -(2/beta) * mean log sigmoid(-beta * log(pi/pi_ref))``.

    ``log pi_theta(y|x) = -forget_nll`` (summed over the answer), same for the frozen
    reference. The retain term (open-unlearning adds ``alpha * NLL_r``) is added by the caller.
    """
    log_ratio = ref_forget_nll.detach() - forget_nll  # log pi_theta - log pi_ref
    return -(2.0 / beta) * F.logsigmoid(-beta * log_ratio).mean()


def simnpo_loss(
    forget_nll: torch.Tensor,
    forget_count: torch.Tensor,
    beta: float,
    delta: float,
) -> torch.Tensor:
    """SimNPO (Fan et al. 2024): ``L = -(2/beta) * mean log sigmoid(beta * (NLL/|y| - delta))``.

    Reference-free NPO with a length-normalised log-likelihood (open-unlearning's form).
    """
    per_token = forget_nll / forget_count.clamp_min(1)
    return -(2.0 / beta) * F.logsigmoid(beta * (per_token - delta)).mean()


def masked_mse(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the masked positions of the per-position mean squared difference over ``d``.

    This is ``torch.nn.functional.mse_loss`` (what the WMDP code uses) restricted to real
    tokens: padding would otherwise pull the loss toward whatever pads map to.
    """
    per_pos = (a.float() - b.float()).pow(2).mean(-1)
    m = mask.to(per_pos.dtype)
    return (per_pos * m).sum() / m.sum().clamp_min(1)


def rmu_loss(
    forget_hidden: torch.Tensor,
    forget_mask: torch.Tensor,
    control: torch.Tensor,
    retain_hidden: torch.Tensor,
    ref_retain_hidden: torch.Tensor,
    retain_mask: torch.Tensor,
    alpha: float,
) -> torch.Tensor:
    """RMU (Li et al. 2024, WMDP): the forget state goes to a fixed random vector, the retain
    state stays put, both at the single layer l:

    ``L = ||h_l(x_f) - c*u||^2 + alpha * ||h_l(x_r) - h_l^ref(x_r)||^2``.

    ``control`` is ``c*u`` ([d]): a fixed random unit vector ``u`` scaled by the steering
    coefficient ``c``; both terms are MSEs at the single layer l.
    """
    target = control.to(forget_hidden).expand_as(forget_hidden)
    forget = masked_mse(forget_hidden, target, forget_mask)
    retain = masked_mse(retain_hidden, ref_retain_hidden.detach(), retain_mask)
    return forget + alpha * retain


def ra2_forget_loss(
    forget_hidden: torch.Tensor, targets: torch.Tensor, forget_mask: torch.Tensor
) -> torch.Tensor:
    """RA^2 forget loss: ``L_f = mean_f ||h_l^theta(x_f) - sg(t_f)||^2`` over forget tokens.

    ``targets`` ``[B, T, d]`` are the retain-anchored targets (see :mod:`ra2_unlearn.anchors`),
    detached here (the stop-gradient ``sg``); the squared distance is averaged over ``d`` like
    RMU's MSE so the two methods' ``alpha`` live on the same scale.
    """
    return masked_mse(forget_hidden, targets.detach(), forget_mask)


def ra2_retain_loss(
    retain_hidden: Sequence[torch.Tensor],
    ref_retain_hidden: Sequence[torch.Tensor],
    retain_mask: torch.Tensor,
    retain_logits: torch.Tensor | None = None,
    ref_retain_logits: torch.Tensor | None = None,
    kl_weight: float = 0.0,
) -> torch.Tensor:
    """RA^2 retain loss: ``L_r = sum_{l' >= l} ||h_l'^theta(x_r) - h_l'^ref(x_r)||^2
    (+ kl_weight * KL(p_ref || p_theta) on retain logits)``.

    Matching every layer from l up (not only l, as RMU does) is how RA^2 "holds higher-layer
    behaviour on retain data"; the KL term is the abstract's optional logit anchor.
    """
    loss = retain_mask.new_zeros((), dtype=torch.float32)
    for h, h0 in zip(retain_hidden, ref_retain_hidden, strict=True):
        loss = loss + masked_mse(h, h0.detach(), retain_mask)
    if kl_weight > 0:
        if retain_logits is None or ref_retain_logits is None:
            raise ValueError("retain KL needs both the model's and the reference's logits")
        logp = F.log_softmax(retain_logits.float(), -1)
        logq = F.log_softmax(ref_retain_logits.detach().float(), -1)
        kl = (logq.exp() * (logq - logp)).sum(-1)  # KL(p_ref || p_theta) per position
        m = retain_mask.to(kl.dtype)
        loss = loss + kl_weight * (kl * m).sum() / m.sum().clamp_min(1)
    return loss
