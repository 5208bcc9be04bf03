"""Pace inside vLLM: a ``Scheduler`` subclass for ``--scheduler-cls`` and a client helper.

Targets the vLLM v1 engine (``vllm.v1.core.sched.scheduler.Scheduler``; written against the
0.10/0.11 interface). vLLM is imported lazily, only when ``PaceScheduler`` is first resolved, so
this module imports (and the package tests run) without vLLM installed::

    vllm serve Qwen/Qwen3-32B --scheduler-cls pace_scheduler.vllm_plugin.PaceScheduler \\
        --enable-prefix-caching

How branches reach the scheduler: the client submits every branch of a fork as its own request
whose prompt is the parent's prefix plus the branch header (prefix caching makes its prefill
nearly free), tagged through ``SamplingParams.extra_args["pace"]`` (:func:`branch_extra_args`).
Branch 0 of a fork runs like any request (the parent keeps decoding); branches ``j >= 1`` are
held in a side queue, and before every ``schedule()`` the Pace controller moves the admitted ones
into ``self.waiting``. The time between consecutive ``schedule()`` calls is the measured step
time that refits the latency model online; free KV blocks come from the KV cache manager.

Environment: ``PACE_LATENCY_MODEL`` (a ``fit.json`` from ``pace profile``; default the H200 /
Qwen3-32B model), ``PACE_TPOT_SLO_MS`` (default 50) and ``PACE_TTFT_SLO_MS`` (default 1000) for
requests that carry no SLO tag.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pace_scheduler.admission import PaceController, StepView
from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import H200_QWEN3_32B, LatencyModel

__all__ = [
    "PACE_KEY",
    "BranchRequest",
    "branch_extra_args",
    "branch_requests",
    "make_scheduler_class",
    "register",
    "submit_branches",
]

#: The ``SamplingParams.extra_args`` key carrying a branch's tag.
PACE_KEY = "pace"


def branch_extra_args(
    parent: str,
    branch: int,
    *,
    fork: int = 0,
    tpot_slo_ms: float | None = None,
    ttft_slo_ms: float | None = None,
    expected_tokens: int | None = None,
) -> dict[str, Any]:
    """The ``extra_args`` that tag a request as branch ``branch`` of ``parent``'s fork ``fork``."""
    if branch < 0 or fork < 0:
        raise PaceSchedulerError(f"branch tag: branch and fork must be >= 0, got {branch}, {fork}")
    for name, value in (("tpot_slo_ms", tpot_slo_ms), ("ttft_slo_ms", ttft_slo_ms)):
        if value is not None and not value > 0:
            raise PaceSchedulerError(f"branch tag: field {name!r} must be > 0, got {value}")
    tag: dict[str, Any] = {"parent": parent, "branch": branch, "fork": fork}
    if tpot_slo_ms is not None:
        tag["tpot_slo_ms"] = float(tpot_slo_ms)
    if ttft_slo_ms is not None:
        tag["ttft_slo_ms"] = float(ttft_slo_ms)
    if expected_tokens is not None:
        tag["expected_tokens"] = int(expected_tokens)
    return {PACE_KEY: tag}


class BranchRequest(tuple[str, dict[str, Any]]):
    """``(prompt, extra_args)`` of one branch; a tuple so it unpacks."""

    __slots__ = ()

    @property
    def prompt(self) -> str:
        return self[0]

    @property
    def extra_args(self) -> dict[str, Any]:
        return self[1]


def branch_requests(
    parent: str,
    prefix: str,
    headers: Sequence[str],
    *,
    fork: int = 0,
    tpot_slo_ms: float | None = None,
    expected_tokens: int | None = None,
) -> list[BranchRequest]:
    """One request per branch header, all sharing ``prefix`` (so the prefix KV is shared)."""
    if not headers:
        raise PaceSchedulerError(f"fork {fork} of {parent!r}: no branch headers")
    return [
        BranchRequest(
            (
                prefix + header,
                branch_extra_args(
                    parent,
                    j,
                    fork=fork,
                    tpot_slo_ms=tpot_slo_ms,
                    expected_tokens=expected_tokens,
                ),
            )
        )
        for j, header in enumerate(headers)
    ]


