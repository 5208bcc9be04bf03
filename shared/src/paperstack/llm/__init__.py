"""One small protocol for "a model that chats and scores", and its backends.

- :class:`ChatModel`: ``generate`` (batched, ``n`` samples per prompt) and ``logprobs`` (per-token
  log-probabilities of a continuation);
- :class:`TransformersChat`: a local transformers model (extra ``torch``), with a documented
  fallback for tokenizers without a chat template and a one-line refusal for prompts longer
  than the model's positions; :func:`prepare_tokenizer` readies a tokenizer for trl trainers
  (pad token, chat template) or says in one line why it cannot;
- :class:`OpenAIChat`: any OpenAI-compatible server, e.g. vLLM or llama.cpp (extra ``http``);
  :meth:`OpenAIChat.require_sampling` refuses a feature that needs distinct samples from a
  server that ignores temperature;
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
    ContextOverflowError,
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
from paperstack.llm.local import (
    FALLBACK_CHAT_TEMPLATE,
    FALLBACK_STOP,
    FALLBACK_TURNS,
    ChatTemplatePolicy,
    TransformersChat,
    cut_fallback_turn,
    ensure_chat_template,
    fallback_chat_prompt,
    model_max_positions,
    prepare_tokenizer,
)
from paperstack.llm.replay import CassetteError, Recorder, ReplayMissError
from paperstack.llm.rules import RuleAgent

__all__ = [
    "FALLBACK_CHAT_TEMPLATE",
    "FALLBACK_STOP",
    "FALLBACK_TURNS",
    "BackendError",
    "BackendHTTPError",
    "BackendTimeoutError",
    "BackendUnreachableError",
    "CassetteError",
    "ChatModel",
    "ChatTemplatePolicy",
    "Completion",
    "ContextOverflowError",
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
    "cut_fallback_turn",
    "ensure_chat_template",
    "fallback_chat_prompt",
    "generate_one",
    "model_max_positions",
    "prepare_tokenizer",
]
