"""The synthetic long-context task: multi-query associative recall over integer tokens.

A sequence lists ``pairs`` key-value bindings, one token each, then asks ``queries`` of the keys::

    <bos> (k1,v1) (k2,v2) ... (kP,vP) <sep> q1 a1 q2 a2 ... qQ aQ

Keys are distinct within a sequence, drawn from ``num_keys``; values are drawn with replacement
from ``num_values``; a binding ``(k, v)`` is the token ``k · num_values + v`` of a block of
``num_keys · num_values`` binding tokens. Each query ``q_j`` is a key token of one of the listed
bindings and its answer ``a_j`` the value token bound to it. Only answers carry loss and are
scored. Solving it needs one content-based lookup across the whole context per query: the
one matching binding among ``P``, which is exactly what top-N sparse attention must keep.

This is multi-query associative recall (Zoology's MQAR) with the key and its value fused into
one token. The two-token form (``k v k v ...``) needs an induction circuit (a previous-token
head composed with a lookup head); with the tiny models and the minutes of CPU the demo has,
that circuit did not form (800 steps: chance accuracy), while the fused form is learned.
Generated deterministically from a seed, fully vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from saga_attention.heads import SagaError

__all__ = ["BOS", "PAD", "SEP", "RecallBatch", "RecallTask"]

PAD, BOS, SEP = 0, 1, 2
_FIRST = 3


@dataclass(frozen=True)
class RecallBatch:
    """``input_ids[n, T]``, ``labels[n, T]`` (-100 off the answers) and the answer positions."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    answer_positions: torch.Tensor  # [n, Q]: position of each answer token


@dataclass(frozen=True)
class RecallTask:
    """MQAR with ``pairs`` bindings and ``queries`` questions per sequence."""

    pairs: int = 64
    queries: int = 16
    num_keys: int = 128
    num_values: int = 64

    def __post_init__(self) -> None:
        if self.pairs < 1 or self.queries < 1:
            raise SagaError(
                f"recall task: pairs and queries must be >= 1, got {self.pairs}, {self.queries}"
            )
        if self.num_keys < self.pairs:
            raise SagaError(
                f"recall task: num_keys={self.num_keys} must be >= pairs={self.pairs} "
                "(keys are distinct within a sequence)"
            )
        if self.queries > self.pairs:
            raise SagaError(f"recall task: queries={self.queries} must be <= pairs={self.pairs}")

    @property
    def vocab_size(self) -> int:
        """Specials, key tokens, value tokens, binding tokens."""
        return _FIRST + self.num_keys + self.num_values + self.num_keys * self.num_values

    @property
    def length(self) -> int:
        """Tokens per sequence: ``1 + P + 1 + 2Q``."""
        return 2 + self.pairs + 2 * self.queries

    def generate(self, n: int, seed: int) -> RecallBatch:
        """``n`` sequences, the same for the same ``(n, seed)``."""
        if n < 1:
            raise SagaError(f"recall task: n must be >= 1, got {n}")
        rng = np.random.default_rng(seed)
        p, q = self.pairs, self.queries
        # distinct keys per row: the first P of a random permutation (argsort of uniforms)
        keys = np.argsort(rng.random((n, self.num_keys)), axis=1)[:, :p]
        values = rng.integers(0, self.num_values, size=(n, p))
        which = np.argsort(rng.random((n, p)), axis=1)[:, :q]  # distinct queried pairs
        key_tok = keys + _FIRST
        val_tok = values + _FIRST + self.num_keys
        pair_tok = keys * self.num_values + values + _FIRST + self.num_keys + self.num_values
        ids = np.empty((n, self.length), dtype=np.int64)
        ids[:, 0] = BOS
        ids[:, 1 : 1 + p] = pair_tok
        ids[:, 1 + p] = SEP
        start = 2 + p
        ids[:, start::2] = np.take_along_axis(key_tok, which, axis=1)
        ids[:, start + 1 :: 2] = np.take_along_axis(val_tok, which, axis=1)
        answer_pos = np.broadcast_to(np.arange(start + 1, self.length, 2), (n, q)).copy()
        labels = np.full_like(ids, -100)
        np.put_along_axis(labels, answer_pos, np.take_along_axis(ids, answer_pos, 1), axis=1)
        return RecallBatch(
            torch.from_numpy(ids), torch.from_numpy(labels), torch.from_numpy(answer_pos)
        )

    def prompts(self, batch: RecallBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompt (everything up to and including the first query) and the first answer."""
        first = int(batch.answer_positions[0, 0])
        return batch.input_ids[:, :first], batch.input_ids[:, first]
