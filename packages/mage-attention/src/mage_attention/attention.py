"""Block attention over a KV cache, exact and over a selected subset: the PyTorch reference.

Shapes: the block's queries ``q[b, H_q, B, d]``, the committed prefix ``K, V[b, H_kv, L, d]``,
the block's own keys and values ``K_blk, V_blk[b, H_kv, B, d]``. Query head ``h`` reads KV head
``h // G`` (``G = H_q / H_kv``). Every block query sees the whole prefix and the whole block
(block-causal attention at decode time).

A sparse step keeps, per KV head, a set ``I`` of ``k`` prefix positions, and attends over the
``k + B`` keys ``[K[I]; K_blk]``:

    o_h = softmax(q_h [K[I]; K_blk]ᵀ · s) [V[I]; V_blk]

``I`` always holds the first ``sinks`` tokens (attention sinks) and the last ``window`` tokens of
the prefix (the local window); an estimator picks the other ``k - sinks - window``
(:func:`select_top_k`). The quality of a set is its attention-mass recall (:func:`mass_recall`):
the share of the exact prefix attention mass, summed over the block's queries and the KV head's
query group, that falls inside ``I``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mage_attention.errors import MageError

__all__ = [
    "Budget",
    "Policy",
    "Selection",
    "block_attention",
    "gather_rows",
    "gathered",
    "mass_recall",
    "select_top_k",
    "top_k_overlap",
]


@dataclass(frozen=True)
class Budget:
    """``k`` prefix keys per KV head, of which ``sinks`` first and ``window`` last always.

    ``dense_layers``: the first layers attend exactly for every policy (Quest keeps its first
    two layers dense; a model's first layers spread their attention over the whole prefix,
    where no ``k`` keys hold most of the mass). The decoder applies it (a policy is never asked
    for those layers), so every sparse policy follows the same rule."""

    k: int
    sinks: int = 4
    window: int = 16
    dense_layers: int = 0

    def __post_init__(self) -> None:
        if self.k < 1 or self.sinks < 0 or self.window < 0 or self.dense_layers < 0:
            raise MageError(
                f"budget: k must be >= 1 and sinks, window, dense_layers >= 0, got k={self.k}, "
                f"sinks={self.sinks}, window={self.window}, dense_layers={self.dense_layers}"
            )
        if self.sinks + self.window > self.k:
            raise MageError(
                f"budget: k={self.k} is smaller than sinks + window = {self.sinks} + {self.window}"
            )

    def check(self, prefix: int) -> None:
        """One line when the prefix has fewer than ``k`` tokens to choose from."""
        if self.k > prefix:
            raise MageError(
                f"budget: k={self.k} is larger than the prefix ({prefix} tokens); choose "
                f"k <= {prefix}"
            )


@dataclass(frozen=True)
class Selection:
    """A KV subset: positions ``idx[b, H_kv, k]`` and the rows gathered from the cache."""

    idx: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor


def gather_rows(cache: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``cache[b, H, L, d]`` at ``idx[b, H, k]`` -> ``[b, H, k, d]`` (one contiguous buffer)."""
    return cache.gather(2, idx.unsqueeze(-1).expand(*idx.shape, cache.shape[-1]))


def select_top_k(scores: torch.Tensor, budget: Budget) -> torch.Tensor:
    """``I = sinks ∪ window ∪ top-(k - sinks - window)(scores)`` per row of ``scores[b, H, L]``,
    sorted by position. Sinks and window are forced in by an infinite score."""
    length = scores.shape[-1]
    budget.check(length)
    forced = scores.float().clone()
    forced[..., : budget.sinks] = float("inf")
    if budget.window:
        forced[..., length - budget.window :] = float("inf")
    idx = forced.topk(budget.k, dim=-1).indices
    return idx.sort(dim=-1).values


def block_attention(
    q: torch.Tensor,
    k_pre: torch.Tensor,
    v_pre: torch.Tensor,
    k_blk: torch.Tensor,
    v_blk: torch.Tensor,
    scaling: float,
    with_mass: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``o[b, H_q, B, d]`` of the block's queries over ``[k_pre; k_blk]`` (any prefix: the whole
    cache for exact attention, a gathered subset ``K[I]`` for a sparse step).

    With ``with_mass`` also ``a[b, H_kv, L]``, ``a_j = Σ_{h ∈ grp, i ∈ block} P_{h,i,j}``: the
    exact attention mass of each prefix key, summed over the block's queries and the KV head's
    query group (what MAGE ranks and what recall is measured against). The KV heads are never
    expanded to ``H_q``: each group is one batched matmul.
    """
    b, hq, t, d = q.shape
    hkv = k_pre.shape[1]
    if hq % hkv:
        raise MageError(f"attention: H_q={hq} is not a multiple of H_kv={hkv}")
    qg = q.reshape(b, hkv, (hq // hkv) * t, d)
    length = k_pre.shape[2]
    # matmuls in the cache's dtype (bf16 on a GPU: no fp32 copy of the cache), softmax in fp32
    logits = torch.cat([qg @ k_pre.transpose(-1, -2), qg @ k_blk.transpose(-1, -2)], dim=-1)
    p = torch.softmax(logits.float() * scaling, dim=-1)
    pv = p.to(v_pre.dtype)
    out = pv[..., :length] @ v_pre + pv[..., length:] @ v_blk
    mass = p[..., :length].sum(2) if with_mass else None
    return out.reshape(b, hq, t, d).to(q.dtype), mass


def mass_recall(mass: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``r = Σ_{j ∈ I} a_j / Σ_j a_j`` per ``[b, H_kv]``: the exact prefix mass ``I`` keeps."""
    kept = mass.gather(-1, idx).sum(-1)
    return kept / mass.sum(-1).clamp_min(1e-30)


def top_k_overlap(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``|A ∩ B| / |B|`` per row of two index sets ``[..., k]`` (core's selection recall)."""
    from paperstack.sparse import selection_recall

    ok_a = torch.ones_like(a, dtype=torch.bool)
    ok_b = torch.ones_like(b, dtype=torch.bool)
    return selection_recall(a, ok_a, b, ok_b)


class Policy:
    """Which KV subset a block's queries attend over, step by step (one decoder, many policies).

    The decoder calls :meth:`start_block` when a block of [MASK] tokens starts, then at every
    denoising step ``t`` (0-based) and layer :meth:`select`. ``None`` means attend exactly over
    the whole prefix; the decoder then hands the exact pass's mass ``a[b, H_kv, L]`` to
    :meth:`observe`. A :class:`Selection` means attend over its gathered rows and the block.
    """

    name = "policy"
    #: whether an exact pass of this policy needs the attention mass (only to pick a subset)
    wants_mass = True

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.block = 0

    def start_block(self, block: int) -> None:
        self.block = block

    def select(
        self, layer: int, step: int, q: torch.Tensor, k_pre: torch.Tensor, v_pre: torch.Tensor
    ) -> Selection | None:
        return None

    def observe(
        self, layer: int, step: int, mass: torch.Tensor, k_pre: torch.Tensor, v_pre: torch.Tensor
    ) -> None:
        return None


def gathered(idx: torch.Tensor, k_pre: torch.Tensor, v_pre: torch.Tensor) -> Selection:
    """The :class:`Selection` of ``idx``: its key and value rows gathered once."""
    return Selection(idx, gather_rows(k_pre, idx), gather_rows(v_pre, idx))
