"""Asynchronous deployment: the selector decides iteration t+1 while sub-MIP t runs.

The selector lives in a worker process started as its own module (``python -m
pall_lns.worker``, see :mod:`pall_lns.worker`): it is rebuilt there from its spec, so the user's
script is never re-imported (0.1's process pool did that, and an unguarded script died with
``BrokenProcessPool`` or silently ran on the fallback). When sub-MIP ``t`` starts, the main
process submits the context as it stands (history up to ``t-1``; the operator of ``t`` is already
in its usage counts); when sub-MIP ``t`` ends it waits at most ``deadline`` seconds for the
answer. Every (operator, reward) update reaches the worker, in order, so a stateful selector (a
bandit) learns there. A late answer falls back to a bandit kept in the main process (which sees
every reward too); each fallback is counted and reported. A worker that fails or exits is one
:class:`PallError`, never a silent fallback. The worker's start-up (loading an LM included) is
measured and kept outside the LNS budget by :func:`pall_lns.lns.run_lns`.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any

from pall_lns.context import Context, context_to_json
from pall_lns.errors import PallError
from pall_lns.selectors import Selector, UCBSelector
from pall_lns.specs import selector_spec

__all__ = ["AsyncSelector"]

#: How long the worker may take to start and load its selector (an LM on a loaded machine).
STARTUP_TIMEOUT = 300.0


class _Worker:
    """One ``python -m pall_lns.worker`` process and the thread that reads its answers."""

    def __init__(self) -> None:
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pall_lns.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )
        self.answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.answers.put(json.loads(line))
            except ValueError:
                self.answers.put({"error": f"unreadable answer {line[:80]!r}"})
        self.answers.put(None)  # the worker closed its channel (exited)

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(obj, allow_nan=False) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise PallError(f"selector worker stopped: {self.why(None)}") from None

    def ready(self, timeout: float) -> dict[str, Any] | None:
        """Skip answers to earlier requests until the worker says it is (re)started."""
        end = time.perf_counter() + timeout
        while True:
            try:
                answer = self.answers.get(timeout=max(0.0, end - time.perf_counter()))
            except queue.Empty:
                return {"timeout": True}
            if answer is None or "error" in answer or answer.get("ready"):
                return answer

    def why(self, answer: dict[str, Any] | None) -> str:
        if answer is not None and "error" in answer:
            return str(answer["error"])
        if answer is not None and answer.get("timeout"):
            return f"no answer within {STARTUP_TIMEOUT:g}s"
        try:
            self.stderr.seek(0)
            text = self.stderr.read().decode(errors="replace")
        except ValueError:  # already closed
            text = ""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        code = self.proc.poll()
        return f"exit status {code}" + (f", last message: {lines[-1].strip()}" if lines else "")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        try:
            if self.alive():
                self.send({"op": "close"})
        except PallError:
            pass
        try:
            self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.reader.join(timeout=2.0)  # it ends at the worker's end of file
        if self.proc.stdout is not None and not self.reader.is_alive():
            self.proc.stdout.close()
        self.stderr.close()


#: Idle workers by selector spec: a run that ends hands its worker back, the next run of the same
#: selector restarts it with a ``reset`` (milliseconds) instead of a new process (seconds: an LM
#: worker imports torch and loads the model).
_IDLE: dict[str, _Worker] = {}


@atexit.register
def _stop_idle() -> None:
    while _IDLE:
        _IDLE.popitem()[1].stop()


class AsyncSelector:
    """Wraps a selector so that :meth:`submit` returns at once and :meth:`collect` waits
    at most ``deadline`` seconds."""

    def __init__(
        self,
        selector: Selector,
        n_ops: int,
        deadline: float = 0.05,
        fallback: Selector | None = None,
    ) -> None:
        self.name = f"async-{selector.name}"
        self.deadline = deadline
        self.fallback = fallback if fallback is not None else UCBSelector(n_ops)
        self.fallbacks = 0
        self.answered = 0
        self.latencies: list[float] = []
        self.worker_cpu_s = 0.0
        self._cpu_at_start = 0.0
        self._next_id = 0
        self.pending: int | None = None
        spec = selector_spec(selector)
        self._key = json.dumps(spec, sort_keys=True)
        t0 = time.perf_counter()
        worker = _IDLE.pop(self._key, None)
        if worker is not None and worker.alive():
            worker.send({"op": "reset"})
        else:
            if worker is not None:
                worker.stop()
            worker = _Worker()
            worker.send({"spec": spec, "threads": 1})
        self.worker = worker
        self.proc = worker.proc
        ready = worker.ready(STARTUP_TIMEOUT)
        if ready is None or not ready.get("ready"):
            why = worker.why(ready)
            worker.stop()
            raise PallError(f"selector worker did not start: {why}")
        self._cpu_at_start = float(ready.get("cpu_s", 0.0))
        #: Seconds from asking for a worker to its selector being ready to answer.
        self.startup_s = time.perf_counter() - t0
        self._closed = False

    def _fail(self, answer: dict[str, Any] | None) -> PallError:
        return PallError(f"selector worker failed: {self.worker.why(answer)}")

    # ------------------------------------------------------------------ protocol
    def submit(self, ctx: Context) -> None:
        """Ask for the next operator; skipped while an earlier request is still unanswered."""
        if self.pending is not None:
            return
        self._next_id += 1
        self.pending = self._next_id
        self.worker.send({"op": "select", "id": self.pending, "ctx": context_to_json(ctx)})

    def collect(self) -> int | None:
        """The answer to the pending request within ``deadline`` seconds, else None (the caller
        then uses :attr:`fallback` and counts it; the request stays pending, so no second one
        queues behind it). A failed or exited worker raises :class:`PallError`."""
        if self.pending is None:
            return None
        end = time.perf_counter() + self.deadline
        while True:
            left = end - time.perf_counter()
            try:
                answer = self.worker.answers.get(timeout=max(0.0, left))
            except queue.Empty:
                return None
            if answer is None or "error" in answer:
                raise self._fail(answer)
            if "cpu_s" in answer:
                self.worker_cpu_s = float(answer["cpu_s"]) - self._cpu_at_start
            if answer.get("id") != self.pending:
                continue  # the late answer to a request already given up on
            self.latencies.append(float(answer.get("latency_s", 0.0)))
            self.pending = None
            self.answered += 1
            return int(answer["choice"])

    def update(self, ctx: Context, op: int, reward: float) -> None:
        """Every reward goes to the worker's selector and to the fallback bandit."""
        self.fallback.update(ctx, op, reward)
        msg = {"op": "update", "ctx": context_to_json(ctx), "choice": op, "reward": reward}
        self.worker.send(msg)

    def close(self, *, keep: bool = True) -> None:
        """Hand the worker back for the next run of the same selector (``keep``), or stop it."""
        if self._closed:
            return
        self._closed = True
        if keep and self.worker.alive() and self._key not in _IDLE:
            _stop_idle()  # at most one idle worker (an LM worker holds its model in memory)
            _IDLE[self._key] = self.worker
        else:
            self.worker.stop()
