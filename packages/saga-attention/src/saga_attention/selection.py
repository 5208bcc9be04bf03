"""Which cached tokens a decode step attends to: exact top-N and approximate top-N (Atop-N).

Both work on the last dimension of a score tensor of any leading shape (batch, key head, query
position...) and return ``(indices, ok)``: ``indices[..., N]`` are token positions and ``ok``
says which of the ``N`` slots hold a real selection (a row with fewer than ``N`` valid tokens,
or an Atop-N threshold set too high, leaves slots empty).

**Atop-N: sampled threshold, then exact top-N among the survivors** (candidate 1 of the notes,
the approach of DeepSeek's indexer top-k and of radix/threshold selects: one streaming pass over
``L`` instead of a sort):

1. *Sample.* Take every ``stride``-th score, ``m ≈ L / stride`` of them.
2. *Threshold.* ``τ`` is the ``k``-th largest sampled score with
   ``k = ceil(oversample · N · m / L)``, so that about ``oversample · N`` scores are ``≥ τ``.
3. *Filter and compact.* Keep the positions with ``s ≥ τ`` in position order, at most
   ``cap = cap_factor · N`` of them (a prefix sum gives each survivor its slot).
4. *Select.* Exact top-``N`` among the ``≤ cap`` survivors.

When between ``N`` and ``cap`` scores pass the threshold the result *is* the exact top-N;
it is approximate only when the sample puts ``τ`` too high (fewer than ``N`` survivors: empty
slots) or too low (more than ``cap``: the latest positions are cut). With the defaults
(``stride=8``, ``oversample=2``, ``cap_factor=4``) the expected survivor count is ``2N``; its
spread is about ``stride · sqrt(k)``, which puts the measured recall against exact top-N at
0.99+ on random scores and on the trained models of the demo (see the README's table).
Rows with at most ``cap`` valid tokens skip the threshold (``τ = -inf``): all of them fit the
buffer, so step 4 alone gives the exact top-N.

Two compactions compute step 3, with the same survivors in the same slots: on the CPU,
``nonzero`` over the survivor mask (it reads the mask once and syncs, which costs nothing
there); elsewhere (CUDA, a captured graph, ``torch.compile``) a prefix sum and a scatter whose
shapes depend only on ``L`` and ``N``, so a decode step never waits on the host. The sampled
top-k of step 2 then has a static size too (``ceil(oversample · N)``, the largest ``k`` any
mask can need).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from paperstack.sparse import selection_recall
from saga_attention.heads import SagaError

__all__ = ["AtopConfig", "atop_n", "atop_threshold", "exact_top_n", "select", "selection_recall"]


@dataclass(frozen=True)
class AtopConfig:
    """Atop-N's knobs (the paper's abstract gives none; these are chosen for recall >= 0.99)."""

    stride: int = 8  # sample every 8th score: the threshold pass reads L/8 scores
    oversample: float = 2.0  # aim for 2N survivors, so that fewer than N is rare
    cap_factor: float = 4.0  # at most 4N survivors go to the final exact top-N

    def __post_init__(self) -> None:
        if self.stride < 1:
            raise SagaError(f"atop stride: must be >= 1, got {self.stride}")
        if self.oversample < 1.0:
            raise SagaError(f"atop oversample: must be >= 1, got {self.oversample}")
        if self.cap_factor < 1.0:
            raise SagaError(f"atop cap_factor: must be >= 1, got {self.cap_factor}")


def _prepare(
    scores: torch.Tensor, n: int, valid: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Scores as float with ``-inf`` where not valid; ``valid`` expanded (None: all valid)."""
    length = scores.shape[-1]
    if not isinstance(n, int) or n < 1:
        raise SagaError(f"top_n: must be a positive integer, got {n!r}")
    if n > length:
        raise SagaError(f"top_n: {n} is larger than the context length {length}")
    if valid is None:
        return scores.float(), None
    else:
        try:
            valid = valid.to(torch.bool).expand_as(scores)
        except RuntimeError:
            raise SagaError(
                f"valid mask: shape {tuple(valid.shape)} does not match scores "
                f"{tuple(scores.shape)}"
            ) from None
    masked = scores.float().masked_fill(~valid, float("-inf"))
    return masked, valid


