"""One small protocol for "a model that chats and scores", and its backends.

- :class:`ChatModel`: ``generate`` (batched, ``n`` samples per prompt) and ``logprobs`` (per-token
  log-probabilities of a continuation);
- :class:`TransformersChat`: a local transformers model (extra ``torch``);
- :class:`OpenAIChat`: any OpenAI-compatible server, e.g. vLLM or llama.cpp (extra ``http``);
- :class:`Recorder`: record every call to a JSONL cassette and replay it with no model;
- :class:`RuleAgent`: base class for the scripted baselines papers compare against;
- :class:`Completion`: the text a backend returns, with finish reason and token usage;
  :class:`CostLedger`: what a backend spent (calls, tokens, retries), for ``cost_card.json``;
- :mod:`paperstack.llm.serve`: a real ``transformers serve`` on 127.0.0.1 for tests and demos.

Importing this package imports neither torch, transformers nor httpx: the backends import them
when they are constructed, so the protocol, cassettes and rule agents work on a base install.
"""

from paperstack.llm.base import (
    BackendError,
    BackendHTTPError,
    BackendTimeoutError,
    BackendUnreachableError,
    ChatModel,
    Completion,
    GenerationConfig,
    LLMError,
    LogprobsUnsupportedError,
    Message,
    Messages,
    MissingExtraError,
    Prompt,
    generate_one,
)
from paperstack.llm.cost import CostLedger
from paperstack.llm.http import OpenAIChat
from paperstack.llm.local import TransformersChat
from paperstack.llm.replay import CassetteError, Recorder, ReplayMissError
from paperstack.llm.rules import RuleAgent

__all__ = [
    "BackendError",
    "BackendHTTPError",
    "BackendTimeoutError",
    "BackendUnreachableError",
    "CassetteError",
    "ChatModel",
    "Completion",
    "CostLedger",
    "GenerationConfig",
    "LLMError",
    "LogprobsUnsupportedError",
    "Message",
    "Messages",
    "MissingExtraError",
    "OpenAIChat",
    "Prompt",
    "Recorder",
    "ReplayMissError",
    "RuleAgent",
    "TransformersChat",
    "generate_one",
]
