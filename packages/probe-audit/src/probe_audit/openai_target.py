"""A served agent as the target, through the OpenAI tools API.

:class:`ToolsTarget` sends each conversation to an OpenAI-compatible server (vLLM,
``transformers serve``, a hosted API) with the domain's tool schemas as ``tools=[...]``. The
agent's ``tool_calls`` come back as structured objects; the first one is executed against the
domain's database by the game (as ``<tool_call>`` text, the game's internal form) and its
result goes back as a ``role: tool`` message with the call's ``tool_call_id``, so the server
sees a well-formed tools conversation on every request.

Not every server or model returns native tool calls: vLLM refuses ``tools`` unless started
with ``--enable-auto-tool-choice --tool-call-parser ...``, and ``transformers serve`` parses
tool calls only for model families it has a response template for (Qwen's ``<tool_call>``),
while a model that never learned a tool format writes whatever it writes. So, in mode
``"auto"`` (the default), the system prompt also states the text format
(``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``) and an answer with no native
call is read as a text call when it holds one; a server that refuses ``tools`` is asked
without them from then on. Every answer is counted by how it came (:attr:`stats`), and the
audit report states those counts, so nobody reads a text-fallback audit as a test of the
server's tool calling. ``"native"`` sends only the policy and fails on a refusal; ``"text"``
never sends ``tools``.

:func:`check_server` is the preflight of ``probe audit``: a bad URL, a dead server or a model
the server does not list is one line before any episode starts.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from probe_audit.environment import Domain, format_tool_call, parse_tool_call
from probe_audit.errors import ProbeError, TargetError

__all__ = ["MODES", "ToolCallStats", "ToolsTarget", "check_server", "to_openai_messages"]

MODES = ("auto", "native", "text")
_TEXT_FORMAT = (
    'To call a tool, answer with only <tool_call>{"name": "...", "arguments": {...}}</tool_call>.'
)


@dataclasses.dataclass
class ToolCallStats:
    """How each of the target's answers came back (one count per chat request)."""

    requests: int = 0
    native_calls: int = 0  # a tool call from the response's ``tool_calls``
    text_calls: int = 0  # a tool call written as text in ``content`` (the fallback)
    messages: int = 0  # a message to the user
    extra_native_calls: int = 0  # parallel calls after the first (not executed; counted)
    malformed: int = 0  # a tool call neither form could read (returned to the target)
    tools_refused: str = ""  # the server's refusal of ``tools``, if it refused

    @property
    def fallback(self) -> bool:
        """True when any tool call travelled as text rather than through the tools API."""
        return self.text_calls > 0 or bool(self.tools_refused)

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "fallback": self.fallback}


def check_server(base_url: str, model: str, *, timeout: float = 10.0) -> list[str]:
    """The models the server at ``base_url`` serves (``GET /models``); one line if the URL is
    not an http(s) URL, nothing answers, the answer is not a model list, or ``model`` is not
    among them."""
    from paperstack.llm.base import require

    httpx = require("httpx", extra="http", feature="probe audit")  # one line without the extra
    from paperstack.llm.http import normalise_base_url  # the client's own URL rule

    try:
        url = normalise_base_url(base_url)
    except Exception as exc:  # LLMError: one line already
        raise ProbeError(f"--target-base-url {base_url!r}: {exc}") from None
    try:
        response = httpx.get(f"{url}/models", timeout=timeout)
    except httpx.HTTPError as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ProbeError(f"cannot reach the OpenAI-compatible server at {url}: {reason}") from None
    if response.status_code >= 400:
        raise ProbeError(f"{url}/models: HTTP {response.status_code}; is this an OpenAI server?")
    try:
        data = response.json()
        served = [str(m["id"]) for m in data["data"]]
    except (ValueError, KeyError, TypeError):
        raise ProbeError(f"{url}/models: the answer is not an OpenAI model list") from None
    if model not in served:
        listed = ", ".join(served[:8]) + (" ..." if len(served) > 8 else "") or "none"
        raise ProbeError(f"--target-model {model}: not served at {url} (it serves: {listed})")
    return served


def to_openai_messages(
    messages: Sequence[Mapping[str, Any]], *, native: bool = True
) -> list[dict[str, Any]]:
    """The game's messages (:func:`probe_audit.game.target_messages`) in the tools API's shape:
    an assistant turn that called a tool carries ``tool_calls`` (id, name, JSON arguments) and
    the tool's answer points back to it by ``tool_call_id``.

    ``native=False`` (a server or model that makes its calls as text): the call stays the
    assistant's text and its result comes back as a user turn in ``<tool_response>`` (the
    Hermes convention), because a chat template that knows no tool calls cannot render an
    assistant turn without content, and servers refuse a ``tool`` message that answers no
    ``tool_calls``."""
    if not native:
        return [
            {"role": "user", "content": f"<tool_response>{m.get('content') or ''}</tool_response>"}
            if m.get("role") == "tool"
            else {"role": str(m.get("role")), "content": str(m.get("content") or "")}
            for m in messages
        ]
    out: list[dict[str, Any]] = []
    msgs = list(messages)
    for i, m in enumerate(msgs):
        role = m.get("role")
        content = str(m.get("content") or "")
        if role == "assistant":
            nxt = msgs[i + 1] if i + 1 < len(msgs) else None
            call_id = nxt.get("tool_call_id") if nxt and nxt.get("role") == "tool" else None
            try:
                call = parse_tool_call(content) if call_id else None
            except TargetError:
                call = None
            if call is not None and call_id:
                out.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": str(call_id),
                                "type": "function",
                                "function": {
                                    "name": call.name,
                                    "arguments": json.dumps(call.arguments),
                                },
                            }
                        ],
                    }
                )
                continue
            if call_id:  # a broken call the game returned as an error: keep it as text
                out.append({"role": "assistant", "content": content})
                continue
            out.append({"role": "assistant", "content": content})
        elif role == "tool":
            out.append(
                {"role": "tool", "tool_call_id": str(m.get("tool_call_id")), "content": content}
            )
        else:
            out.append({"role": str(role), "content": content})
    # A broken call was answered by a tool message with no tool_calls before it: servers
    # reject that, so such answers go back as user text.
    fixed: list[dict[str, Any]] = []
    for m in out:
        prev = fixed[-1] if fixed else None
        if m["role"] == "tool" and not (prev and prev.get("tool_calls")):
            fixed.append(
                {"role": "user", "content": f"<tool_response>{m['content']}</tool_response>"}
            )
        else:
            fixed.append(m)
    return fixed


