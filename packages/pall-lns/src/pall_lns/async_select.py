"""Asynchronous deployment: the selector decides iteration t+1 while sub-MIP t runs.

The selector lives in a separate process (``concurrent.futures.ProcessPoolExecutor``). Workers
come from a ``forkserver`` whose server preloads numpy and this package, so each solve starts its
worker by a cheap fork of a clean process that never held SCIP or HiGHS state (``spawn`` where
``forkserver`` does not exist). When sub-MIP ``t`` starts, the main process
submits the context as it stands (history up to ``t-1``; the operator of ``t`` is already in its
usage counts); when sub-MIP ``t`` ends it waits at most ``deadline`` seconds for the answer. A
late, failed or still-running request falls back to a bandit kept in the main process, which
sees every reward. All of this happens inside the wall-time budget: the LNS clock never stops.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from pall_lns.context import Context
from pall_lns.selectors import Selector, UCBSelector

__all__ = ["AsyncSelector"]

_WORKER: Any = None


def _init(selector: Selector) -> None:
    global _WORKER
    _WORKER = selector


def _select(ctx: Context) -> int:
    return int(_WORKER.select(ctx))


def _ping() -> int:
    return 0


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["numpy", "pall_lns.async_select"])
        return ctx
    return multiprocessing.get_context("spawn")


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
        self.inner = selector
        self.name = f"async-{selector.name}"
        self.deadline = deadline
        self.fallback = fallback if fallback is not None else UCBSelector(n_ops)
        self.pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=_context(),
            initializer=_init,
            initargs=(selector,),
        )
        self.warmup: Future[int] = self.pool.submit(_ping)  # start the worker now
        self.pending: Future[int] | None = None
        self.fallbacks = 0
        self.answered = 0

    def submit(self, ctx: Context) -> None:
        """Ask for the next operator; skipped while an earlier request is still running."""
        if self.pending is None or self.pending.done():
            self.pending = self.pool.submit(_select, ctx)

    def collect(self) -> int | None:
        """The answer to the last :meth:`submit` within ``deadline`` seconds, else None (the
        caller then uses :attr:`fallback` and counts it)."""
        fut, self.pending = self.pending, None
        if fut is None:
            return None
        try:
            op = int(fut.result(timeout=self.deadline))
        except FutureTimeout:
            self.pending = fut  # still running: do not queue another request behind it
            return None
        except Exception:
            return None
        self.answered += 1
        return op

    def update(self, ctx: Context, op: int, reward: float) -> None:
        self.fallback.update(ctx, op, reward)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
