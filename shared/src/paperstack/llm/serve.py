"""Start a real OpenAI-compatible server on this machine: ``transformers serve`` on 127.0.0.1.

Code that talks to a model server is tested against the server transformers ships (a FastAPI
app with ``/v1/chat/completions``, ``/v1/completions``, ``/v1/models`` and ``/health``; extra
``transformers[serving]``), serving a model saved in a local folder, with the hub offline. What
it does not support is known and handled by :class:`~paperstack.llm.http.OpenAIChat`: it
ignores ``n`` (the client then asks once per sample) and returns no log-probabilities
(``logprobs`` raises :class:`~paperstack.llm.base.LogprobsUnsupportedError`; vLLM has them).

    with TransformersServer("path/to/model") as server:
        chat = OpenAIChat(server.base_url, model=server.model)
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from paperstack.llm.base import BackendUnreachableError, MissingExtraError

__all__ = ["TransformersServer", "free_port", "serving_available"]


def serving_available() -> bool:
    """True when ``transformers[serving]`` (FastAPI and uvicorn) is installed."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("fastapi", "uvicorn"))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class TransformersServer:
    """``transformers serve MODEL`` as a child process on ``127.0.0.1``, ready when entered.

    ``model`` is a local model folder (or a hub id, if the hub is reachable); it is loaded at
    start (``force_model``), so the first request does not pay for it. ``extra_args`` go to the
    command line (``["--continuous-batching"]``). The server's output goes to ``log_path``; a
    server that does not answer ``/health`` within ``timeout`` seconds is stopped and its log's
    last lines are in the error. Leaving the block stops the server (SIGTERM, then SIGKILL).
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        port: int | None = None,
        timeout: float = 180.0,
        extra_args: Sequence[str] = (),
        log_path: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        if not serving_available():
            raise MissingExtraError(
                "TransformersServer needs transformers' serving extra: "
                "pip install 'transformers[serving]'"
            )
        self.model = str(model)
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        self.timeout = timeout
        self.extra_args = list(extra_args)
        self.log_path = (
            Path(log_path)
            if log_path
            else Path(tempfile.mkstemp(prefix="transformers-serve-", suffix=".log")[1])
        )
        self.env = env
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what :class:`OpenAIChat` and the OpenAI SDK take."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> TransformersServer:
        code = "import sys; from transformers.cli.transformers import main; sys.exit(main())"
        cmd = [
            sys.executable, "-c", code, "serve", self.model,
            "--host", self.host, "--port", str(self.port), "--device", "cpu",
            *self.extra_args,
        ]  # fmt: skip
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        env.update(self.env or {})
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BackendUnreachableError(
                    f"transformers serve exited with status {self._proc.returncode} before it "
                    f"answered: {self._tail()}"
                )
            if self._healthy():
                return self
            time.sleep(0.5)
        self.stop()
        raise BackendUnreachableError(
            f"transformers serve did not answer /health within {self.timeout:g} s: {self._tail()}"
        )

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.port}/health", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)

    def __enter__(self) -> TransformersServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
