"""MOSA's regulariser: the KL between mean order-statistic profiles, in pure PyTorch.

For every completion token ``t`` the policy's next-token distribution ``p_t`` is sorted in
descending order; averaging the sorted vectors over the ``N`` tokens of a batch gives the
*mean order-statistic profile*, a distribution over ranks:

    P̄(r) = (1/N) Σ_t p_t^{(r)},   r = 1..K,     P̄(K+1) = (1/N) Σ_t (1 - Σ_{r≤K} p_t^{(r)})

(top-K ranks plus one tail bucket for the rest of the vocabulary). The base model's profile
``Q̄`` is the same average of ``q_t`` on the same tokens. MOSA adds ``β_M · KL(P̄ ‖ Q̄)`` to the
RL loss. The profile forgets *which* token ranks first, so RL may still change the argmax;
it holds only the *shape* of the policy's confidence near the base's, which is what
collapses (and pass@K with it) when RL sharpens every distribution.

Gradients flow through the ``K`` selected probabilities (``torch.topk`` routes them back to
the chosen entries only) and, through the tail ``1 - Σ top-K``, again into those entries.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch.utils.checkpoint import checkpoint

from mosa_rl.errors import MosaError

__all__ = [
    "Direction",
    "check_top_k",
    "mosa_loss",
    "order_statistic_profile",
    "pooled_profile",
    "profile_kl",
    "profile_sums",
    "profile_sums_from_hidden",
    "sorted_probs",
]

Direction = Literal["reverse", "forward"]
_DIRECTIONS = ("reverse", "forward")


def check_top_k(k: int, vocab_size: int) -> int:
    """``k`` as an int in ``1..vocab_size``, else a :class:`MosaError` naming both."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise MosaError(f"top_k={k!r}: must be a positive integer")
    if k > vocab_size:
        raise MosaError(f"top_k={k}: larger than the vocabulary ({vocab_size} tokens)")
    return k


def _check_mask(mask: torch.Tensor, shape: torch.Size, what: str = "mask") -> torch.Tensor:
    if mask.shape != shape:
        raise MosaError(
            f"{what}: shape {tuple(mask.shape)} does not match the tokens {tuple(shape)}"
        )
    mask = mask.bool()
    if not bool(mask.any()):
        raise MosaError(f"{what}: no valid completion tokens (every position is masked out)")
    return mask


def sorted_probs(probs: torch.Tensor, k: int) -> torch.Tensor:
    """``[..., V]`` probabilities -> ``[..., K+1]``: the top-K in descending order, then the tail.

    ``p^{(r)}`` for ``r = 1..K`` is ``torch.topk``; the bucket is ``1 - Σ_{r≤K} p^{(r)}``,
    clamped at 0 against rounding (it is exactly 0 when ``K = V``).
    """
    check_top_k(k, probs.shape[-1])
    top = probs.topk(k, dim=-1, sorted=True).values
    tail = (1.0 - top.sum(-1, keepdim=True)).clamp_min(0.0)
    return torch.cat([top, tail], dim=-1)


def profile_sums(
    probs: torch.Tensor, mask: torch.Tensor, k: int, *, logits: bool = False
) -> torch.Tensor:
    """Per-sequence sums of the sorted profile, ``[B, K+1]``, over the masked tokens.

    ``probs`` is ``[B, T, V]`` (probabilities, or logits with ``logits=True``), ``mask``
    ``[B, T]``. Only masked positions are sorted. Sums (not means) let a trainer split a
    batch into micro-batches and still pool exactly: ``P̄ = Σ_b sums_b / Σ_b |mask_b|``.
    """
    mask = _check_mask(mask, probs.shape[:-1])
    check_top_k(k, probs.shape[-1])
    rows = probs[mask]
    if logits:
        rows = rows.float().softmax(-1)
    sorted_rows = sorted_probs(rows, k)
    seq = mask.nonzero(as_tuple=True)[0]
    out = sorted_rows.new_zeros(probs.shape[0], k + 1)
    return out.index_add(0, seq, sorted_rows)


def order_statistic_profile(
    logits: torch.Tensor, mask: torch.Tensor, k: int, temperature: float = 1.0
) -> torch.Tensor:
    """The mean order-statistic profile ``P̄ ∈ Δ^{K}`` (``K+1`` ranks) of ``logits [B, T, V]``.

    ``P̄(r) = (1/N) Σ_{t: mask_t} softmax(z_t / τ)^{(r)}`` with ``N = Σ mask`` (rank ``K+1``
    is the tail bucket); ``τ = temperature`` is the sampling temperature, so the profile is
    that of the distribution the completions were drawn from.
    """
    sums = profile_sums(logits / temperature, mask, k, logits=True)
    return sums.sum(0) / mask.bool().sum()


