"""A small OpenAI-compatible server on 127.0.0.1 whose "model" is a planted rule agent.

It speaks the tools API the way vLLM does: with ``tools=[...]`` in the request the agent's tool
call comes back in ``message.tool_calls`` (``style="native"``), or as text in ``content``
(``style="text"``, a model that never learned native calls), or the request is refused with
HTTP 400 (``style="refuse"``, vLLM without ``--enable-auto-tool-choice``). The agent reads
the conversation back from the tools shape, so a served audit can be compared call for call
with the same agent played in-process.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from probe_audit import domains
from probe_audit.environment import parse_tool_call


def _game_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            fn = m["tool_calls"][0]["function"]
            body = {"name": fn["name"], "arguments": json.loads(fn["arguments"])}
            out.append(
                {"role": "assistant", "content": f"<tool_call>{json.dumps(body)}</tool_call>"}
            )
        elif m["role"] == "user" and str(m.get("content", "")).startswith("<tool_response>"):
            inner = m["content"][len("<tool_response>") : -len("</tool_response>")]
            out.append({"role": "tool", "content": inner})
        elif m["role"] != "system":
            out.append({"role": m["role"], "content": m.get("content") or ""})
    return out


class FakeServer:
    def __init__(self, domain: str = "retail", style: str = "native", model: str = "rule-agent"):
        self.agent = domains.rule_target(domain)
        self.style = style
        self.model = model
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, data: Any) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.model}]})
                else:
                    self._send(404, {"detail": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                req = json.loads(self.rfile.read(length))
                server.requests.append(req)
                if server.style == "refuse" and req.get("tools"):
                    self._send(
                        400,
                        {
                            "message": '"auto" tool choice requires '
                            "--enable-auto-tool-choice and --tool-call-parser to be set"
                        },
                    )
                    return
                text = server.agent.respond(_game_messages(req["messages"]))
                call = parse_tool_call(text)
                message: dict[str, Any] = {"role": "assistant", "content": text}
                if call is not None and req.get("tools") and server.style == "native":
                    message = {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{
                            "id": f"call_{len(server.requests)}", "type": "function",
                            "function": {"name": call.name,
                                         "arguments": json.dumps(call.arguments)},
                        }],
                    }  # fmt: skip
                self._send(200, {
                    "id": "x", "object": "chat.completion", "model": server.model,
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if "tool_calls" in message
                                 else "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                })  # fmt: skip

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
