"""MAGE: [MASK]-guided sparse attention for block-diffusion decoding.

A block of ``B`` tokens is denoised in ``T`` steps over a prefix of ``L`` cached tokens, and
all ``B`` queries of a step must share one KV subset (one gather serves the whole block). MAGE
picks that subset once per block, at step 1, when the block is all [MASK]:

1. Step 1 runs exact attention over the prefix and keeps, per layer and KV head ``g``, the
   attention mass of every prefix key summed over the block's queries and the group's heads,

       a_j = Σ_{h ∈ grp(g)} Σ_{i=1..B} softmax_j(q_{h,i} Kᵀ · s)           (j = 1..L)

2. ``I_g = sinks ∪ window ∪ top-(k - sinks - window)(a)``; ``K[I_g], V[I_g]`` are gathered once
   into a contiguous buffer of ``k`` rows.
3. Steps ``2..T`` attend over ``[K[I_g]; K_blk]`` only (``k + B`` keys, :func:`block_attention`).

Why step 1 suffices: the block-diffusion objective trains every block position to predict its
token from the prefix while the block is (partly) masked, so the block-average query at step 1
already asks the prefix what the finished block needs; later steps refine tokens inside the
block but keep asking the prefix for the same keys (query alignment across steps). The demo
measures this directly (step-1 vs step-t exact top-k overlap) instead of assuming it.

Cost per block and KV head (dot products of width ``d``): exact attention ``T·B·L``; MAGE
``B·L + (T-1)·B·(k+B)`` plus one gather of ``k`` rows; Quest (:mod:`mage_attention.baselines`)
``T·(B·L/P + B·(k+B))`` with ``P``-token pages, because its page bounds are re-scored every step.
"""

from __future__ import annotations

import torch

from mage_attention.attention import Budget, Policy, Selection, gathered, select_top_k

__all__ = ["Mage"]


class Mage(Policy):
    """Step 1 exact; its top-``k`` (plus sinks and window) gathered once and reused."""

    name = "mage"

    def __init__(self, budget: Budget) -> None:
        super().__init__(budget)
        self._kept: dict[int, Selection] = {}

    def start_block(self, block: int) -> None:
        super().start_block(block)
        self._kept = {}  # a new block asks the prefix anew

    def select(
        self, layer: int, step: int, q: torch.Tensor, k_pre: torch.Tensor, v_pre: torch.Tensor
    ) -> Selection | None:
        if step == 0:
            self.budget.check(k_pre.shape[2])
            return None  # the exact pass on the all-[MASK] block
        return self._kept[layer]

    def observe(
        self, layer: int, step: int, mass: torch.Tensor, k_pre: torch.Tensor, v_pre: torch.Tensor
    ) -> None:
        if step == 0:
            self._kept[layer] = gathered(select_top_k(mass, self.budget), k_pre, v_pre)
