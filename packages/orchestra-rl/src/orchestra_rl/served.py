"""Served agents that fail loudly: the checks ``orchestra swarm`` and ``demo --real`` make
before the first episode.

A swarm of served agents used to turn every broken setup into a finished run of zeros: a dead
port, a model name the server does not serve and a prompt over the model's context were each
recorded on every call and reported as "accuracy 0.000"; a server that ignores ``temperature``
(``transformers serve`` without ``do_sample`` in the model's generation config) made N seats
of one model N copies of one answer. :func:`preflight` asks the server once, before any
episode: one short request (a dead server or a refused model name is one line, after the
client's retries), the model's context length (``--context-length``, else
:meth:`~paperstack.llm.OpenAIChat.context_length`: vLLM's ``max_model_len`` in ``/v1/models``,
else the ``config.json`` of a local model folder, which is what ``transformers serve`` was
started on) and, when the swarm samples
(temperature > 0), whether it really does (:meth:`~paperstack.llm.OpenAIChat.check_sampling`:
identical samples at temperature 1.0 end the run in one line). The swarm then checks every
call against the context (:class:`~orchestra_rl.swarm.SwarmConfig` ``context_length``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestra_rl.errors import OrchestraError
from paperstack.llm import OpenAIChat

__all__ = ["Preflight", "preflight"]


@dataclass(frozen=True)
class Preflight:
    """What :func:`preflight` learnt: the context length (None: unknown, so unchecked), where
    it came from, the sampling check's sentence (None when the swarm does not sample), and
    what the checks cost (their requests are in the client's cost card with the run's)."""

    context_length: int | None
    context_source: str
    sampling: str | None
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "context_length": self.context_length,
            "context_source": self.context_source,
            "sampling": self.sampling,
            "preflight_calls": self.calls,
            "preflight_prompt_tokens": self.prompt_tokens,
            "preflight_completion_tokens": self.completion_tokens,
        }


def preflight(
    client: OpenAIChat,
    *,
    temperature: float,
    context_length: int | None = None,
    feature: str = "a swarm of seats of one model",
) -> Preflight:
    """Ask the server once before a swarm runs (see the module docstring). Raises a one-line
    :class:`~paperstack.llm.LLMError` (unreachable, refused) or :class:`OrchestraError`
    (ignores temperature) instead of letting the run record the failure on every call."""
    client.generate([[{"role": "user", "content": "Say OK."}]], max_new_tokens=2, temperature=0.0)
    length: int | None = context_length
    source = "--context-length"
    if length is None:
        length, source = client.context_length()
    sampling = None
    if temperature > 0:
        if not client.check_sampling():
            raise OrchestraError(
                f"{client.sampling_report}: {feature} at temperature {temperature:g} needs "
                "distinct samples (start the server with a generation config that samples, "
                "e.g. do_sample=true, or use vllm serve)"
            )
        sampling = client.sampling_report
    ledger = client.ledger
    return Preflight(length, source, sampling, ledger.calls, ledger.prompt_tokens,
                     ledger.completion_tokens)  # fmt: skip
