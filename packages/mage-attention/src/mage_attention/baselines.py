"""The baselines MAGE is compared with, in the same decoder and at the same budget ``k``.

- :class:`Exact`: full attention over the prefix at every step.
- :class:`Quest`: per-page key bounds; every step scores each page of ``P`` tokens by the upper
  bound of its logits, ``u_p = Σ_i Σ_c max(q_{i,c} · max_p K_c, q_{i,c} · min_p K_c)`` summed
  over the block's queries ``i`` and the group's heads (Quest, Tang et al. 2024, with one shared
  subset per block), and keeps the best pages; re-estimated every step, as Quest does per
  decoded token.
- :class:`SparseD`: SparseD-style pattern reuse: the exact attention of the generation's first
  step, pooled into key blocks of ``P`` tokens, picks the pattern once; every later step and
  block reuses it (the local window still follows the growing prefix).
- :class:`RandomK`: ``k - sinks - window`` uniformly random prefix keys per block (and the sinks
  and window): the floor any estimator must beat.
"""

from __future__ import annotations

import torch

from mage_attention.attention import Budget, Policy, Selection, gathered, select_top_k
from mage_attention.errors import MageError

__all__ = [
    "POLICIES",
    "Exact",
    "Quest",
    "RandomK",
    "SparseD",
    "make_policy",
    "quest_page_bounds",
    "quest_page_scores",
]


class Exact(Policy):
    """Attend over the whole prefix at every step."""

    name = "exact"
    wants_mass = False


def _page_scores(scores: torch.Tensor, length: int, page: int) -> torch.Tensor:
    """Each token gets its page's score: ``[b, H, pages] -> [b, H, length]``."""
    return scores.repeat_interleave(page, dim=-1)[..., :length]


class Quest(Policy):
    """Page min/max key bounds, the best pages re-chosen at every step."""

    name = "quest"

    def __init__(self, budget: Budget, page: int = 16) -> None:
        super().__init__(budget)
        if page < 1:
            raise MageError(f"quest: page size must be >= 1, got {page}")
        self.page = page
        self._bounds: dict[int, tuple[int, torch.Tensor, torch.Tensor]] = {}

    def _page_bounds(self, layer: int, k_pre: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        length = k_pre.shape[2]
        known = self._bounds.get(layer)
        if known is None or known[0] != length:  # the prefix grew by a committed block
            known = (length, *quest_page_bounds(k_pre, self.page))
            self._bounds[layer] = known
        return known[1], known[2]

    def select(
        self, layer: int, step: int, q: torch.Tensor, k_pre: torch.Tensor, v_pre: torch.Tensor
    ) -> Selection | None:
        length = k_pre.shape[2]
        self.budget.check(length)
        kmax, kmin = self._page_bounds(layer, k_pre)
        scores = quest_page_scores(q, kmax, kmin, length, self.page)
        return gathered(select_top_k(scores, self.budget), k_pre, v_pre)


def quest_page_bounds(k_pre: torch.Tensor, page: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Quest's page metadata: per ``page``-token page the elementwise max and min key,
    ``[b, H_kv, pages, d]`` each (the last page padded so it bounds only real keys)."""
    length = k_pre.shape[2]
    pages = -(-length // page)
    pad = pages * page - length
    k = k_pre
    hi = torch.nn.functional.pad(k, (0, 0, 0, pad), value=float("-inf"))
    lo = torch.nn.functional.pad(k, (0, 0, 0, pad), value=float("inf"))
    shape = (*k.shape[:2], pages, page, k.shape[-1])
    return hi.view(shape).amax(3), lo.view(shape).amin(3)  # in the cache's dtype, as Quest


def quest_page_scores(
    q: torch.Tensor, kmax: torch.Tensor, kmin: torch.Tensor, length: int, page: int
) -> torch.Tensor:
    """``[b, H_kv, length]``: each token gets its page's upper bound ``u_p`` (module doc),
    summed over the block's queries and the KV head's query group."""
    b, _hq, _t, d = q.shape
    qg = q.to(kmax.dtype).reshape(b, kmax.shape[1], -1, d)  # the group's heads, block queries
    bound = qg.clamp(min=0) @ kmax.transpose(-1, -2) + qg.clamp(max=0) @ kmin.transpose(-1, -2)
    return _page_scores(bound.float().sum(2), length, page)


class SparseD(Policy):
    """The generation's first exact step fixes a block-granular pattern reused ever after."""

    name = "sparsed"

    def __init__(self, budget: Budget, page: int = 16) -> None:
        super().__init__(budget)
        self.page = page
        self._pattern: dict[int, torch.Tensor] = {}  # layer -> pooled scores [b, H, L0]
        self._kept: dict[int, Selection] = {}

    def start_block(self, block: int) -> None:
        super().start_block(block)
        if block == 0:
            self._pattern = {}
        self._kept = {}

    def select(
        self, layer: int, step: int, q: torch.Tensor, k_pre: torch.Tensor, v_pre: torch.Tensor
    ) -> Selection | None:
        self.budget.check(k_pre.shape[2])
        if layer not in self._pattern:
            return None  # the first step of the generation: exact, and it sets the pattern
        if layer not in self._kept:
            pattern = self._pattern[layer]
            grown = k_pre.shape[2] - pattern.shape[-1]
            scores = torch.nn.functional.pad(pattern, (0, grown), value=float("-inf"))
            self._kept[layer] = gathered(select_top_k(scores, self.budget), k_pre, v_pre)
        return self._kept[layer]

    def observe(
        self, layer: int, step: int, mass: torch.Tensor, k_pre: torch.Tensor, v_pre: torch.Tensor
    ) -> None:
        if layer not in self._pattern:
            length = mass.shape[-1]
            pages = -(-length // self.page)
            padded = torch.nn.functional.pad(mass, (0, pages * self.page - length))
            pooled = padded.view(*mass.shape[:2], pages, self.page).sum(-1)
            self._pattern[layer] = _page_scores(pooled, length, self.page)


class RandomK(Policy):
    """Random prefix keys (plus sinks and window), drawn once per block and layer."""

    name = "random"

    def __init__(self, budget: Budget, seed: int = 0) -> None:
        super().__init__(budget)
        self.seed = seed
        self._kept: dict[int, Selection] = {}

    def start_block(self, block: int) -> None:
        super().start_block(block)
        self._kept = {}

    def select(
        self, layer: int, step: int, q: torch.Tensor, k_pre: torch.Tensor, v_pre: torch.Tensor
    ) -> Selection | None:
        if layer not in self._kept:
            g = torch.Generator().manual_seed(self.seed * 100_003 + self.block * 1_009 + layer)
            scores = torch.rand(k_pre.shape[:3], generator=g).to(k_pre.device)
            self._kept[layer] = gathered(select_top_k(scores, self.budget), k_pre, v_pre)
        return self._kept[layer]


POLICIES = ("exact", "mage", "quest", "sparsed", "random")


def make_policy(name: str, budget: Budget, seed: int = 0, page: int = 16) -> Policy:
    """A policy by name (one of :data:`POLICIES`)."""
    from mage_attention.mage import Mage

    if name == "exact":
        return Exact(budget)
    if name == "mage":
        return Mage(budget)
    if name == "quest":
        return Quest(budget, page)
    if name == "sparsed":
        return SparseD(budget, page)
    if name == "random":
        return RandomK(budget, seed)
    raise MageError(f"policy: must be one of {', '.join(POLICIES)}, got {name!r}")
