"""The one protocol every model backend speaks, and the types and errors it shares.

A paperstack method talks to "a model that chats and scores" without caring whether it is a
tiny random Llama on a laptop, a 70B model behind a vLLM server, a cassette recorded last week or
a hand-written rule-based baseline. Two operations cover every paper in the repository:

- :meth:`ChatModel.generate`: ``n`` completions for each prompt of a batch;
- :meth:`ChatModel.logprobs`: the per-token log-probabilities of a given continuation, which is
  what likelihood-based evaluation, preference losses and auditing need.

A prompt is either OpenAI-style messages (``[{"role": "user", "content": "..."}]``), for which the
backend applies its chat template, or a plain string, which is sent as raw completion text.
Nothing here imports torch, transformers or httpx, so the protocol works on a base install.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Protocol, Union, runtime_checkable

import numpy as np

from paperstack.errors import PaperstackError

__all__ = [
    "BackendError",
    "BackendHTTPError",
    "BackendTimeoutError",
    "BackendUnreachableError",
    "ChatModel",
    "Completion",
    "GenerationConfig",
    "LLMError",
    "LogprobsUnsupportedError",
    "Message",
    "Messages",
    "MissingExtraError",
    "Prompt",
    "generate_one",
    "is_messages",
    "prompt_to_json",
    "truncate_at_stop",
]

#: One chat message, OpenAI style: ``{"role": "user", "content": "..."}``.
Message = Mapping[str, Any]
#: A conversation: the prompt form that gets the model's chat template.
Messages = Sequence[Message]
#: A prompt is a conversation or a raw completion string.
Prompt = Union[str, Messages]  # noqa: UP007 - a runtime alias; `|` on typing aliases needs 3.10+


# --------------------------------------------------------------------------- errors


class LLMError(PaperstackError):
    """A model backend could not do what was asked (bad prompt, unsupported operation...)."""


class MissingExtraError(LLMError):
    """An optional dependency of a backend is not installed; the message names the extra."""


class LogprobsUnsupportedError(LLMError):
    """The backend cannot score continuations (rule agents, servers without echoed logprobs)."""


class BackendError(LLMError):
    """A remote backend failed: unreachable, too slow, or answered with an error."""


class BackendUnreachableError(BackendError):
    """No connection could be made to the server (wrong URL, server down, firewall)."""


class BackendTimeoutError(BackendError):
    """The server accepted the connection but did not answer within the timeout."""


class ContextOverflowError(LLMError):
    """A prompt (with the new tokens asked for) did not fit the served model's context: the
    server answered anyway, often with an empty reply (``transformers serve``), so the answer
    is refused rather than recorded as the model's."""


class BackendHTTPError(BackendError):
    """The server answered with an HTTP error; ``status`` keeps the code for callers."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import an optional dependency, or fail with one line telling the user which extra to add.

    Backends call this in their constructors rather than importing at module level, so that
    ``import paperstack.llm`` stays cheap and works without torch or httpx installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(
            f"{feature} needs the '{module}' package: pip install 'paperstack-core[{extra}]'"
        ) from None


# --------------------------------------------------------------------------- types


class Completion(str):
    """One generated text, with what the backend said about it.

    A ``str`` (so code that treats completions as text keeps working) that also carries
    ``finish_reason`` (``"stop"``: the model ended it or a stop string did; ``"length"``:
    ``max_new_tokens`` ran out) and the token counts as the backend counted them:
    ``prompt_tokens`` and ``completion_tokens`` (None where the backend did not say).
    """

    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None

    def __new__(
        cls,
        text: str,
        finish_reason: str | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> Completion:
        obj = super().__new__(cls, text)
        obj.finish_reason = finish_reason
        obj.prompt_tokens = prompt_tokens
        obj.completion_tokens = completion_tokens
        return obj

    @property
    def text(self) -> str:
        """The plain ``str`` of this completion."""
        return str.__str__(self)

    def __reduce__(self) -> Any:
        args = (self.text, self.finish_reason, self.prompt_tokens, self.completion_tokens)
        return (Completion, args)


@dataclasses.dataclass(frozen=True)
class GenerationConfig:
    """Sampling parameters shared by every backend, so a cassette key means the same everywhere.

    ``temperature == 0`` means greedy decoding (then ``top_p`` and ``seed`` have no effect).
    ``stop`` strings end a completion and are not part of the returned text (OpenAI semantics).
    """

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    seed: int | None = None
    stop: Sequence[str] | None = None  # normalised to a tuple

    def __post_init__(self) -> None:
        if self.max_new_tokens < 0:
            raise LLMError(f"max_new_tokens must be >= 0, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise LLMError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise LLMError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.n < 1:
            raise LLMError(f"n must be >= 1, got {self.n}")
        if self.stop is not None:
            stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
            if any(not isinstance(s, str) or not s for s in stop):
                raise LLMError(f"stop must be non-empty strings, got {self.stop!r}")
            object.__setattr__(self, "stop", stop or None)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def stochastic(self) -> bool:
        """True when two identical calls may give different answers (sampling with no seed)."""
        return not self.greedy and self.seed is None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values, in a fixed form so that request hashes are stable."""
        return {
            "max_new_tokens": int(self.max_new_tokens),
            "temperature": float(self.temperature),
            "top_p": float(self.top_p),
            "n": int(self.n),
            "seed": None if self.seed is None else int(self.seed),
            "stop": None if self.stop is None else list(self.stop),
        }


