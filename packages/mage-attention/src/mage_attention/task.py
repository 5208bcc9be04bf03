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
        if self.context_tokens < self.pairs:
            raise MageError(
                f"retrieval task: prompt_length={self.prompt_length} leaves "
                f"{self.context_tokens} context tokens for {self.pairs} bindings"
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
        """``[n, pairs]``: where each prompt's binding tokens sit (sorted)."""
        ids = batch.prompt
        hit = (ids >= self._binding0) & (ids < self._filler0)
        return hit.nonzero()[:, 1].view(ids.shape[0], self.pairs)
