"""One small protocol for "a model that chats and scores", and its backends.

- :class:`ChatModel`: ``generate`` (batched, ``n`` samples per prompt) and ``logprobs`` (per-token
  log-probabilities of a continuation);
- :class:`TransformersChat`: a local transformers model (extra ``torch``);
- :class:`OpenAIChat`: any OpenAI-compatible server, e.g. vLLM or llama.cpp (extra ``http``);
- :class:`Recorder`: record every call to a JSONL cassette and replay it with no model;
- :class:`RuleAgent`: base class for the scripted baselines papers compare against.

Importing this package imports neither torch, transformers nor httpx: the backends import them
when they are constructed, so the protocol, cassettes and rule agents work on a base install.
"""

from paperstack.llm.base import (
    BackendError,
    BackendHTTPError,
    BackendTimeoutError,
    BackendUnreachableError,
    ChatModel,
    GenerationConfig,
    LLMError,
    LogprobsUnsupportedError,
    Message,
    Messages,
    MissingExtraError,
    Prompt,
    generate_one,
)
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
