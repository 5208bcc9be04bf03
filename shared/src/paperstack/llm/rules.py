"""Rule-based agents: the deterministic baselines papers compare against, behind the same protocol.

Several papers pit a learned agent against a scripted one (a fixed bidding rule, a keyword
auditor, a tit-for-tat debater). Writing those as :class:`RuleAgent` subclasses lets the same
evaluation loop, cassette and report code run them unchanged, and makes them the default model in
tests: fast, dependency-free and exactly reproducible.
"""

from __future__ import annotations

import hashlib
import json
import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from paperstack.llm.base import (
    GenerationConfig,
    LogprobsUnsupportedError,
    Prompt,
    as_messages,
    check_pairs,
    check_prompts,
    truncate_at_stop,
)

__all__ = ["RuleAgent"]


class RuleAgent(ABC):
    """Base class for scripted agents that implement :class:`~paperstack.llm.base.ChatModel`.

    Subclasses implement :meth:`respond`, which maps a conversation to a reply and must be a
    function of the messages and ``self.seed`` only; for randomised rules, draw from
    :meth:`rng`, which is seeded by both, so the same conversation always gets the same reply
    whatever order the calls come in. String prompts arrive as one user message.

    ``generate`` ignores the sampling parameters (a rule has no temperature) except ``stop``,
    which cuts the reply as it would a model's, and asks :meth:`sample` for each of the ``n``
    samples: by default that is :meth:`respond`, so the samples are identical; a rule whose
    samples should differ (or depend on the call's ``seed``, as a resampled model call would)
    overrides :meth:`sample`. ``logprobs`` raises :class:`LogprobsUnsupportedError` unless a
    subclass overrides it.
    """

    name: str = "rule-agent"

    def __init__(self, seed: int = 0, *, name: str | None = None) -> None:
        self.seed = seed
        if name is not None:
            self.name = name
        elif type(self).name == RuleAgent.name:
            self.name = type(self).__name__

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed}, name={self.name!r})"

    @abstractmethod
    def respond(self, messages: list[dict[str, Any]]) -> str:
        """The agent's reply to a conversation (OpenAI-style role/content messages)."""

    def sample(self, messages: list[dict[str, Any]], index: int, seed: int | None) -> str:
        """Sample ``index`` of the reply to a conversation in a call made with ``seed``: by
        default :meth:`respond` for every sample. Overrides must stay a function of the
        messages, ``self.seed``, ``index`` and ``seed``, so reruns give the same samples."""
        return self.respond(messages)

    def rng(self, messages: Sequence[dict[str, Any]]) -> random.Random:
        """A random generator seeded by ``self.seed`` and the conversation (stable across runs
        and processes, unlike Python's salted ``hash``)."""
        blob = json.dumps([self.seed, list(messages)], sort_keys=True, ensure_ascii=False)
        return random.Random(int.from_bytes(hashlib.sha256(blob.encode()).digest()[:8], "big"))

    def generate(
        self,
        prompts: Sequence[Prompt],
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        n: int = 1,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[list[str]]:
        """``n`` samples (:meth:`sample`) for each prompt, cut at ``stop``."""
        cfg = GenerationConfig(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            n=n,
            seed=seed,
            stop=tuple(stop) if stop else None,
        )
        out: list[list[str]] = []
        for prompt in check_prompts(prompts):
            messages = as_messages(prompt)
            out.append(
                [
                    truncate_at_stop(self.sample(messages, j, cfg.seed), cfg.stop)
                    for j in range(cfg.n)
                ]
            )
        return out

    def logprobs(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[np.ndarray]:
        """Not defined for a rule: it has no distribution over text. Override to provide one."""
        check_pairs(prompts, continuations)
        raise LogprobsUnsupportedError(
            f"rule agent {self.name!r} cannot score continuations (logprobs is not supported by "
            "rule-based agents)"
        )
