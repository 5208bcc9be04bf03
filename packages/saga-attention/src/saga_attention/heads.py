"""SAGA's head layout: how many query, key and value heads, and which query uses which.

SAGA decouples the number of key heads ``H_k`` from the number of value heads ``H_v``. Under
sparse decode attention the query-key scoring pass reads every cached key of every key head,
while the probability-value product reads only the ``N`` selected values, so the key heads carry
the cost and the value heads the capacity: cutting ``H_k`` (and keeping ``H_v``) buys speed
without cutting what the attention can carry.

Query head ``h`` reads key head ``h // (H_q / H_k)`` and value head ``h // (H_q / H_v)``
(the grouped-query mapping, applied to keys and values separately). Grouped-query attention
(GQA) is the special case ``H_k = H_v``.
"""

from __future__ import annotations

from dataclasses import dataclass

from paperstack.errors import PaperstackError

__all__ = ["HeadLayout", "SagaError"]


class SagaError(PaperstackError):
    """Bad input to saga-attention; the one-line message names the field and value at fault."""


@dataclass(frozen=True)
class HeadLayout:
    """``H_q`` query heads, ``H_k`` key heads and ``H_v`` value heads of ``head_dim`` each.

    Both ``H_k`` and ``H_v`` must divide ``H_q`` so that every key (value) head serves the same
    number of query heads; ``H_k < H_v``, ``H_k = H_v`` (GQA) and ``H_k > H_v`` are all allowed.
    """

    num_query_heads: int
    num_key_heads: int
    num_value_heads: int
    head_dim: int

    def __post_init__(self) -> None:
        for name in ("num_query_heads", "num_key_heads", "num_value_heads", "head_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise SagaError(f"{name}: must be a positive integer, got {value!r}")
        for name in ("num_key_heads", "num_value_heads"):
            value = getattr(self, name)
            if self.num_query_heads % value:
                raise SagaError(
                    f"{name}: {value} does not divide num_query_heads={self.num_query_heads}"
                )

    @property
    def key_group_size(self) -> int:
        """Query heads per key head, ``H_q / H_k``."""
        return self.num_query_heads // self.num_key_heads

    @property
    def value_group_size(self) -> int:
        """Query heads per value head, ``H_q / H_v``."""
        return self.num_query_heads // self.num_value_heads

    def key_head(self, query_head: int) -> int:
        """``h // (H_q / H_k)``: the key head query head ``h`` scores against."""
        return query_head // self.key_group_size

    def value_head(self, query_head: int) -> int:
        """``h // (H_q / H_v)``: the value head query head ``h`` reads."""
        return query_head // self.value_group_size

    def kv_cache_bytes_per_token(self, bytes_per_element: int = 2) -> int:
        """``(H_k + H_v) · d`` elements per token and layer (GQA: ``2 · H_kv · d``)."""
        return (self.num_key_heads + self.num_value_heads) * self.head_dim * bytes_per_element

    def decode_bytes(self, context: int, top_n: int | None, bytes_per_element: int = 2) -> int:
        """Bytes one decode step reads from the cache of one layer (batch 1).

        Dense: ``d · (H_k + H_v) · L``. Sparse (top-``N``): ``d · (H_k · L + H_k · N + H_v · N)``:
        every key of every key head is scored, then the ``N`` selected keys are read again for
        the softmax and the ``N`` selected values of every value head. With ``N << L`` the
        ``H_k · L`` scoring term dominates, which is why SAGA cuts ``H_k``.
        """
        if context < 1:
            raise SagaError(f"context: must be >= 1, got {context}")
        d = self.head_dim
        if top_n is None or top_n >= context:
            elements = d * (self.num_key_heads + self.num_value_heads) * context
        else:
            elements = d * (
                self.num_key_heads * context
                + self.num_key_heads * top_n
                + self.num_value_heads * top_n
            )
        return elements * bytes_per_element

    @classmethod
    def from_shapes(
        cls, query_heads: int, key_heads: int, value_heads: int, head_dim: int
    ) -> HeadLayout:
        """The layout implied by tensor shapes (validates divisibility)."""
        return cls(query_heads, key_heads, value_heads, head_dim)
