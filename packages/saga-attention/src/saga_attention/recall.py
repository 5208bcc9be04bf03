"""The synthetic long-context task: multi-query associative recall over integer tokens.

A sequence hides ``pairs`` key-value bindings, one token each, among filler tokens in a context
of ``context`` tokens, then asks ``queries`` of the keys::

    <bos> f f (k1,v1) f ... f (k2,v2) f ... (kP,vP) f <sep> q1 a1 q2 a2 ... qQ aQ

Keys are distinct within a sequence, drawn from ``num_keys``; values are drawn with replacement
from ``num_values``; a binding ``(k, v)`` is the token ``k · num_values + v`` of a block of
``num_keys · num_values`` binding tokens. Each query ``q_j`` is a key token of one of the listed
bindings and its answer ``a_j`` the value token bound to it. Only answers carry loss and are
scored. Solving it needs one content-based lookup across the whole context per query: the
one matching binding among ``C`` tokens, which is exactly what top-N sparse attention must
keep. The fillers (``num_fillers`` tokens of their own, drawn uniformly) make the context long
without adding bindings, so the vocabulary and what a model must memorise stay small while the
lookup spans 1K-4K tokens; ``context=0`` (or ``context == pairs``) is the filler-free task.

This is multi-query associative recall (Zoology's MQAR) with the key and its value fused into
one token. The two-token form (``k v k v ...``) needs an induction circuit (a previous-token
head composed with a lookup head); with the tiny models and the minutes of CPU the demo has,
that circuit did not form (800 steps: chance accuracy), while the fused form is learned.
Generated deterministically from a seed, fully vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    context: int = 0  # tokens between <bos> and <sep>; 0 = just the bindings
    num_fillers: int = 64

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
        if self.context and self.context < self.pairs:
            raise SagaError(
                f"recall task: context={self.context} must be >= pairs={self.pairs} (or 0)"
            )
        if self.num_fillers < 1:
            raise SagaError(f"recall task: num_fillers must be >= 1, got {self.num_fillers}")

    @property
    def context_tokens(self) -> int:
        """``C``: tokens between ``<bos>`` and ``<sep>`` (bindings and fillers)."""
        return self.context or self.pairs

    @property
    def chance(self) -> float:
        """Accuracy of guessing a value uniformly: ``1 / num_values``."""
        return 1.0 / self.num_values

    def with_context(self, context: int) -> RecallTask:
        """The same task with a context of ``context`` tokens."""
        return replace(self, context=context)

    @property
    def vocab_size(self) -> int:
        """Specials, key tokens, value tokens, binding tokens, fillers."""
        return self._first_filler + self.num_fillers

    @property
    def _first_binding(self) -> int:
        return _FIRST + self.num_keys + self.num_values

    @property
    def _first_filler(self) -> int:
        return self._first_binding + self.num_keys * self.num_values

    @property
    def length(self) -> int:
        """Tokens per sequence: ``1 + C + 1 + 2Q``."""
        return 2 + self.context_tokens + 2 * self.queries

    @property
    def prompt_length(self) -> int:
        """Tokens before the first query: ``<bos>``, the context and ``<sep>``."""
        return 2 + self.context_tokens

    def generate(self, n: int, seed: int) -> RecallBatch:
        """``n`` sequences, the same for the same ``(n, seed)``."""
        if n < 1:
            raise SagaError(f"recall task: n must be >= 1, got {n}")
        rng = np.random.default_rng(seed)
        p, q, c = self.pairs, self.queries, self.context_tokens
        # distinct keys per row: the first P of a random permutation (argsort of uniforms)
        keys = np.argsort(rng.random((n, self.num_keys)), axis=1)[:, :p]
        values = rng.integers(0, self.num_values, size=(n, p))
        which = np.argsort(rng.random((n, p)), axis=1)[:, :q]  # distinct queried pairs
        key_tok = keys + _FIRST
        val_tok = values + _FIRST + self.num_keys
        pair_tok = keys * self.num_values + values + self._first_binding
        ids = np.empty((n, self.length), dtype=np.int64)
        ids[:, 0] = BOS
        if c == p:
            ids[:, 1 : 1 + p] = pair_tok
        else:  # bindings at P distinct random slots of the context, fillers elsewhere
            slots = np.argsort(rng.random((n, c)), axis=1)[:, :p] + 1
            ids[:, 1 : 1 + c] = rng.integers(0, self.num_fillers, size=(n, c)) + self._first_filler
            np.put_along_axis(ids, slots, pair_tok, axis=1)
        ids[:, 1 + c] = SEP
        start = 2 + c
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

    def binding_positions(self, batch: RecallBatch) -> torch.Tensor:
        """``[n, P]``: where each sequence's binding tokens sit (for attention checks)."""
        ids = batch.input_ids[:, 1 : 1 + self.context_tokens]
        is_binding = (ids >= self._first_binding) & (ids < self._first_filler)
        return is_binding.nonzero()[:, 1].view(ids.shape[0], self.pairs) + 1
