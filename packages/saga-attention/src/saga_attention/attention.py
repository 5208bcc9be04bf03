"""SAGA attention in pure PyTorch: the reference every kernel and integration is tested against.

Shapes follow transformers: queries ``q[B, H_q, T, d]``, cached keys ``k[B, H_k, L, d]`` and
values ``v[B, H_v, L, d]``, a boolean ``mask[B, 1, T, L]`` (True = may attend) or ``None``
(causal, aligned to the end of the cache). Query head ``h`` uses key head ``h // (H_q/H_k)``
and value head ``h // (H_q/H_v)`` (:class:`~saga_attention.heads.HeadLayout`).

A sparse step, per key head ``k`` with query group ``grp(k)``:

    s_k   = Σ_{h ∈ grp(k)} q_h K_kᵀ / √d                      (one score per cached token)
    I_k   = topN(s_k)  or  AtopN(s_k)                          (:mod:`saga_attention.selection`)
    o_h   = softmax(q_h K_k[I_k]ᵀ / √d) V_{v(h)}[I_k]           for every h in grp(k)

The value heads read by a key group share ``I_k`` because token positions are common to all
heads. Scoring reads ``H_k · L · d`` numbers, the rest ``(H_k + H_v) · N · d``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from saga_attention.heads import HeadLayout, SagaError
from saga_attention.selection import AtopConfig, select

__all__ = [
    "aggregate_scores",
    "dense_attention",
    "dense_decode",
    "grouped_dense_decode",
    "layout_of",
    "sparse_attention",
    "sparse_decode",
]


def layout_of(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> HeadLayout:
    """The head layout of ``q[B,H_q,T,d]``, ``k[B,H_k,L,d]``, ``v[B,H_v,L,d]``, checked."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise SagaError(
            f"attention inputs: expected 4-D q, k, v, got {q.dim()}-D, {k.dim()}-D, {v.dim()}-D"
        )
    if k.shape[0] != q.shape[0] or v.shape[0] != q.shape[0]:
        raise SagaError(
            f"cache shapes: batch {k.shape[0]} (keys) / {v.shape[0]} (values) does not match "
            f"queries' batch {q.shape[0]}"
        )
    if k.shape[2] != v.shape[2]:
        raise SagaError(f"cache shapes: keys hold {k.shape[2]} tokens but values hold {v.shape[2]}")
    if not q.shape[3] == k.shape[3] == v.shape[3]:
        raise SagaError(
            f"cache shapes: head_dim differs (q {q.shape[3]}, k {k.shape[3]}, v {v.shape[3]})"
        )
    return HeadLayout.from_shapes(q.shape[1], k.shape[1], v.shape[1], q.shape[3])


def _causal_mask(t: int, length: int, device: torch.device) -> torch.Tensor:
    """Query ``i`` of ``t`` sits at cache position ``length - t + i`` and sees up to it."""
    rows = torch.arange(t, device=device).unsqueeze(-1) + (length - t)
    return (torch.arange(length, device=device) <= rows).view(1, 1, t, length)


def _check_mask(mask: torch.Tensor | None, q: torch.Tensor, length: int) -> torch.Tensor:
    t = q.shape[2]
    if mask is None:
        return _causal_mask(t, length, q.device)
    if mask.dim() != 4 or mask.shape[-1] != length or mask.shape[-2] != t:
        raise SagaError(
            f"attention mask: shape {tuple(mask.shape)} does not match (batch, 1, {t}, {length})"
        )
    if mask.dtype != torch.bool:  # an additive float mask: 0 = attend, -inf/min = blocked
        mask = mask > torch.finfo(mask.dtype).min / 2
    return mask


def aggregate_scores(q: torch.Tensor, k: torch.Tensor, scaling: float) -> torch.Tensor:
    """``s[B, H_k, T, L] = Σ_{h ∈ grp(k)} q_h K_kᵀ · scaling``: one score per key head and token.

    The sum over a group's queries is taken first (``(Σ_h q_h) K_kᵀ``, scoring is linear), so
    the pass reads each key once per key head.
    """
    b, hq, t, d = q.shape
    hk = k.shape[1]
    q_sum = q.reshape(b, hk, hq // hk, t, d).sum(2)
    return torch.matmul(q_sum, k.transpose(-1, -2)) * scaling


def _expand(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    layout = layout_of(q, k, v)
    return (
        k.repeat_interleave(layout.key_group_size, dim=1),
        v.repeat_interleave(layout.value_group_size, dim=1),
    )


def _sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scaling: float
) -> torch.Tensor:
    mask = mask | ~mask.any(-1, keepdim=True)  # a fully masked (padding) row: keep it finite
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scaling)


def dense_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scaling: float | None = None,
) -> torch.Tensor:
    """Full attention with SAGA's head mapping (prefill, training, and the dense baselines)."""
    scaling = q.shape[-1] ** -0.5 if scaling is None else scaling
    t, length = q.shape[2], k.shape[2]
    keep = _check_mask(mask, q, length)
    k_full, v_full = _expand(q, k, v)
    if (
        t == length
        and t > 1
        and torch.equal(
            keep.expand(q.shape[0], 1, t, t)[:, 0],
            _causal_mask(t, length, q.device)[:, 0].expand(q.shape[0], t, t),
        )
    ):
        # a plain causal mask (training, an unpadded prefill): SDPA's causal kernel skips the
        # blocks above the diagonal instead of reading a T x T mask
        return F.scaled_dot_product_attention(q, k_full, v_full, is_causal=True, scale=scaling)
    return _sdpa(q, k_full, v_full, keep, scaling)


def sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    top_n: int,
    mask: torch.Tensor | None = None,
    scaling: float | None = None,
    selection: str = "atop",
    atop: AtopConfig | None = None,
) -> torch.Tensor:
    """Every query row attends only to the ``top_n`` tokens its key group selects.

    Row ``t`` gives exactly what a decode step at position ``t`` computes (same scores, same
    selection over the same prefix), so running this over a whole sequence scores every
    position under decode-time sparsity in one pass; the tests check it against
    :func:`sparse_decode` step by step. The output is the reference, not the fast path: it
    builds an ``[B, H_q, T, L]`` mask.
    """
    scaling = q.shape[-1] ** -0.5 if scaling is None else scaling
    layout = layout_of(q, k, v)
    keep = _check_mask(mask, q, k.shape[2])
    length = k.shape[2]
    if top_n >= length:
        return dense_attention(q, k, v, keep, scaling)
    scores = aggregate_scores(q, k, scaling)  # [B, H_k, T, L]
    idx, ok = select(scores, top_n, selection, keep, atop)
    # scatter_add, not scatter: an empty slot may repeat a real index (duplicates race)
    chosen = torch.zeros_like(scores, dtype=torch.long).scatter_add_(-1, idx, ok.long()) > 0
    chosen = chosen.repeat_interleave(layout.key_group_size, dim=1) & keep
    k_full, v_full = _expand(q, k, v)
    return _sdpa(q, k_full, v_full, chosen, scaling)


def _decode_inputs(
    q: torch.Tensor, k: torch.Tensor, valid: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    b, length = q.shape[0], k.shape[2]
    if q.dim() != 3:
        raise SagaError(f"decode query: expected [batch, heads, head_dim], got {tuple(q.shape)}")
    if valid is None:
        valid = torch.ones(b, length, dtype=torch.bool, device=q.device)
    if tuple(valid.shape) != (b, length):
        raise SagaError(
            f"valid mask: shape {tuple(valid.shape)} does not match (batch, context) = "
            f"({b}, {length})"
        )
    return q.unsqueeze(2), valid


def dense_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    valid: torch.Tensor | None = None,
    scaling: float | None = None,
) -> torch.Tensor:
    """One dense decode step, ``q[B, H_q, d] -> o[B, H_q, d]``, over the whole cache."""
    q4, valid = _decode_inputs(q, k, valid)
    return dense_attention(q4, k, v, valid[:, None, None, :], scaling).squeeze(2)


def grouped_dense_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scaling: float | None = None,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Dense decode without copying the cache: the fastest dense CPU path we have.

    ``P[B, H_k, H_q/H_k, L] = softmax(q_grp K_kᵀ · scale)`` (each key head read once, by a
    batched matmul of its query group), then the rows are regrouped by value head,
    ``P[B, H_v, H_q/H_v, L] V_v``, so each value head is read once too. GQA (``H_k = H_v``) and
    SAGA layouts alike; SDPA would need the cache expanded to ``H_q`` heads.
    """
    layout = layout_of(q.unsqueeze(2), k, v)
    scaling = q.shape[-1] ** -0.5 if scaling is None else scaling
    b, hq, d = q.shape
    hk, hv, length = k.shape[1], v.shape[1], k.shape[2]
    qg = q.reshape(b, hk, layout.key_group_size, d)
    logits = torch.matmul(qg, k.transpose(-1, -2)) * scaling  # [B, H_k, H_q/H_k, L]
    if valid is not None:  # [B, L]; a row with nothing valid attends uniformly (stays finite)
        keep = valid | ~valid.any(-1, keepdim=True)
        logits = logits.masked_fill(~keep[:, None, None, :], float("-inf"))
    p = torch.softmax(logits.float(), dim=-1).to(v.dtype)
    p = p.reshape(b, hv, layout.value_group_size, length)
    return torch.matmul(p, v).reshape(b, hq, d)


def sparse_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    top_n: int,
    valid: torch.Tensor | None = None,
    scaling: float | None = None,
    selection: str = "atop",
    atop: AtopConfig | None = None,
    return_indices: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One sparse decode step, ``q[B, H_q, d] -> o[B, H_q, d]`` (equations in the module doc).

    Reads only the selected rows of the cache after scoring: ``K_k[I_k]`` and ``V_{v(h)}[I_k]``
    are gathered, never the whole value cache. With ``return_indices`` also returns the
    selection ``(indices[B, H_k, N], ok[B, H_k, N])``.
    """
    q4, valid = _decode_inputs(q, k, valid)
    layout = layout_of(q4, k, v)
    scaling = q.shape[-1] ** -0.5 if scaling is None else scaling
    b, hq = q.shape[:2]
    scores = aggregate_scores(q4, k, scaling).squeeze(2)  # [B, H_k, L]
    idx, ok = select(scores, top_n, selection, valid[:, None, :], atop)
    key_of = torch.arange(hq, device=q.device) // layout.key_group_size
    value_of = torch.arange(hq, device=q.device) // layout.value_group_size
    idx_q, ok_q = idx[:, key_of], ok[:, key_of]  # [B, H_q, N]
    batch = torch.arange(b, device=q.device).view(b, 1, 1)
    k_sel = k[batch, key_of.view(1, hq, 1), idx_q]  # [B, H_q, N, d]
    v_sel = v[batch, value_of.view(1, hq, 1), idx_q]
    logits = torch.einsum("bhd,bhnd->bhn", q, k_sel) * scaling
    logits = logits.masked_fill(~ok_q, float("-inf"))
    p = torch.softmax(logits.float(), dim=-1).to(v.dtype)
    out = torch.einsum("bhn,bhnd->bhd", p, v_sel)
    if return_indices:
        return out, idx, ok
    return out
