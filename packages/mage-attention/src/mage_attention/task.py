"""Synthetic long-context retrieval laid out for a block-diffusion LM.

Two layouts. With ``in_block=True`` (the demo's, since 0.3) the questions are not part of the
``L``-token prompt but follow it, inside the first answer block::

    <bos>  f f b f ... f b f ... f  <sep>  |  q_1 ... q_Q  a_1 ... a_Q  |
           `----- C = L - 2 tokens ------'     one block of B = 2Q tokens

so the questions are never prefilled into the cache: their queries are the block's own, and at
every denoising step the block must read the bindings out of the prefix through the KV subset
the attention policy keeps. (With the questions in the prompt, the older layout below, their
tokens retrieve their bindings during the dense prefill, the answer block then reads only the
questions inside the local window, and any KV subset, random-k included, answers as well as
exact attention: the 0.2 demo measured random-k 0.743 vs exact 0.751.)

One sequence is a prompt of ``L`` tokens followed by ``Q`` answers, ``Q / B`` blocks of ``B``::

    <bos>  f f b f ... f b f ... f  <sep>  q_1 q_2 ... q_Q  |  a_1 ... a_B | a_{B+1} ... a_Q
           `----- C context tokens -----'                  prompt ends   answer blocks

The context hides ``pairs`` bindings among filler tokens. A binding ``b`` is one token standing
for a (key, value) pair; keys are distinct within a sequence. Each question ``q_i`` is the key
token of one binding and its answer ``a_i`` is that binding token, so the answer sits exactly
``Q`` positions after its question. Knowing the question narrows the answer to the
``num_values`` bindings of its key (chance: ``1 / num_values``); only finding the binding in
the context gets it right. Giving the positional hop a signal of its own this way is what lets
a tiny model learn the two hops in CPU minutes (with value tokens as answers it stayed at
chance for 300 steps). A block of answers starts all [MASK] and must, for
each of its positions, find the question ``Q`` tokens back (a positional hop) and then the one
binding of that key among ``C`` tokens (a content hop): the content hop is what a sparse
attention's KV subset has to keep. One token per binding (not ``key value`` as two tokens)
keeps the content hop to one attention lookup, which tiny models learn in CPU minutes.

Records (``records``, an option; not the demo's): the bindings are written in the answer
block's own layout, records of ``2Q`` tokens ``k_1 .. k_Q v_1 .. v_Q``, and the answer to
``q_i`` is the value ``Q`` positions after the key ``q_i``: multi-query associative recall, whose
content hop is an induction step. On validation prototypes (2-layer, hidden 64) it stayed on
its loss plateau (2.45 nats, chance 2.77) for 2500 steps, as did adjacent ``key value`` pairs.

The demo's task since 0.3 (:data:`mage_attention.demo.FULL`) keeps one token per binding but
fewer of them (16 bindings of 16 keys, 16 values: 256 binding types): with 24 bindings of 32
keys (512 rare binding types) the model stayed near 0.45 exact match; with 8 bindings of 8 keys
it solved the task but random-k answered almost as well, the 8 bindings fitting in the summary
that late prefix tokens carry (the comment above ``FULL`` has the validation numbers).

Deterministic by seed; vectorised with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from mage_attention.errors import MageError

__all__ = ["BOS", "MASK", "PAD", "SEP", "RetrievalBatch", "RetrievalTask"]

PAD, BOS, SEP, MASK = 0, 1, 2, 3
_SPECIALS = 4


@dataclass(frozen=True)
class RetrievalBatch:
    """``prompt[n, L]`` (``[n, L + Q]`` with ``in_block``) and the answers ``answers[n, Q]``."""

    prompt: torch.Tensor
    answers: torch.Tensor

    @property
    def sequences(self) -> torch.Tensor:
        """Prompt and answers in one ``[n, L + Q]`` tensor (training input)."""
        return torch.cat([self.prompt, self.answers], dim=1)


@dataclass(frozen=True)
class RetrievalTask:
    """``pairs`` bindings hidden in a prompt of ``prompt_length`` tokens, ``queries`` questions."""

    prompt_length: int = 1024
    pairs: int = 24
    queries: int = 16
    num_keys: int = 32
    num_values: int = 16
    num_fillers: int = 32
    #: questions after the prompt's ``prompt_length`` tokens, in the block the answers open
    in_block: bool = False
    #: bindings written as records in the answer block's own layout: ``Q`` key tokens then
    #: their ``Q`` value tokens, and the answer is the value (module doc, "Records")
    records: bool = False

    def __post_init__(self) -> None:
        if self.queries < 1 or self.pairs < self.queries:
            raise MageError(
                f"retrieval task: needs 1 <= queries <= pairs, got queries={self.queries}, "
                f"pairs={self.pairs}"
            )
        if self.num_keys < self.pairs:
            raise MageError(
                f"retrieval task: num_keys={self.num_keys} must be >= pairs={self.pairs} "
                "(keys are distinct within a sequence)"
            )
        if self.records and self.pairs % self.queries:
            raise MageError(
                f"retrieval task: records hold queries={self.queries} bindings each, so pairs="
                f"{self.pairs} must be a multiple of it"
            )
        need = 2 * self.pairs if self.records else self.pairs
        if self.context_tokens < need:
            raise MageError(
                f"retrieval task: prompt_length={self.prompt_length} leaves "
                f"{self.context_tokens} context tokens for {self.pairs} bindings"
                + (f" in records of {2 * self.queries} tokens" if self.records else "")
            )

    @property
    def context_tokens(self) -> int:
        """``C = L - 2 - Q`` (``L - 2`` with ``in_block``): tokens between ``<bos>`` and
        ``<sep>``."""
        return self.prompt_length - 2 - (0 if self.in_block else self.queries)

    @property
    def chance(self) -> float:
        """Exact match of a uniform guess among the question's bindings: ``1 / num_values``."""
        return 1.0 / self.num_values

    @property
    def vocab_size(self) -> int:
        return self._filler0 + self.num_fillers

    @property
    def _key0(self) -> int:
        return _SPECIALS

    @property
    def _value0(self) -> int:
        return self._key0 + self.num_keys

    @property
    def _binding0(self) -> int:
        return self._value0 + self.num_values

    @property
    def _filler0(self) -> int:
        if self.records:  # no binding tokens: a binding is a key token and a value token
            return self._binding0
        return self._binding0 + self.num_keys * self.num_values

    def at_length(self, prompt_length: int) -> RetrievalTask:
        """The same task with a prompt of ``prompt_length`` tokens."""
        return replace(self, prompt_length=prompt_length)

    def generate(self, n: int, seed: int) -> RetrievalBatch:
        """``n`` sequences; the same ``(n, seed)`` gives the same batch."""
        if n < 1:
            raise MageError(f"retrieval task: n must be >= 1, got {n}")
        rng = np.random.default_rng([seed, self.prompt_length])
        c, p, q = self.context_tokens, self.pairs, self.queries
        keys = rng.permuted(np.tile(np.arange(self.num_keys), (n, 1)), axis=1)[:, :p]
        values = rng.integers(0, self.num_values, size=(n, p))
        asked = rng.permuted(np.tile(np.arange(p), (n, 1)), axis=1)[:, :q]
        context = rng.integers(0, self.num_fillers, size=(n, c)) + self._filler0
        if self.records:
            # ``p / q`` of the ``⌊c / 2q⌋`` cells of ``2q`` tokens hold a record: binding ``i``'s
            # key at the cell's offset ``i``, its value at ``q + i`` (a per-sequence shift keeps
            # the cells off one alignment when ``c`` leaves room)
            size = 2 * q
            cells = rng.permuted(np.tile(np.arange(c // size), (n, 1)), axis=1)[:, : p // q]
            shift = rng.integers(0, 1 + c % size, size=(n, 1))
            slots = (size * cells + shift)[:, :, None] + np.arange(q)  # [n, p/q, q]: key slots
            slots = slots.reshape(n, p)
            np.put_along_axis(context, slots, self._key0 + keys, axis=1)
            np.put_along_axis(context, slots + q, self._value0 + values, axis=1)
            binding = self._value0 + values
        else:
            slots = rng.permuted(np.tile(np.arange(c), (n, 1)), axis=1)[:, :p]
            binding = self._binding0 + keys * self.num_values + values
            np.put_along_axis(context, slots, binding, axis=1)
        prompt = np.concatenate(
            [
                np.full((n, 1), BOS),
                context,
                np.full((n, 1), SEP),
                self._key0 + np.take_along_axis(keys, asked, axis=1),
            ],
            axis=1,
        )  # with in_block the questions follow the L tokens, opening the answer block
        answers = np.take_along_axis(binding, asked, axis=1)
        return RetrievalBatch(torch.from_numpy(prompt), torch.from_numpy(answers))

    def binding_positions(self, batch: RetrievalBatch) -> torch.Tensor:
        """``[n, pairs]``: where each prompt's binding tokens sit (sorted; with
        ``records`` the value tokens, which an answer reads)."""
        ids = batch.prompt
        lo = self._value0 if self.records else self._binding0
        hi = self._binding0 if self.records else self._filler0
        hit = (ids >= lo) & (ids < hi)
        return hit.nonzero()[:, 1].view(ids.shape[0], self.pairs)