async def submit_branches(
    engine: Any,
    parent: str,
    prefix: str,
    headers: Sequence[str],
    sampling_params: Any,
    *,
    fork: int = 0,
    tpot_slo_ms: float | None = None,
) -> list[str]:
    """Submit a fork's branches to a vLLM ``AsyncLLM`` and return each branch's final text.

    Every branch is ``generate``-d as its own request id ``{parent}/f{fork}/b{j}``, tagged so a
    ``PaceScheduler`` admits branches 1.. only when the batch has slack.
    """
    import asyncio

    async def one(j: int, req: BranchRequest) -> str:
        params = sampling_params.clone()
        params.extra_args = {**(params.extra_args or {}), **req.extra_args}
        text = ""
        async for out in engine.generate(req.prompt, params, f"{parent}/f{fork}/b{j}"):
            text = out.outputs[0].text
        return text

    reqs = branch_requests(
        parent,
        prefix,
        headers,
        fork=fork,
        tpot_slo_ms=tpot_slo_ms,
        expected_tokens=getattr(sampling_params, "max_tokens", None),
    )
    return list(await asyncio.gather(*(one(j, r) for j, r in enumerate(reqs))))


def _tag(request: Any) -> dict[str, Any] | None:
    params = getattr(request, "sampling_params", None)
    extra = getattr(params, "extra_args", None) or {}
    tag = extra.get(PACE_KEY)
    return tag if isinstance(tag, dict) else None


def _default_model() -> LatencyModel:
    path = os.environ.get("PACE_LATENCY_MODEL")
    return LatencyModel.load(path) if path else H200_QWEN3_32B.latency_model()