class ToolsTarget:
    """A model behind an OpenAI-compatible server as the target of a domain, through the tools
    API (see the module docstring). ``chat`` is a :class:`paperstack.llm.OpenAIChat` (its
    retries, timeouts and cost ledger serve every request); ``mode`` one of :data:`MODES`."""

    def __init__(
        self,
        chat: Any,
        domain: Domain,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        mode: Literal["auto", "native", "text"] = "auto",
        max_new_tokens: int = 128,
        name: str | None = None,
    ) -> None:
        if mode not in MODES:
            raise ProbeError(f"tool-call mode {mode!r}: use one of {', '.join(MODES)}")
        if max_new_tokens < 1:
            raise ProbeError(f"max_new_tokens={max_new_tokens}: must be >= 1")
        self.chat = chat
        self.domain = domain
        self.tools = [dict(t) for t in (tools or [t.schema() for t in domain.tools.values()])]
        self.mode = mode
        self.max_new_tokens = max_new_tokens
        self.name = name or str(getattr(chat, "model", "served-target"))
        self.ledger = chat.ledger
        self.stats = ToolCallStats()
        self._send_tools = mode != "text"
        self._lock = threading.Lock()

    def system_prompt(self) -> str:
        """Native mode: the policy (the tools travel in ``tools``); otherwise also the tool list
        and the text format, for a model or server without native tool calls."""
        if self.mode == "native":
            return self.domain.policy
        return f"{self.domain.policy}\n\nTools:\n{self.domain.tool_text()}\n\n{_TEXT_FORMAT}"

    def _native_history(self) -> bool:
        """Replay earlier calls as ``tool_calls`` (native) or as text: native in ``native``
        mode, and in ``auto`` mode once the server has returned a native call (it parses
        them, so its template renders them); text otherwise."""
        if self.mode == "native":
            return True
        return self.mode == "auto" and self._send_tools and self.stats.native_calls > 0

    def _body(self, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.chat.model,
            "messages": [{"role": "system", "content": self.system_prompt()},
                         *to_openai_messages(messages, native=self._native_history())],
            "max_tokens": self.max_new_tokens,
            "temperature": 0.0,
        }  # fmt: skip
        if self._send_tools:
            body["tools"] = self.tools
            body["tool_choice"] = "auto"
        return body

    def _request(self, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        from paperstack.llm.base import BackendHTTPError

        body = self._body(messages)
        try:
            return self.chat.post("/chat/completions", body)
        except BackendHTTPError as exc:
            if not body.get("tools") or self.mode != "auto" or exc.status not in (400, 422):
                raise
            with self._lock:  # the server refuses tools: text calls from now on, said so
                self._send_tools = False
                self.stats.tools_refused = " ".join(str(exc).split())[:300]
            return self.chat.post("/chat/completions", self._body(messages))

    def _answer(self, messages: Sequence[Mapping[str, Any]]) -> str:
        data = self._request(messages)
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ProbeError(
                f"target {self.name}: the answer is not in the OpenAI format: "
                f"{json.dumps(data)[:200]}"
            ) from None
        calls = message.get("tool_calls") or []
        content = str(message.get("content") or "")
        with self._lock:
            self.stats.requests += 1
            if calls:
                self.stats.native_calls += 1
                self.stats.extra_native_calls += len(calls) - 1
        if calls:
            fn = calls[0].get("function") or {}
            arguments = fn.get("arguments", {})
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments or "{}")
                except json.JSONDecodeError:
                    arguments = None
            if not isinstance(arguments, dict) or not isinstance(fn.get("name"), str):
                with self._lock:
                    self.stats.malformed += 1
                # not a usable call: the game returns the error to the target and counts it
                return f"<tool_call>{json.dumps(fn)[:200]}"
            return format_tool_call(fn["name"], arguments)
        try:
            call = parse_tool_call(content)
        except TargetError:
            with self._lock:
                self.stats.malformed += 1
            return content
        with self._lock:
            if call is None:
                self.stats.messages += 1
            else:
                self.stats.text_calls += 1
        return content if call is None else format_tool_call(call.name, call.arguments)

    def act(self, conversations: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
        """The :class:`~probe_audit.game.Target` interface: one request per conversation, in
        threads (the client's concurrency limit holds for all of them)."""
        convs = list(conversations)
        if len(convs) <= 1:
            return [self._answer(c) for c in convs]
        workers = max(1, min(len(convs), int(getattr(self.chat, "concurrency", 4))))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(self._answer, convs))
