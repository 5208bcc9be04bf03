"""Any OpenAI-compatible HTTP server as a :class:`~paperstack.llm.base.ChatModel`.

vLLM, llama.cpp's ``llama-server``, SGLang and hosted APIs all speak the OpenAI REST format, so a
method written against :class:`OpenAIChat` scales from a laptop to a GPU cluster by changing one
URL. Message prompts go to ``/v1/chat/completions`` (the server applies the chat template);
string prompts go to ``/v1/completions``. Scoring uses ``/v1/completions`` with ``echo=True``,
``logprobs=1`` and ``max_tokens=0``, which returns the log-probability of every prompt token:
vLLM supports it, the hosted OpenAI chat models do not (that is a clear error, not a wrong
number). httpx is imported when a client is built (extra ``http``).

Servers that ignore ``temperature`` are caught at start-up rather than in the results:
``transformers serve`` decodes greedily whatever the request says when the model's
``generation_config`` lacks ``do_sample=True``, so resamples, self-consistency votes and diversity
metrics would silently collapse to one answer. :meth:`OpenAIChat.check_sampling` asks for a few
samples at temperature 1.0 and records whether they differ; :meth:`OpenAIChat.require_sampling`
refuses, in one line, a feature that needs distinct samples; :attr:`OpenAIChat.sampling_report`
is the sentence a report quotes.

So are prompts over the model's context: ``transformers serve`` answers a prompt longer than the
model's positions with HTTP 200 and an empty reply, which a run would record as the model's
answer. After each answer that carries the server's ``prompt_tokens``, the client compares the
prompt and the reply with the served context (:meth:`OpenAIChat.context_length`: the
``context_length`` given, else vLLM's ``max_model_len`` in ``/v1/models``, else
``max_position_embeddings``/``n_positions`` in the ``config.json`` of a local model folder, which
is what ``transformers serve`` names its model) and raises a one-line
:class:`~paperstack.llm.base.ContextOverflowError` where the prompt fills the context, the
prompt and reply run past it, or the reply is empty although prompt plus ``max_tokens`` do not
fit. vLLM refuses such prompts itself (HTTP 400, one line through the same error path); a
context nobody states (hosted APIs) is not checked.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import numpy as np

from paperstack.llm.base import (
    BackendHTTPError,
    BackendTimeoutError,
    BackendUnreachableError,
    Completion,
    ContextOverflowError,
    GenerationConfig,
    LLMError,
    LogprobsUnsupportedError,
    Prompt,
    check_pairs,
    check_prompts,
    is_messages,
    prompt_to_json,
    require,
    truncate_at_stop,
)
from paperstack.llm.cost import CostLedger
from paperstack.records import redact_secrets

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAIChat", "normalise_base_url"]

T = TypeVar("T")

#: 4xx statuses worth retrying (request timeout, rate limiting); every 5xx is retried too (vLLM
#: answers 503 while a model is still loading). Any other 4xx is the caller's mistake and fails
#: at once with the server's message.
RETRY_4XX = frozenset({408, 429})

#: What :meth:`OpenAIChat.check_sampling` asks for by default: a prompt with many good answers.
SAMPLING_PROMPT = "Write one sentence about a random animal."


def _retryable(status: int) -> bool:
    return status >= 500 or status in RETRY_4XX


class OpenAIChat:
    """Client for an OpenAI-compatible server, with timeouts, retries and one-line errors.

    ``base_url`` is what the OpenAI SDK takes (``http://localhost:8000/v1``); a URL with no path
    gets ``/v1`` added. ``api_key`` defaults to the environment variable ``api_key_env``; local
    servers need none. The key is sent as a bearer token and never appears in ``repr`` or errors.

    This is the one retry layer (httpx itself does not retry): connection errors, timeouts,
    408, 429, 5xx and answers that are not JSON are retried up to ``max_retries`` times with
    exponential backoff (``backoff * 2**attempt`` seconds, jittered, capped at ``max_backoff``,
    and at least the server's ``Retry-After``), then fail with one line. ``concurrency`` is one
    limit for the whole backend: however many threads call :meth:`generate` at once, at most
    that many requests are in flight, so a batching server such as vLLM sees a steady load and
    a rate-limited API is not flooded. Every request is added to :attr:`ledger` (calls, the
    server's token counts, retries, time); share one :class:`CostLedger` between backends to
    total them.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        connect_timeout: float | None = None,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        concurrency: int = 8,
        ledger: CostLedger | None = None,
        context_length: int | None = None,
        check_context: bool = True,
    ) -> None:
        httpx_mod = require("httpx", extra="http", feature="OpenAIChat")
        if max_retries < 0 or timeout <= 0 or backoff < 0 or concurrency < 1:
            raise LLMError(
                "OpenAIChat needs max_retries >= 0, timeout > 0, backoff >= 0 and concurrency >= 1"
            )
        if context_length is not None and context_length < 1:
            raise LLMError(f"OpenAIChat needs context_length >= 1 token, got {context_length}")
        self.base_url = _normalise_base_url(base_url)
        #: The URL as messages, manifests and cost cards show it: credentials redacted.
        self.shown_url = redact_secrets(self.base_url)
        self.name: str = model
        self.model = model
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.concurrency = concurrency
        self.timeout = timeout
        self.ledger = ledger if ledger is not None else CostLedger()
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client: httpx.Client = httpx_mod.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx_mod.Timeout(timeout, connect=connect_timeout or min(timeout, 10.0)),
            limits=httpx_mod.Limits(max_connections=concurrency),
            transport=httpx_mod.HTTPTransport(retries=0),  # this class is the one retry layer
        )
        self._slots = threading.BoundedSemaphore(concurrency)
        self._rng = random.Random()
        self._rng_lock = threading.Lock()
        self._server_n = True  # does the server honour n > 1? (transformers serve does not)
        self._sampling: tuple[bool, str] | None = None  # check_sampling's verdict and sentence
        self._sampling_lock = threading.Lock()
        self.check_context = check_context
        self._context: tuple[int | None, str] | None = (
            None if context_length is None else (context_length, "context_length")
        )
        self._context_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIChat(base_url={self.shown_url!r}, model={self.model!r})"

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIChat:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST a JSON ``body`` to ``path`` under the base URL (``"/chat/completions"``) with
        this client's retries, concurrency limit, one-line errors and cost ledger, and return
        the answer's JSON: for requests :meth:`generate` does not make (``tools=[...]``, a
        server's own fields). Not context-checked: the caller owns the request."""
        return self._post(path, body)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST JSON under the backend's concurrency limit, retrying transient failures; every
        failure ends as one-line BackendError. The request goes into the ledger."""
        started = time.monotonic()
        attempts = [0]
        try:
            data = self._post_with_retries(path, body, attempts)
        except BaseException:
            self.ledger.record(
                model=self.model,
                prompt_tokens=None,
                completion_tokens=None,
                retries=max(0, attempts[0] - 1),
                seconds=time.monotonic() - started,
                failed=True,
            )
            raise
        usage = _usage(data)
        self.ledger.record(
            model=self.model,
            prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
            completion_tokens=_int_or_none(usage.get("completion_tokens")),
            retries=attempts[0] - 1,
            seconds=time.monotonic() - started,
        )
        return data

    def _post_with_retries(
        self, path: str, body: dict[str, Any], attempts: list[int]
    ) -> dict[str, Any]:
        """The retry loop; ``attempts[0]`` counts the attempts made (for the ledger)."""
        import httpx

        shown = f"{self.shown_url}{path}"  # the request goes to base_url; messages show this
        attempt = 0
        while True:
            attempts[0] = attempt + 1
            retry_after: float | None = None
            tries = f"after {attempt + 1} attempt(s)"
            try:
                with self._slots:
                    response = self._client.post(path, json=body)
            except httpx.TimeoutException as exc:
                if isinstance(exc, httpx.ConnectTimeout):  # nothing answered: a dead host
                    error: Exception = BackendUnreachableError(
                        f"cannot reach the OpenAI-compatible server at {shown} {tries}: "
                        "connection timed out"
                    )
                else:
                    error = BackendTimeoutError(
                        f"{shown}: no answer within {self.timeout:g} s {tries} "
                        f"({type(exc).__name__})"
                    )
            except httpx.TransportError as exc:  # refused, reset, dropped mid-answer, DNS...
                error = BackendUnreachableError(
                    f"cannot reach the OpenAI-compatible server at {shown} {tries}: {_reason(exc)}"
                )
            else:
                status = response.status_code
                if status < 400:
                    try:
                        data = response.json()
                    except ValueError:
                        data = None
                    if isinstance(data, dict):
                        return data
                    what = "not JSON" if data is None else "JSON that is not an object"
                    error = BackendHTTPError(
                        f"{shown}: answered {status} with a body that is {what} {tries}: "
                        f"{' '.join(response.text.split())[:120]!r}",
                        status,
                    )
                else:
                    error = BackendHTTPError(
                        f"{shown}: HTTP {status} {tries}: {_server_message(response)}", status
                    )
                    if not _retryable(status):
                        raise error
                    retry_after = _retry_after(response.headers.get("Retry-After"))
            if attempt >= self.max_retries:
                raise error
            delay = min(self.max_backoff, self.backoff * 2**attempt)
            with self._rng_lock:
                delay *= 0.5 + 0.5 * self._rng.random()  # jitter: retries do not arrive in step
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.max_backoff))
            time.sleep(delay)
            attempt += 1

    def _map(self, fn: Callable[[int], T], count: int) -> list[T]:
        """``[fn(0), ..., fn(count - 1)]`` in order, in threads (the semaphore in :meth:`_post`
        keeps the backend-wide limit)."""
        if count <= 1 or self.concurrency == 1:
            return [fn(i) for i in range(count)]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, count)) as pool:
            return list(pool.map(fn, range(count)))

    # ------------------------------------------------------------------ generate

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
        """``n`` completions per prompt as :class:`Completion` strings (finish reason, the
        server's token counts); see :meth:`ChatModel.generate`. One request per prompt; a server
        that ignores ``n`` (``transformers serve``) gets one request per sample instead, with
        seeds ``seed, seed + 1, ...`` when a seed is given."""
        cfg = GenerationConfig(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            n=n,
            seed=seed,
            stop=tuple(stop) if stop else None,
        )
        checked = check_prompts(prompts)
        return self._map(lambda i: self._generate_one(checked[i], cfg), len(checked))

    def _request(self, prompt: Prompt, cfg: GenerationConfig, n: int, seed: int | None) -> Any:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": cfg.max_new_tokens,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
        }
        if n > 1:
            body["n"] = n
        if seed is not None:
            body["seed"] = seed
        if cfg.stop:
            body["stop"] = list(cfg.stop)
        chat = is_messages(prompt)
        if chat:
            body["messages"] = prompt_to_json(prompt)
            path = "/chat/completions"
        else:
            body["prompt"] = prompt
            path = "/completions"
        data = self._post(path, body)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise LLMError(f"{self.shown_url}{path}: the answer has no choices")
        usage = _usage(data)
        prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
        completion_tokens = _int_or_none(usage.get("completion_tokens"))
        if self.check_context and prompt_tokens is not None:
            self._check_context(path, choices, chat, cfg, prompt_tokens, completion_tokens)
        out: list[Completion] = []
        for c in sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0):
            try:
                text = (c["message"].get("content") or "") if chat else c["text"]
            except (KeyError, TypeError, AttributeError):
                raise LLMError(
                    f"{self.shown_url}{path}: answer is not in the OpenAI format: "
                    f"{json.dumps(c)[:200]}"
                ) from None
            if not isinstance(text, str):
                raise LLMError(f"{self.shown_url}{path}: a choice's text is not a string")
            per = completion_tokens if len(choices) == 1 else None
            out.append(
                Completion(
                    truncate_at_stop(text, cfg.stop),
                    finish_reason=c.get("finish_reason"),
                    prompt_tokens=prompt_tokens,
                    completion_tokens=per,
                )
            )
        return out

    def _generate_one(self, prompt: Prompt, cfg: GenerationConfig) -> list[str]:
        if cfg.greedy and cfg.n > 1:
            # Greedy decoding has one answer: ask once and repeat it (vLLM refuses n > 1 at
            # temperature 0, "n must be 1 when using greedy sampling").
            one = self._request(prompt, cfg, 1, cfg.seed)[:1]
            return [*one] * cfg.n
        n = cfg.n if self._server_n else 1
        got = self._request(prompt, cfg, n, cfg.seed)
        if len(got) > n:
            raise LLMError(
                f"{self.shown_url}: expected {cfg.n} choice(s) in the answer, got {len(got)}"
            )
        if len(got) < cfg.n:
            self._server_n = False  # the server ignores n: ask for the rest one by one
            for j in range(len(got), cfg.n):
                seed = None if cfg.seed is None else cfg.seed + j
                got.extend(self._request(prompt, cfg, 1, seed))
        return list(got)

    # ------------------------------------------------------------------ context check

    def context_length(self) -> tuple[int | None, str]:
        """The served model's context in tokens and where it was read (asked once, then
        remembered): the ``context_length`` given to the client, else vLLM's
        ``max_model_len`` in the server's ``/v1/models`` entry for :attr:`model`, else
        ``max_position_embeddings`` (or ``n_positions``) in ``<model>/config.json`` when the
        model name is a local folder (``transformers serve``); ``(None, "unknown")`` when no
        one says (hosted APIs), and then nothing is checked."""
        with self._context_lock:
            if self._context is None:
                self._context = self._ask_context_length()
            return self._context

    def _ask_context_length(self) -> tuple[int | None, str]:
        try:
            response = self._client.get("/models", timeout=min(self.timeout, 10.0))
            data = response.json()
        except Exception:  # a hint, never a refusal: unanswered or not JSON
            data = None
        entries = data.get("data") if isinstance(data, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("id") == self.model:
                length = _int_or_none(entry.get("max_model_len"))
                if length is not None and length > 0:
                    return length, "the server's /v1/models (max_model_len)"
        config = os.path.join(self.model, "config.json")
        try:
            with open(config, encoding="utf-8") as fh:
                cfg = json.load(fh)
        except (OSError, ValueError):
            return None, "unknown"
        for key in ("max_position_embeddings", "n_positions"):
            length = _int_or_none(cfg.get(key)) if isinstance(cfg, dict) else None
            if length is not None and length > 0:
                return length, f"{config} ({key})"
        return None, "unknown"

    def _check_context(
        self,
        path: str,
        choices: list[Any],
        chat: bool,
        cfg: GenerationConfig,
        prompt_tokens: int,
        completion_tokens: int | None,
    ) -> None:
        """Refuse an answer to a prompt that did not fit (see the module docstring)."""
        limit, source = self.context_length()
        if limit is None:
            return
        empty = all(
            not ((c.get("message") or {}).get("content") if chat else c.get("text"))
            for c in choices
            if isinstance(c, dict)
        )
        used = prompt_tokens + (completion_tokens or 0)
        fits = prompt_tokens < limit and used <= limit
        if fits and not (empty and prompt_tokens + cfg.max_new_tokens > limit):
            return
        raise ContextOverflowError(
            f"{self.shown_url}{path}: a prompt of {prompt_tokens} tokens plus up to "
            f"{cfg.max_new_tokens} new ones is over {self.model}'s context of {limit} tokens "
            f"({source}); shorten the prompt, lower max_new_tokens or serve a longer context"
        )

    # ------------------------------------------------------------------ sampling check

    def check_sampling(
        self,
        *,
        samples: int = 4,
        temperature: float = 1.0,
        max_new_tokens: int = 16,
        prompt: Prompt | None = None,
        refresh: bool = False,
    ) -> bool:
        """Whether the server really samples: True when ``samples`` completions of one short
        prompt at ``temperature`` are not all identical.

        Some servers ignore ``temperature``: ``transformers serve`` decodes greedily unless the
        model's ``generation_config`` has ``do_sample=True``, and then every resample is the same
        answer. The samples are separate requests (``n`` is not honoured everywhere) with
        different seeds ``0, 1, ...`` (a server that honours seeds samples differently; one that
        ignores them samples from its own generator). ``prompt`` defaults to a user message
        asking for a sentence about a random animal, or the same text as a completion prompt
        when the server refuses chat requests (a model with no chat template).

        The verdict is cached for the client (``refresh=True`` asks again) and spelled out in
        :attr:`sampling_report`; the requests go into :attr:`ledger` like any other. A real
        model that puts nearly all its probability on one answer could in principle give
        identical samples too; with the default prompt and 16 tokens that does not happen.
        """
        with self._sampling_lock:
            if self._sampling is not None and not refresh:
                return self._sampling[0]
            if samples < 2:
                raise LLMError(f"check_sampling needs samples >= 2, got {samples}")
            if temperature <= 0:
                raise LLMError(f"check_sampling needs temperature > 0, got {temperature}")
            cfg = GenerationConfig(max_new_tokens=max_new_tokens, temperature=temperature)
            ask: Prompt = (
                prompt if prompt is not None else [{"role": "user", "content": SAMPLING_PROMPT}]
            )
            try:
                texts = self._sample_texts(ask, cfg, samples)
            except BackendHTTPError as exc:
                if prompt is not None or _retryable(exc.status):
                    raise
                texts = self._sample_texts(SAMPLING_PROMPT, cfg, samples)  # no chat template
            distinct = len(set(texts))
            where = f"{self.shown_url} model {self.model}"
            head = f"{where}: {samples} samples at temperature {float(temperature)}"
            if distinct > 1:
                verdict = (True, f"{head} gave {distinct} distinct answers: the server samples")
            else:
                verdict = (
                    False,
                    f"{head} were identical; the server ignores temperature (transformers serve "
                    "does when the model's generation_config lacks do_sample)",
                )
            self._sampling = verdict
            return verdict[0]

    def _sample_texts(self, prompt: Prompt, cfg: GenerationConfig, samples: int) -> list[str]:
        return [
            str(out[0]).strip()
            for out in self._map(lambda k: self._request(prompt, cfg, 1, k), samples)
        ]

    def require_sampling(self, feature: str) -> None:
        """Refuse, with one :class:`LLMError` line, a ``feature`` (resampling, self-consistency,
        a diversity metric...) that needs distinct samples from a server that gives none;
        runs :meth:`check_sampling` first if it has not run. Returns None when sampling works."""
        if self.check_sampling():
            return
        raise LLMError(f"{self.sampling_report}: {feature} needs distinct samples")

    @property
    def samples_differ(self) -> bool | None:
        """:meth:`check_sampling`'s cached verdict: None until it has run."""
        return None if self._sampling is None else self._sampling[0]

    @property
    def sampling_report(self) -> str | None:
        """One sentence for a report on whether the server samples at temperature > 0
        (``"<base_url> model <m>: 4 samples at temperature 1.0 were identical; the server ignores
        temperature (...)"``), or None until :meth:`check_sampling` has run."""
        return None if self._sampling is None else self._sampling[1]

    # ------------------------------------------------------------------ logprobs

    def logprobs(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[np.ndarray]:
        """Per-token log-probabilities of each continuation, from the server's echoed prompt.

        The server tokenizes ``prompt + continuation`` itself, so the continuation's tokens are
        found by character offset: every token that ends after ``len(prompt)`` belongs to it (a
        token straddling the boundary, e.g. ``" 4"`` after a prompt ending in a space, carries
        the continuation's first characters and is counted). Only string prompts can be scored:
        the chat endpoints do not echo prompt log-probabilities.
        """
        checked = check_pairs(prompts, continuations)
        for i, prompt in enumerate(checked):
            if is_messages(prompt):
                raise LogprobsUnsupportedError(
                    f"OpenAIChat.logprobs needs string prompts (prompts[{i}] is a message list): "
                    "render the chat template locally and pass the text"
                )
        texts = [str(p) for p in checked]
        return self._map(lambda i: self._score_one(texts[i], continuations[i]), len(texts))

    def _score_one(self, prompt: str, continuation: str) -> np.ndarray:
        if not continuation:
            return np.zeros(0, dtype=np.float64)
        body = {
            "model": self.model,
            "prompt": prompt + continuation,
            # 1, not 0: vLLM echoes with either; servers that cannot echo (transformers serve)
            # answer max_tokens=0 with a 500, and 1 lets them answer plainly without logprobs.
            "max_tokens": 1,
            "echo": True,
            "logprobs": 1,
            "temperature": 0.0,
        }
        url = f"{self.base_url}/completions"
        data = self._post("/completions", body)
        try:
            lp = data["choices"][0]["logprobs"]
            tokens = lp["tokens"]
            values = lp["token_logprobs"]
            offsets = lp["text_offset"]
        except (KeyError, IndexError, TypeError):
            raise LogprobsUnsupportedError(
                f"{url}: the server returned no echoed prompt logprobs (it must support "
                "echo=True with logprobs=1 on /v1/completions, as vLLM does)"
            ) from None
        if not (isinstance(tokens, list) and len(tokens) == len(values) == len(offsets)):
            raise LogprobsUnsupportedError(f"{url}: malformed logprobs in the server's answer")
        boundary = len(prompt)
        end = boundary + len(continuation)
        picked: list[float] = []
        for k, (token, value, offset) in enumerate(zip(tokens, values, offsets, strict=True)):
            token_end = offsets[k + 1] if k + 1 < len(offsets) else offset + len(str(token))
            if offset >= end:  # a generated token, should the server ignore max_tokens=0
                break
            if token_end <= boundary:  # wholly inside the prompt
                continue
            if value is None:
                raise LogprobsUnsupportedError(
                    f"{url}: the server gave no logprob for continuation token {token!r} (an "
                    "empty prompt leaves the first token without context)"
                )
            picked.append(float(value))
        if not picked:
            raise LogprobsUnsupportedError(
                f"{url}: no echoed token covers the continuation {continuation[:40]!r}"
            )
        return np.asarray(picked, dtype=np.float64)


def normalise_base_url(base_url: str) -> str:
    """The base URL as :class:`OpenAIChat` uses it (``http://host:port`` gets ``/v1``; a bad
    URL is one :class:`~paperstack.llm.base.LLMError` line): for a caller's own preflight."""
    return _normalise_base_url(base_url)


def _normalise_base_url(base_url: str) -> str:
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise LLMError(
            f"base_url must be an http(s) URL such as http://localhost:8000/v1, got {base_url!r}"
        )
    url = base_url.strip().rstrip("/")
    return url + "/v1" if parts.path in ("", "/") else url


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _server_message(response: httpx.Response) -> str:
    """The server's own explanation: OpenAI's ``{"error": {"message": ...}}``, vLLM's
    ``{"message": ...}``, FastAPI's ``{"detail": ...}``, or the start of the body."""
    try:
        data = response.json()
    except ValueError:
        return " ".join(response.text.split())[:300] or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return " ".join(str(error["message"]).split())[:300]
        for key in ("message", "detail", "error"):
            if data.get(key):
                return " ".join(str(data[key]).split())[:300]
    return " ".join(json.dumps(data).split())[:300]


def _usage(data: dict[str, Any]) -> dict[str, Any]:
    usage = data.get("usage")
    return usage if isinstance(usage, dict) else {}


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date; rare from model servers, and the backoff still applies