def profile_kl(
    p: torch.Tensor, q: torch.Tensor, direction: Direction = "reverse", eps: float = 1e-10
) -> torch.Tensor:
    """``KL(P̄ ‖ Q̄) = Σ_r P̄(r) log(P̄(r)/Q̄(r))`` (``"reverse"``, the policy's profile first)
    or ``KL(Q̄ ‖ P̄)`` (``"forward"``). The second argument is floored at ``eps`` so an empty
    bucket of the reference (a tail of exactly 0) cannot give an infinite loss; ``0 log 0 = 0``.
    """
    if direction not in _DIRECTIONS:
        raise MosaError(f"direction={direction!r}: must be one of {', '.join(_DIRECTIONS)}")
    if p.shape != q.shape:
        raise MosaError(f"profiles: shapes {tuple(p.shape)} and {tuple(q.shape)} differ")
    a, b = (p, q) if direction == "reverse" else (q, p)
    return (torch.xlogy(a, a) - a * torch.log(b.clamp_min(eps))).sum(-1)


def mosa_loss(
    policy_logits: torch.Tensor,
    ref_logits: torch.Tensor,
    mask: torch.Tensor,
    k: int,
    direction: Direction = "reverse",
    temperature: float = 1.0,
) -> torch.Tensor:
    """The MOSA term ``KL(P̄ ‖ Q̄)`` from policy and reference logits on the same tokens.

    ``policy_logits`` and ``ref_logits`` are ``[B, T, V]`` over the completion positions,
    ``mask [B, T]`` marks the completion tokens. The reference side carries no gradient.
    """
    if policy_logits.shape[-1] != ref_logits.shape[-1]:
        raise MosaError(
            f"reference vocabulary: {ref_logits.shape[-1]} tokens, but the policy has "
            f"{policy_logits.shape[-1]}; MOSA compares ranks over one vocabulary"
        )
    if policy_logits.shape != ref_logits.shape:
        raise MosaError(
            f"logits: policy {tuple(policy_logits.shape)} and reference "
            f"{tuple(ref_logits.shape)} differ in shape"
        )
    p = order_statistic_profile(policy_logits, mask, k, temperature)
    with torch.no_grad():
        q = order_statistic_profile(ref_logits, mask, k, temperature)
    return profile_kl(p, q, direction)


def _chunk_sums(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    seq: torch.Tensor,
    batch: int,
    k: int,
    temperature: float,
    softcap: float | None,
) -> torch.Tensor:
    # A head kept in fp32 beside a bf16 body (trl's ``cast_lm_head_to_fp32``) meets bf16 hidden
    # states here: compute in the wider of the two dtypes, as trl's own fp32 head does.
    dtype = torch.promote_types(hidden.dtype, weight.dtype)
    logits = torch.nn.functional.linear(
        hidden.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype)
    ).float()
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    sorted_rows = sorted_probs((logits / temperature).softmax(-1), k)
    return sorted_rows.new_zeros(batch, k + 1).index_add(0, seq, sorted_rows)


def profile_sums_from_hidden(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    seq: torch.Tensor,
    batch: int,
    k: int,
    temperature: float = 1.0,
    softcap: float | None = None,
    chunk_size: int = 4096,
) -> torch.Tensor:
    """:func:`profile_sums` from final hidden states ``[N, H]`` of the masked tokens.

    The LM head ``logits = hidden · Wᵀ + b`` is applied in chunks of ``chunk_size`` tokens
    under activation checkpointing, so the ``[N, V]`` logits never exist at once, in the
    forward or in the backward (each chunk is recomputed there): the profile costs memory
    ``O(chunk_size · V)`` instead of ``O(N · V)``, which matters for a 150k vocabulary.
    ``seq [N]`` gives each token's sequence index in ``0..batch-1``.
    """
    check_top_k(k, weight.shape[0])
    if hidden.shape[0] == 0:
        raise MosaError("mask: no valid completion tokens (every position is masked out)")
    total = hidden.new_zeros(batch, k + 1, dtype=torch.float32)
    grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    for start in range(0, hidden.shape[0], chunk_size):
        args = (
            hidden[start : start + chunk_size],
            weight,
            bias,
            seq[start : start + chunk_size],
            batch,
            k,
            temperature,
            softcap,
        )
        part = checkpoint(_chunk_sums, *args, use_reentrant=False) if grad else _chunk_sums(*args)
        total = total + part
    return total


def pooled_profile(
    local_sums: torch.Tensor, global_sums: torch.Tensor, global_tokens: torch.Tensor
) -> torch.Tensor:
    """``P̄`` pooled over every data-parallel rank, differentiable in this rank's share.

    ``P̄ = (Σ_ranks S_rank) / N`` with ``S`` the per-rank profile sums ``[K+1]`` and ``N`` the
    completion tokens of all ranks. ``global_sums`` is the all-reduced (detached) ``Σ S``; the
    value returned is exactly ``global_sums / N`` and its gradient flows through
    ``local_sums``: ``∂P̄/∂S_rank = 1/N``. Each rank then holds the gradient of its own tokens;
    scaled by the world size ``W`` (DDP averages gradients over ranks) the sum over ranks is the
    gradient of ``KL(P̄ ‖ Q̄)`` of the whole batch, whatever ``W`` is.
    """
    return (local_sums + (global_sums - local_sums).detach()) / global_tokens