def make_scheduler_class() -> type:
    """Build ``PaceScheduler`` on top of the installed vLLM's v1 ``Scheduler`` (imports vLLM)."""
    try:
        from vllm.v1.core.sched.scheduler import Scheduler
    except ImportError as exc:
        raise PaceSchedulerError(
            f"PaceScheduler needs vLLM (pip install 'pace-scheduler[vllm]'): {exc}"
        ) from None

    class PaceScheduler(Scheduler):  # type: ignore[misc, valid-type]
        """vLLM's scheduler with Pace admission of tagged branches (see the module doc)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.pace = PaceController.from_model(_default_model())
            self.pace_side: dict[str, Any] = {}
            self.pace_seen: dict[str, tuple[float, float | None]] = {}
            self.pace_prev: tuple[float, np.ndarray] | None = None
            self.pace_tpot = float(os.environ.get("PACE_TPOT_SLO_MS", "50")) / 1e3
            self.pace_ttft = float(os.environ.get("PACE_TTFT_SLO_MS", "1000")) / 1e3

        # -- requests
        def add_request(self, request: Any) -> None:
            self.pace_seen[request.request_id] = (time.monotonic(), None)
            tag = _tag(request)
            if tag is not None and int(tag.get("branch", 0)) > 0:
                self.pace_side[request.request_id] = request
                self.requests[request.request_id] = request
                return
            super().add_request(request)

        def finish_requests(self, request_ids: Any, finished_status: Any) -> Any:
            ids = [request_ids] if isinstance(request_ids, str) else list(request_ids)
            for rid in ids:
                if rid in self.pace_side:  # aborted before admission: never reached the queues
                    self.pace_side.pop(rid)
                    self.requests.pop(rid, None)
                self.pace_seen.pop(rid, None)
            return super().finish_requests(ids, finished_status)

        def get_num_unfinished_requests(self) -> int:
            return int(super().get_num_unfinished_requests()) + len(self.pace_side)

        def has_unfinished_requests(self) -> bool:
            return bool(self.pace_side) or bool(super().has_unfinished_requests())

        # -- the step
        def schedule(self) -> Any:
            now = time.monotonic()
            if self.pace_prev is not None:  # the previous step ran between the two calls
                started, features = self.pace_prev
                self.pace.observe(features, now - started)
            if self.pace_side:
                self._pace_admit(now)
            out = super().schedule()
            self.pace_prev = (now, self._pace_features())
            return out

        def _pace_features(self) -> np.ndarray:
            n_dec = 0.0
            sum_ctx = 0.0
            p_tok = 0.0
            p_attn = 0.0
            for req in self.running:
                done = float(req.num_computed_tokens)
                todo = float(max(req.num_tokens - req.num_computed_tokens, 1))
                if todo <= 1:
                    n_dec += 1
                    sum_ctx += done
                else:
                    p_tok += todo
                    p_attn += todo * (done + todo / 2)
            return np.array([n_dec, sum_ctx, p_tok, p_attn])

        def _pace_admit(self, now: float) -> None:
            running = list(self.running)
            base = self._pace_features()
            deadline, tpot, bank, ben, remaining, decoding = [], [], [], [], [], []
            parents: dict[str, int] = {}
            for i, req in enumerate(running):
                tag = _tag(req) or {}
                tau = float(tag.get("tpot_slo_ms", self.pace_tpot * 1e3)) / 1e3
                arrived, first = self.pace_seen.get(req.request_id, (now, None))
                out_tokens = int(getattr(req, "num_output_tokens", 0))
                if first is None and out_tokens > 0:
                    first = now
                    self.pace_seen[req.request_id] = (arrived, first)
                if first is None:
                    ttft = float(tag.get("ttft_slo_ms", self.pace_ttft * 1e3)) / 1e3
                    d = arrived + ttft
                    bank.append(d - now)
                else:
                    d = first + tau * (out_tokens + 1)
                    bank.append(d - tau - now)
                deadline.append(d)
                tpot.append(tau)
                max_tokens = getattr(req.sampling_params, "max_tokens", None) or 256
                remaining.append(float(max(int(max_tokens) - out_tokens, 16)))
                decoding.append(first is not None)
                if "parent" in tag:
                    parents.setdefault(str(tag["parent"]), i)
                ben.append(False)
            pending = list(self.pace_side.values())
            width = {p: 0 for p in parents}
            for req in running:
                tag = _tag(req) or {}
                if "parent" in tag:
                    width[str(tag["parent"])] = width.get(str(tag["parent"]), 0) + 1
            cand, rank, ctx, wid, unf, ln, blocks = [], [], [], [], [], [], []
            per_parent: dict[str, int] = {}
            total: dict[str, int] = {}
            for req in pending:
                key = str((_tag(req) or {}).get("parent"))
                total[key] = total.get(key, 0) + 1
            block = int(getattr(self, "block_size", 16) or 16)
            for req in pending:
                tag = _tag(req) or {}
                parent = str(tag.get("parent"))
                if parent not in parents:  # its parent is not running (yet): admit normally
                    parents[parent] = len(deadline)
                    deadline.append(now + self.pace_tpot)
                    tpot.append(self.pace_tpot)
                    bank.append(0.0)
                    remaining.append(16.0)
                    decoding.append(True)
                    ben.append(True)
                ben[parents[parent]] = True
                per_parent[parent] = per_parent.get(parent, 0) + 1
                expected = int(tag.get("expected_tokens") or 256)
                cand.append(parents[parent])
                rank.append(per_parent[parent])
                ctx.append(len(req.prompt_token_ids))
                wid.append(max(width.get(parent, 1), 1))
                unf.append(max(width.get(parent, 1), 1) + total[parent])
                ln.append(expected)
                blocks.append(-(-expected // block))
            free_blocks = int(self.kv_cache_manager.block_pool.get_num_free_blocks())
            seats = int(self.max_num_running_reqs) - len(self.running) - len(self.waiting)
            view = StepView(
                now=now,
                base=base,
                deadline=np.array(deadline),
                tpot=np.array(tpot),
                bank=np.array(bank),
                remaining=np.array(remaining),
                decoding=np.array(decoding, dtype=bool),
                beneficiary=np.array(ben, dtype=bool),
                cand_req=np.array(cand, dtype=np.int64),
                cand_rank=np.array(rank, dtype=float),
                cand_ctx=np.array(ctx, dtype=float),
                cand_width=np.array(wid, dtype=float),
                cand_unfinished=np.array(unf, dtype=float),
                cand_len=np.array(ln, dtype=float),
                cand_blocks=np.array(blocks, dtype=np.int64),
                kv_free_blocks=free_blocks,
                seats_free=max(seats, 0),
            )
            mask = self.pace.decide(view)
            add = getattr(self.waiting, "add_request", None) or self.waiting.append
            for req, ok in zip(pending, mask, strict=True):
                if ok:
                    self.pace_side.pop(req.request_id)
                    add(req)

    PaceScheduler.__module__ = __name__
    PaceScheduler.__qualname__ = "PaceScheduler"
    return PaceScheduler


_CLASS: type | None = None


def __getattr__(name: str) -> Any:
    """``pace_scheduler.vllm_plugin.PaceScheduler`` resolves lazily (vLLM imported here)."""
    global _CLASS
    if name == "PaceScheduler":
        if _CLASS is None:
            _CLASS = make_scheduler_class()
        return _CLASS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register() -> None:
    """``vllm.general_plugins`` entry point: cheap and safe in every vLLM process.

    Nothing to register globally (the scheduler is chosen with ``--scheduler-cls``); resolving
    the class here surfaces an incompatible vLLM at start-up rather than at the first request.
    """
    with contextlib.suppress(PaceSchedulerError):
        __getattr__("PaceScheduler")
