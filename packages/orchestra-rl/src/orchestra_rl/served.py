"""Served agents that fail loudly: the checks ``orchestra swarm`` and ``demo --real`` make
before the first episode.

A swarm of served agents used to turn every broken setup into a finished run of zeros: a dead
port, a model name the server does not serve and a prompt over the model's context were each
recorded on every call and reported as "accuracy 0.000"; a server that ignores ``temperature``
(``transformers serve`` without ``do_sample`` in the model's generation config) made N seats
of one model N copies of one answer. :func:`preflight` asks the server once, before any
episode: one short request (a dead server or a refused model name is one line, after the
client's retries), the model's context length (``--context-length``, else what the server
says in ``/v1/models``: vLLM's ``max_model_len``, else the ``config.json`` of a local model
folder, which is what ``transformers serve`` was started on) and, when the swarm samples
(temperature > 0), whether it really does (:meth:`~paperstack.llm.OpenAIChat.check_sampling`:
identical samples at temperature 1.0 end the run in one line). The swarm then checks every
call against the context (:class:`~orchestra_rl.swarm.SwarmConfig` ``context_length``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_rl.errors import OrchestraError
from paperstack.llm import OpenAIChat

__all__ = ["Preflight", "context_length_of", "preflight"]


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


def _models_entry(client: OpenAIChat) -> dict[str, Any] | None:
    """The server's ``/v1/models`` entry of ``client.model``, or None (not listed, not
    answered, not JSON: the listing is a hint, never a refusal)."""
    import httpx

    try:
        response = httpx.get(f"{client.base_url}/models", timeout=min(client.timeout, 10.0))
        data = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    entries = data.get("data") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("id") == client.model:
            return entry
    return None


def context_length_of(client: OpenAIChat) -> tuple[int | None, str]:
    """The served model's context in tokens and where it was read: vLLM's ``max_model_len``
    in ``/v1/models``, else ``max_position_embeddings`` (or ``n_positions``) in the
    ``config.json`` of a local folder named by the model; ``(None, "unknown")`` otherwise."""
    entry = _models_entry(client)
    if entry is not None and isinstance(entry.get("max_model_len"), int):
        return int(entry["max_model_len"]), "the server's /v1/models (max_model_len)"
    config = Path(client.model) / "config.json"
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None, "unknown"
    for key in ("max_position_embeddings", "n_positions"):
        if isinstance(data.get(key), int):
            return int(data[key]), f"{config} ({key})"
    return None, "unknown"


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
        length, source = context_length_of(client)
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