@runtime_checkable
class ChatModel(Protocol):
    """A model that chats and scores: the interface every paperstack backend implements.

    ``name`` identifies the model (a hub id, a path, a served model name): it is part of the
    cassette key of :class:`~paperstack.llm.replay.Recorder`, so two different models never share
    recorded answers.
    """

    name: str

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
        """``n`` completions for each prompt, in prompt order: ``result[i][j]`` is sample ``j``
        of prompt ``i``. The prompt itself is not included; stop strings are cut off. Backends
        that know more return :class:`Completion` strings (finish reason, token usage)."""
        ...

    def logprobs(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[np.ndarray]:
        """For each pair, the log-probability of every token of ``continuation`` given
        ``prompt``: natural logs, one value per continuation token (float32 from local
        models, float64 from servers, whose JSON carries doubles)."""
        ...


# --------------------------------------------------------------------------- helpers


def is_messages(prompt: object) -> bool:
    """True for a conversation (a sequence of role/content mappings), False for a string."""
    return not isinstance(prompt, (str, bytes)) and isinstance(prompt, Sequence)


def check_prompts(prompts: Sequence[Prompt]) -> list[Prompt]:
    """Validate a batch of prompts, with a one-line error naming the first bad one.

    A bare string passed as the batch is the most common slip (it would be read as one prompt per
    character), so it is refused explicitly.
    """
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
        raise LLMError(f"prompts must be a list of prompts, got {type(prompts).__name__}")
    out: list[Prompt] = []
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            out.append(prompt)
            continue
        if not is_messages(prompt):
            raise LLMError(f"prompts[{i}] must be a string or a list of messages")
        for j, message in enumerate(prompt):
            if not isinstance(message, Mapping) or "role" not in message:
                raise LLMError(f"prompts[{i}][{j}] must be a mapping with 'role' and 'content'")
            if not isinstance(message.get("content"), str):
                raise LLMError(f"prompts[{i}][{j}]['content'] must be a string")
        out.append(prompt)
    return out


def check_pairs(prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[Prompt]:
    """Validate the arguments of :meth:`ChatModel.logprobs`."""
    checked = check_prompts(prompts)
    if isinstance(continuations, str) or len(continuations) != len(checked):
        raise LLMError(
            f"logprobs needs one continuation per prompt, got {len(checked)} prompts and "
            f"{'a string' if isinstance(continuations, str) else len(continuations)} continuations"
        )
    for i, cont in enumerate(continuations):
        if not isinstance(cont, str):
            raise LLMError(f"continuations[{i}] must be a string")
    return checked


def prompt_to_json(prompt: Prompt) -> str | list[dict[str, Any]]:
    """A prompt as plain JSON (messages become dicts), for hashing and for request bodies."""
    if isinstance(prompt, str):
        return prompt
    return [dict(message) for message in prompt]


def as_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """A string prompt becomes one user message; messages are copied as plain dicts."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(message) for message in prompt]


def truncate_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """Cut ``text`` at the earliest stop string (which is dropped), as OpenAI servers do."""
    if not stop:
        return text
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]


def generate_one(model: ChatModel, prompt: Prompt, **kwargs: Any) -> str:
    """The single completion for one prompt: the ``generate(messages) -> str`` form agents use."""
    return model.generate([prompt], n=1, **kwargs)[0][0]