def exact_top_n(
    scores: torch.Tensor, n: int, valid: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``I = argtop_N(s)`` over the last dimension, ignoring positions where ``valid`` is False."""
    masked, _ = _prepare(scores, n, valid)
    values, indices = masked.topk(n, dim=-1)
    return indices, torch.isfinite(values)


def _host_sync_is_free(t: torch.Tensor) -> bool:
    """True on the CPU in eager mode, where reading a tensor's value costs no device wait."""
    return t.device.type == "cpu" and not torch.compiler.is_compiling()


def atop_threshold(
    masked: torch.Tensor, valid: torch.Tensor | None, n: int, config: AtopConfig
) -> tuple[torch.Tensor, int]:
    """Steps 1-2 of Atop-N: the threshold ``τ[..., 1]`` from a strided sample, and ``cap``.

    ``masked`` holds the scores with ``-inf`` at invalid positions (``valid`` None: none
    invalid). ``τ = -inf`` for rows with at most ``cap`` valid tokens (they all fit the buffer).
    """
    length = masked.shape[-1]
    cap = min(length, math.ceil(config.cap_factor * n))
    sample = masked[..., :: config.stride]
    if valid is None:
        count = torch.full(masked.shape[:-1], length, device=masked.device)
        m_valid = torch.full(masked.shape[:-1], sample.shape[-1], device=masked.device)
    else:
        count = valid.sum(-1)  # L_valid per row
        m_valid = torch.isfinite(sample).sum(-1)
    k = torch.ceil(config.oversample * n * m_valid / count.clamp(min=1)).long()
    k = torch.minimum(k.clamp(min=1), m_valid.clamp(min=1))
    if _host_sync_is_free(k):
        k_max = int(k.max()) if k.numel() else 1
    else:  # static: m_valid <= L_valid, so k <= ceil(oversample · N) whatever the mask
        k_max = math.ceil(config.oversample * n)
    top_sample = sample.topk(min(k_max, sample.shape[-1]), dim=-1).values
    tau = top_sample.gather(-1, (k - 1).clamp(max=top_sample.shape[-1] - 1).unsqueeze(-1))
    take_all = (count <= cap) | (m_valid == 0)  # everything fits the buffer: exact
    return tau.masked_fill(take_all.unsqueeze(-1), float("-inf")), cap


def atop_n(
    scores: torch.Tensor,
    n: int,
    valid: torch.Tensor | None = None,
    config: AtopConfig | None = None,
    compaction: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Approximate top-N by sampled threshold (see the module docstring for the algorithm).

    ``τ = sort_desc(s[..., ::stride])[k - 1]``, ``k = ceil(oversample · N · m_valid / L_valid)``;
    survivors ``{i : s_i ≥ τ}``, the first ``cap`` in position order; then ``argtop_N`` over them.
    ``compaction``: ``"nonzero"``, ``"scatter"`` or None (nonzero on the CPU, else scatter).
    """
    cfg = config or AtopConfig()
    masked, valid = _prepare(scores, n, valid)
    tau, cap = atop_threshold(masked, valid, n, cfg)
    survivors = masked >= tau
    if valid is not None:
        survivors &= valid
    if compaction is None:
        compaction = "nonzero" if _host_sync_is_free(scores) else "scatter"
    if compaction == "nonzero":
        buffer, filled = _compact_nonzero(survivors, cap)
    elif compaction == "scatter":
        buffer, filled = _compact_scatter(survivors, cap)
    else:
        raise SagaError(f"compaction: must be 'nonzero' or 'scatter', got {compaction!r}")
    cand_scores = masked.gather(-1, buffer).masked_fill(~filled, float("-inf"))
    values, j = cand_scores.topk(n, dim=-1)
    return buffer.gather(-1, j), torch.isfinite(values)


def _compact_nonzero(survivors: torch.Tensor, cap: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 3 by ``nonzero``: the first ``cap`` survivor positions of each row, in order.

    Returns ``buffer[..., cap]`` (positions; 0 in empty slots) and ``filled[..., cap]``.
    """
    lead, length = survivors.shape[:-1], survivors.shape[-1]
    flat = survivors.reshape(-1, length)
    rows, pos = flat.nonzero(as_tuple=True)  # row-major: positions ascend within a row
    counts = flat.sum(-1)
    starts = counts.cumsum(0) - counts
    rank = torch.arange(rows.numel(), device=flat.device) - starts[rows]
    keep = rank < cap
    buffer = torch.zeros(flat.shape[0], cap, dtype=torch.long, device=flat.device)
    buffer[rows[keep], rank[keep]] = pos[keep]
    filled = torch.arange(cap, device=flat.device) < counts.clamp(max=cap).unsqueeze(-1)
    return buffer.view(*lead, cap), filled.view(*lead, cap)


def _compact_scatter(survivors: torch.Tensor, cap: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 3 by prefix sum and scatter (static shapes, no host sync), as ``_compact_nonzero``."""
    length = survivors.shape[-1]
    rank = survivors.long().cumsum(-1) - 1
    keep = survivors & (rank < cap)
    slot = torch.where(keep, rank, torch.full_like(rank, cap))  # slot ``cap`` is a dump
    positions = torch.arange(length, device=survivors.device).expand_as(rank)
    buffer = torch.zeros((*rank.shape[:-1], cap + 1), dtype=torch.long, device=survivors.device)
    buffer.scatter_(-1, slot, positions)
    filled = torch.arange(cap, device=survivors.device) < keep.sum(-1, keepdim=True)
    return buffer[..., :cap], filled


def select(
    scores: torch.Tensor,
    n: int,
    method: str,
    valid: torch.Tensor | None = None,
    config: AtopConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dispatch on ``method``: ``"exact"`` or ``"atop"``."""
    if method == "exact":
        return exact_top_n(scores, n, valid)
    if method == "atop":
        return atop_n(scores, n, valid, config)
    raise SagaError(f"selection: must be 'exact' or 'atop', got {method!r}")
