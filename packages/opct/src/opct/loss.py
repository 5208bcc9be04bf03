"""The OPCT objective: per-token divergence between the model on the wrapped prompt and the
frozen model on the clean prompt, over the model's own response to the wrapped prompt.

For a contrastive pair (x̃ wrapped or cued, x clean), OPCT samples a response from the model
being trained and minimises

    L(θ) = E_{y ~ π_θ(·|x̃)} [ (1/|y|) Σ_t D( π_θ(·|x̃, y_<t) ‖ π_θ₀(·|x, y_<t) ) ]

where π_θ₀ is the frozen initial model (the teacher, under stop-gradient) and D a divergence
between next-token distributions. Symbols to arguments of :func:`consistency_divergence`:
``student_logits`` are the logits of π_θ(·|x̃, y_<t) at every response position t,
``teacher_logits`` those of π_θ₀(·|x, y_<t) at the same positions (the same response tokens
y, behind a different prompt), ``mask`` marks the response tokens (padding after EOS is
excluded), ``divergence`` picks D:

- ``"reverse"``: KL(p ‖ q) = Σ_v p_v (log p_v − log q_v), p the student, q the teacher. Mode
  seeking; the default, as in on-policy distillation (and the research notes).
- ``"forward"``: KL(q ‖ p). Mass covering.
- ``"jsd"``: the generalised Jensen-Shannon divergence
  ``λ KL(q ‖ m) + (1 − λ) KL(p ‖ m)`` with ``m = λ q + (1 − λ) p`` and ``λ = jsd_mix``
  (0.5: the symmetric JSD, bounded by log 2).

The divergence is computed over the full vocabulary, or (``top_k``) over the K most likely
tokens of the distribution that weights it (the student's for reverse KL and JSD, the
teacher's for forward KL) plus, with ``tail=True``, one bucket holding the rest of each
distribution's mass, so the K+1 categories are proper distributions and the result is a lower
bound of the full divergence (the log-sum inequality) that is exact when K covers the
vocabulary. Without the tail the top-K slice of each distribution is renormalised.

Only the student gets a gradient: the teacher logits are detached here, whatever the caller
passed. Temperature divides both logits before the softmax (the sampling temperature).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

from opct.errors import OPCTError

__all__ = ["DIVERGENCES", "Divergence", "consistency_divergence", "token_divergence"]

Divergence = Literal["reverse", "forward", "jsd"]
DIVERGENCES: tuple[str, ...] = ("reverse", "forward", "jsd")
Reduction = Literal["mean", "sum", "none"]


def _kl(log_a: torch.Tensor, log_b: torch.Tensor) -> torch.Tensor:
    """KL(a ‖ b) over the last axis from log-probabilities (0·log 0 taken as 0)."""
    a = log_a.exp()
    return torch.where(a > 0, a * (log_a - log_b), torch.zeros_like(a)).sum(-1)


def _with_tail(log_probs: torch.Tensor) -> torch.Tensor:
    """Append log(1 − Σ p) to a top-K slice of log-probabilities (the tail bucket)."""
    captured = torch.logsumexp(log_probs, dim=-1, keepdim=True).clamp(max=-1e-7)
    return torch.cat([log_probs, torch.log(-torch.expm1(captured))], dim=-1)


def token_divergence(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    *,
    divergence: Divergence = "reverse",
    top_k: int | None = None,
    tail: bool = True,
    temperature: float = 1.0,
    jsd_mix: float = 0.5,
) -> torch.Tensor:
    """D at every position: ``[..., V]`` logits in, ``[...]`` divergences out (see the
    module docstring for the equation and each argument)."""
    if student_logits.shape != teacher_logits.shape:
        raise OPCTError(
            f"student logits {tuple(student_logits.shape)} and teacher logits "
            f"{tuple(teacher_logits.shape)} differ: student and teacher need one vocabulary"
        )
    if divergence not in DIVERGENCES:
        raise OPCTError(f"divergence={divergence!r}: must be one of {', '.join(DIVERGENCES)}")
    if not temperature > 0:
        raise OPCTError(f"temperature={temperature!r}: must be > 0")
    if not 0.0 < jsd_mix < 1.0:
        raise OPCTError(f"jsd_mix={jsd_mix!r}: must be in (0, 1)")
    vocab = student_logits.size(-1)
    if top_k is not None and not 1 <= top_k <= vocab:
        raise OPCTError(f"top_k={top_k}: must be in 1..{vocab} (the vocabulary)")
    log_p = F.log_softmax(student_logits.float() / temperature, dim=-1)
    log_q = F.log_softmax(teacher_logits.detach().float() / temperature, dim=-1)
    if top_k is not None and top_k < vocab:
        weighting = log_q if divergence == "forward" else log_p
        index = weighting.detach().topk(top_k, dim=-1).indices
        log_p, log_q = log_p.gather(-1, index), log_q.gather(-1, index)
        if tail:
            log_p, log_q = _with_tail(log_p), _with_tail(log_q)
        else:
            log_p = log_p - torch.logsumexp(log_p, dim=-1, keepdim=True)
            log_q = log_q - torch.logsumexp(log_q, dim=-1, keepdim=True)
    if divergence == "reverse":
        return _kl(log_p, log_q)
    if divergence == "forward":
        return _kl(log_q, log_p)
    lam = torch.tensor(jsd_mix, dtype=log_p.dtype, device=log_p.device)
    log_m = torch.logsumexp(torch.stack([log_q + lam.log(), log_p + torch.log1p(-lam)]), dim=0)
    return jsd_mix * _kl(log_q, log_m) + (1.0 - jsd_mix) * _kl(log_p, log_m)


def consistency_divergence(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    divergence: Divergence = "reverse",
    top_k: int | None = None,
    tail: bool = True,
    temperature: float = 1.0,
    jsd_mix: float = 0.5,
    reduction: Reduction = "mean",
    num_tokens: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """The OPCT loss: :func:`token_divergence` over the response tokens (``mask``), reduced.

    ``reduction="mean"`` divides the sum by ``num_tokens`` when given (the token count of the
    whole, possibly distributed, batch, so gradient accumulation and DDP average correctly),
    else by the number of masked tokens here (at least 1: an empty mask gives 0, not NaN).
    ``"sum"`` and ``"none"`` (per-position values, zero outside the mask) are for callers that
    reduce themselves.
    """
    per_token = token_divergence(
        student_logits,
        teacher_logits,
        divergence=divergence,
        top_k=top_k,
        tail=tail,
        temperature=temperature,
        jsd_mix=jsd_mix,
    )
    if mask is not None:
        if mask.shape != per_token.shape:
            raise OPCTError(
                f"mask {tuple(mask.shape)} does not match the logits' positions "
                f"{tuple(per_token.shape)}"
            )
        per_token = per_token * mask.to(per_token.dtype)
    if reduction == "none":
        return per_token
    total = per_token.sum()
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise OPCTError(f"reduction={reduction!r}: must be 'mean', 'sum' or 'none'")
    if num_tokens is None:
        count = mask.sum() if mask is not None else torch.tensor(float(per_token.numel()))
        return total / count.to(total.dtype).clamp(min=1.0)
    denom = torch.as_tensor(num_tokens, dtype=total.dtype, device=total.device)
    return total / denom.clamp(min=1.0)
