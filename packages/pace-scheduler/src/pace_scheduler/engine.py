"""Pace inside transformers' continuous-batching engine: branching requests on real steps.

transformers' continuous batching (``transformers.generation.continuous_batching``) is a real
serving engine: a paged KV cache with block sharing (blocks whose tokens hash the same are
shared between sequences, so a branch whose prompt is its parent's context re-uses the
parent's KV and only prefills the last, partial block), chunked prefill, and a pluggable
:class:`~transformers.generation.continuous_batching.Scheduler` chosen by name
(``ContinuousBatchingConfig.scheduler_type`` looked up in ``scheduler.SCHEDULER_MAPPING``).

:class:`PaceCBScheduler` is such a scheduler. On top of the engine's FIFO scheduling it runs
*programs*, requests with serial segments and fork points (:class:`~pace_scheduler.workload.
RequestSpec`): a segment is one sequence; at a fork it creates one sequence per branch whose
prompt is the request's context plus a branch header token (the prefix KV is shared through
the engine's block sharing); when every branch is done it creates the next segment, whose
prompt is the context plus every branch's tokens (the join; the engine cannot merge sibling
sequences' KV, so the branch tokens are prefilled once). Branches wait in a side queue; every
step the scheduler keeps one branch of each fork running (the serial fallback: no branch
starves, and IRP-Off is exactly this) and asks a :class:`~pace_scheduler.policies.Policy`
(Pace, IRP-Eager, a fixed cap) which of the others start now, from the same
:class:`~pace_scheduler.admission.StepView` the simulator builds. Every policy is therefore a
scheduler of the same engine.

What the engine's API does not give, and how this module gets by:

- a scheduler instance or constructor arguments: the engine builds its scheduler itself as
  ``cls(cache, safety_margin, max_requests_per_batch)``; :func:`register` makes a subclass
  bound to one policy and registers it under a fresh name in ``SCHEDULER_MAPPING``;
- a per-step hook after the forward pass: :func:`serve` drives the engine's own batch
  processor step by step (``prepare_next_batch``, the forward, ``update_batch``) and calls
  :meth:`PaceCBScheduler.step_done`; in the engine's background thread the scheduler falls back
  to the time between two ``schedule_batch`` calls (which includes idle waits);
- a public single-step call: :func:`serve` uses the manager's ``_create_batch_processor`` and
  the processor's ``_generation_step`` (private in transformers 5.24);
- forking a decoding request later than at its prefill: the engine forks (``num_children``)
  only when a prompt's prefill ends, so late-admitted branches are new sequences that share
  the prefix through block hashing instead.

Time: on a CPU :func:`serve` advances the clock by the thread CPU time of each engine step
(torch runs single-threaded in the calling thread), so the other jobs of a shared machine do
not enter the measurements; on CUDA by the wall time of the step after a device
synchronisation. Idle time (nothing to run) jumps to the next arrival.
"""

from __future__ import annotations

import gc
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from transformers.generation.continuous_batching import scheduler as _cb_scheduler
from transformers.generation.continuous_batching.requests import RequestState, RequestStatus
from transformers.generation.continuous_batching.scheduler import FIFOScheduler

from pace_scheduler.admission import StepView
from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import FEATURES, N_FEATURES, add_sequence
from pace_scheduler.policies import IRPEager, Policy
from pace_scheduler.profile import ProfileConfig
from pace_scheduler.simulator import RunResult
from pace_scheduler.workload import RequestSpec

__all__ = [
    "EngineSession",
    "EngineSetup",
    "PaceCBScheduler",
    "Program",
    "profile_engine",
    "register",
    "serve",
]


@dataclass(frozen=True)
class EngineSetup:
    """The engine's sizes (transformers' names) and what the controller is told.

    ``branch_len_hint`` / ``cp_len_hint``: the workload's mean branch length and mean critical
    path (the controller never sees true lengths). ``warmup``: fraction of the first requests
    left out of the metrics, as in the simulator.
    """

    page_size: int = 16
    num_blocks: int = 2048
    max_batch_tokens: int = 256
    max_requests_per_batch: int = 64
    safety_margin: float = 0.1
    branch_len_hint: float = 24.0
    cp_len_hint: float = 64.0
    warmup: float = 0.1

    def __post_init__(self) -> None:
        for name in ("page_size", "num_blocks", "max_batch_tokens", "max_requests_per_batch"):
            if getattr(self, name) < 1:
                raise PaceSchedulerError(
                    f"engine: field {name!r} must be >= 1, got {getattr(self, name)}"
                )
        if self.page_size < 4:
            raise PaceSchedulerError(
                f"engine: field 'page_size' must be >= 4, got {self.page_size}"
            )
        if not 0 <= self.safety_margin < 1:
            raise PaceSchedulerError(
                f"engine: field 'safety_margin' must be in [0, 1), got {self.safety_margin}"
            )

    def config(self, scheduler_type: str) -> Any:
        """The engine's ``ContinuousBatchingConfig`` (no CUDA graphs, no async double buffer,
        no fast decode path: every policy runs the same synchronous varlen path)."""
        from transformers.generation.configuration_utils import ContinuousBatchingConfig

        return ContinuousBatchingConfig(
            page_size=self.page_size,
            num_blocks=self.num_blocks,
            max_batch_tokens=self.max_batch_tokens,
            max_requests_per_batch=self.max_requests_per_batch,
            max_blocks_per_request=0,
            use_cuda_graph=False,
            use_async_batching=False,
            allow_block_sharing=True,
            scheduler_type=scheduler_type,
            safety_margin=self.safety_margin,
        )


@dataclass
class Program:
    """One branching request being served: where it is, what it has produced, when."""

    spec: RequestSpec
    context: list[int]
    segment: int = 0
    in_fork: bool = False
    pending: deque[RequestState] = field(default_factory=deque)
    running: set[str] = field(default_factory=set)
    branch_tokens: dict[int, list[int]] = field(default_factory=dict)
    unfinished: int = 0
    fork_done_tokens: int = 0
    done_tokens: float = 0.0
    live: dict[str, RequestState] = field(default_factory=dict)
    first_token: float | None = None
    finish: float | None = None
    failed: str | None = None

    def progress(self, live: int) -> float:
        """Critical-path progress ``P_i`` in tokens, ``live`` the tokens its running sequences
        have decoded: serial tokens decoded, plus per fork the tokens of its branches divided
        by their number (a fork of ``k`` branches advances ``w/k`` per step with ``w``
        running, as in the simulator)."""
        if self.in_fork:
            branches = max(len(self.spec.forks[self.segment]), 1)
            return self.done_tokens + (self.fork_done_tokens + live) / branches
        return self.done_tokens + live


class PaceCBScheduler(FIFOScheduler):
    """transformers' FIFO scheduler plus branching programs and per-step branch admission.

    Built by the engine; :func:`register` binds the policy (``policy_factory``) and the hints.
    Plain requests added with ``add_waiting_request`` are scheduled exactly as by
    ``FIFOScheduler``; programs are added with :meth:`submit`.
    """

    policy_factory: ClassVar[Callable[[], Policy]] = IRPEager
    setup: ClassVar[EngineSetup] = EngineSetup()
    vocab_size: ClassVar[int] = 256

    def __init__(self, cache: Any, safety_margin: float | None, max_requests_per_batch: int):
        self.policy: Policy = type(self).policy_factory()
        self.clock: Callable[[], float] = time.perf_counter
        super().__init__(cache, safety_margin, max_requests_per_batch)

    # ------------------------------------------------------------------ state

    def reset(self) -> None:
        super().reset()
        self.programs: dict[str, Program] = {}
        self.owner: dict[str, tuple[str, str, int, int]] = {}  # seq -> (program, kind, k, j)
        self.prompt_len: dict[str, int] = {}  # seq -> tokens of its prompt when created
        self.rejected: list[tuple[str, str]] = []
        self.step_features: list[np.ndarray] = []
        self.step_seconds: list[float] = []
        self.width_sum = 0.0
        self.width_den = 0.0
        self._batch: list[Any] = []
        self._features: np.ndarray | None = None
        self._open = False
        self._started = 0.0
        self._to_stamp: list[Program] = []

    @property
    def page_size(self) -> int:
        pages = [ca.tokens_per_page for ca in self.cache.cache_allocators.values()]
        return int(min(pages)) if pages else type(self).setup.page_size

    @property
    def capacity_tokens(self) -> int:
        """Tokens of KV the whole cache holds."""
        return int(self.cache.num_blocks) * self.page_size

    def has_pending_requests(self) -> bool:
        return super().has_pending_requests() or any(p.pending for p in self.programs.values())

    # ------------------------------------------------------------------ programs

    def submit(self, spec: RequestSpec, prompt_ids: Sequence[int]) -> Program | None:
        """Start serving ``spec`` (its prompt tokens ``prompt_ids``); None when refused.

        A request whose full context (prompt plus every token it will decode, branches
        included) cannot fit in the whole KV cache is refused at once with a reason in
        :attr:`rejected`, rather than admitted to block the queue or starve later.
        """
        if spec.id in self.programs:
            raise PaceSchedulerError(f"request {spec.id!r}: submitted twice")
        if len(prompt_ids) != spec.prompt_tokens:
            raise PaceSchedulerError(
                f"request {spec.id!r}: {len(prompt_ids)} prompt ids for prompt_tokens "
                f"{spec.prompt_tokens}"
            )
        need = spec.prompt_tokens + spec.total_tokens + len(spec.forks)
        if need > self.capacity_tokens:
            self.rejected.append(
                (
                    spec.id,
                    f"needs {need} tokens of KV (prompt {spec.prompt_tokens} + "
                    f"{spec.total_tokens} decoded), the cache holds {self.capacity_tokens}",
                )
            )
            return None
        program = Program(spec=spec, context=list(prompt_ids))
        self.programs[spec.id] = program
        self._start_segment(program, 0)
        return program

    def _new_seq(self, program: Program, sid: str, prompt: list[int], n: int, kind: str,
                 k: int, j: int) -> RequestState:  # fmt: skip
        state = RequestState(request_id=sid, initial_tokens=prompt, max_new_tokens=n,
                             eos_token_id=-1)  # fmt: skip
        self.owner[sid] = (program.spec.id, kind, k, j)
        self.prompt_len[sid] = len(prompt)
        program.live[sid] = state
        return state

    def _start_segment(self, program: Program, k: int) -> None:
        program.segment, program.in_fork = k, False
        n = program.spec.serial_tokens[k]
        sid = f"{program.spec.id}/s{k}"
        self.add_waiting_request(self._new_seq(program, sid, list(program.context), n, "s", k, 0))

    def _start_fork(self, program: Program, k: int) -> None:
        branches = program.spec.forks[k]
        if not branches:
            self._start_segment(program, k + 1)
            return
        program.segment, program.in_fork = k, True
        program.unfinished = len(branches)
        program.branch_tokens = {}
        program.fork_done_tokens = 0
        for j, n in enumerate(branches):
            header = (17 + 31 * j) % type(self).vocab_size  # makes the branches' prompts differ
            sid = f"{program.spec.id}/f{k}/b{j}"
            state = self._new_seq(program, sid, [*program.context, header], n, "b", k, j)
            program.pending.append(state)

    def finish_request(self, request_id: str) -> None:
        state = self.active_requests.get(request_id)
        super().finish_request(request_id)
        owner = self.owner.pop(request_id, None)
        prompt_len = self.prompt_len.pop(request_id, 0)
        if owner is None or state is None:
            return
        program = self.programs[owner[0]]
        program.live.pop(request_id, None)
        if state.status != RequestStatus.FINISHED or state.error is not None:
            program.failed = state.error or f"sequence {request_id} ended as {state.status.name}"
            return
        # a soft reset (the engine's answer to a full cache) moves generated tokens into the
        # prompt of a new state with the same id: count from the original prompt's end
        tokens = [*state.initial_tokens, *state.generated_tokens][prompt_len:]
        self._advance(program, owner, state.request_id, tokens)

    def _live_tokens(self, program: Program) -> int:
        total = 0
        for sid, old in program.live.items():
            st = self.active_requests.get(sid) or self.waiting_requests.get(sid) or old
            total += len(st.initial_tokens) + len(st.generated_tokens) - self.prompt_len[sid]
        return total

    def _advance(
        self, program: Program, owner: tuple[str, str, int, int], sid: str, tokens: list[int]
    ) -> None:
        _, kind, k, j = owner
        spec = program.spec
        if kind == "s":
            program.context.extend(tokens)
            program.done_tokens += len(tokens)
            if k == len(spec.serial_tokens) - 1:
                self._to_stamp.append(program)
            else:
                self._start_fork(program, k)
            return
        program.branch_tokens[j] = tokens
        program.running.discard(sid)
        program.unfinished -= 1
        program.fork_done_tokens += len(tokens)
        if program.unfinished == 0:
            for b in range(len(spec.forks[k])):
                program.context.extend(program.branch_tokens[b])
            program.done_tokens += program.fork_done_tokens / len(spec.forks[k])
            program.in_fork = False
            self._start_segment(program, k + 1)

    def _release(self, program: Program) -> None:
        state = program.pending.popleft()
        program.running.add(state.request_id)
        self.add_waiting_request(state)

    # ------------------------------------------------------------------ the step

    def schedule_batch(self, token_budget: int, cache_budget: int) -> Any:
        now = self.clock()
        if self._open:  # nobody reported the previous step: time it between two calls
            self.step_done(now)
        forks = [p for p in self.programs.values() if p.pending]
        for program in forks:
            if not program.running:  # serial fallback: every fork keeps one branch going
                self._release(program)
        if self.policy.admits and any(p.pending for p in forks):
            self._admit(now, token_budget)
        out = super().schedule_batch(token_budget, cache_budget)
        batch = out[0] if isinstance(out, tuple) else out
        self._batch = list(batch or [])
        self._features = batch_features(self._batch)
        self._open = True
        self._started = now
        return out

    def _admit(self, now: float, token_budget: int) -> None:
        setup = type(self).setup
        in_batch: list[Program] = []
        for program in self.programs.values():
            if (
                program.finish is None
                and program.failed is None
                and (program.pending or any(s in self.active_requests for s in program.live))
            ):
                in_batch.append(program)
        deadline, tpot, bank, remaining, decoding, beneficiary = [], [], [], [], [], []
        cand: list[tuple[int, int, Program]] = []
        for i, program in enumerate(in_batch):
            spec = program.spec
            progress = program.progress(self._live_tokens(program))
            if program.first_token is not None:
                d = program.first_token + spec.tpot_slo * (progress + 1.0)
                bank.append(d - spec.tpot_slo - now)
            else:
                d = spec.arrival + spec.ttft_slo
                bank.append(d - now)
            deadline.append(d)
            tpot.append(spec.tpot_slo)
            remaining.append(max(setup.cp_len_hint - progress, 16.0))
            decoding.append(program.first_token is not None)
            beneficiary.append(bool(program.pending))
            for rank in range(1, len(program.pending) + 1):
                cand.append((i, rank, program))
        if not cand:
            return
        page = self.page_size
        free_blocks = int(self.cache.compute_free_capacity() * self.cache.num_blocks)
        reserve = math.ceil(self.safety_margin * self.cache.num_blocks)
        seats = self.max_requests_per_batch - len(self.active_requests) - len(self.waiting_requests)
        extra = sum(max(len(p.running) - 1, 0) for p in self.programs.values() if p.in_fork)
        view = StepView(
            now=now,
            base=self._predicted_base(token_budget),
            deadline=np.array(deadline),
            tpot=np.array(tpot),
            bank=np.array(bank),
            remaining=np.array(remaining),
            decoding=np.array(decoding, dtype=bool),
            beneficiary=np.array(beneficiary, dtype=bool),
            cand_req=np.array([c[0] for c in cand], dtype=np.int64),
            cand_rank=np.array([float(c[1]) for c in cand]),
            cand_ctx=np.array([float(len(c[2].context) + 1) for c in cand]),
            cand_width=np.array([float(len(c[2].running)) for c in cand]),
            cand_unfinished=np.array([float(c[2].unfinished) for c in cand]),
            cand_len=np.full(len(cand), setup.branch_len_hint),
            cand_blocks=np.full(len(cand), math.ceil(setup.branch_len_hint / page) + 1),
            kv_free_blocks=max(free_blocks - reserve, 0),
            seats_free=max(seats, 0),
            extra_lanes=extra,
        )
        mask = self.policy.admit(view)
        for admitted, (_, _, program) in zip(mask, cand, strict=True):
            if admitted and program.pending:
                self._release(program)

    def _predicted_base(self, token_budget: int) -> np.ndarray:
        """Features of the batch the FIFO scheduler is about to build: every decoding sequence
        and, within the token budget, the prefill chunks of the others."""
        f = np.zeros(N_FEATURES)
        budget = token_budget
        prefilling = []
        for state in self.active_requests.values():
            if state.status == RequestStatus.DECODING:
                f[0] += 1
                f[1] += state.position_offset
                budget -= 1
            else:
                prefilling.append(state)
        prefilling += [self.waiting_requests[r] for r in self.waiting_requests_order
                       if r in self.waiting_requests]  # fmt: skip
        for state in prefilling:
            if budget <= 0:
                break
            p = min(len(state.remaining_prefill_tokens), budget)
            c = state.position_offset
            f[2] += p
            f[3] += p * (c + p / 2.0)
            f[4] += c
            budget -= p
        return f

    def step_done(self, now: float | None = None) -> None:
        """The step scheduled last has run: feed its time to the policy, stamp first tokens
        and finished requests, count branch width."""
        now = self.clock() if now is None else now
        if not self._open:
            return
        self._open = False
        seconds = now - self._started
        if self._features is not None and seconds > 0 and self._batch:
            self.policy.observe(self._features, seconds)
            self.step_features.append(self._features)
            self.step_seconds.append(seconds)
        lanes: dict[str, int] = {}
        for fut in self._batch:
            owner = self.owner.get(fut.state.request_id)
            if owner is None:
                continue
            program = self.programs[owner[0]]
            if program.first_token is None and fut.state.generated_len() >= 1:
                program.first_token = now
            if owner[1] == "b" and fut.query_length == 1:
                lanes[owner[0]] = lanes.get(owner[0], 0) + 1
        self.width_sum += sum(lanes.values())
        self.width_den += len(lanes)
        for program in self._to_stamp:
            program.finish = now
            if program.first_token is None:  # one-token request: first token is the last
                program.first_token = now
        self._to_stamp = []


def batch_features(batch: Sequence[Any]) -> np.ndarray:
    """The latency model's features of a scheduled batch (``FutureRequestState`` list): a
    sequence with one query token is a decode of its past; others are prefill chunks."""
    f = np.zeros(N_FEATURES)
    for fut in batch:
        add_sequence(f, int(fut.query_length), int(fut.state.position_offset))
    return f


_COUNTER = itertools.count()


def register(
    policy_factory: Callable[[], Policy], setup: EngineSetup, vocab_size: int
) -> tuple[str, type[PaceCBScheduler]]:
    """A :class:`PaceCBScheduler` subclass bound to a policy, registered in the engine's
    ``SCHEDULER_MAPPING`` under a fresh name; returns the name and the class."""
    name = f"pace-{next(_COUNTER)}"
    cls: type[PaceCBScheduler] = type(
        "PaceCBScheduler",
        (PaceCBScheduler,),
        {
            "policy_factory": staticmethod(policy_factory),
            "setup": setup,
            "vocab_size": int(vocab_size),
        },
    )
    _cb_scheduler.SCHEDULER_MAPPING[name] = cls
    # continuous_api imported the mapping by name: the same dict object, so this is visible there
    return name, cls


class _Clock:
    """The serving clock the scheduler reads (seconds of engine time since the trace began)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _timer(device: str) -> Callable[[], float]:
    if device.startswith("cuda"):
        import torch

        def wall() -> float:
            torch.cuda.synchronize()
            return time.perf_counter()

        return wall
    return time.thread_time


def _engine(model: Any, setup: EngineSetup, policy_factory: Callable[[], Policy]) -> Any:
    """A fresh engine (manager and batch processor) whose scheduler runs ``policy``."""
    from transformers import GenerationConfig

    vocab = int(model.config.get_text_config().vocab_size)
    name, cls = register(policy_factory, setup, vocab)
    # The engine logs an ERROR when psutil is missing (it cannot size a CPU cache from free
    # memory; ours is sized explicitly): not the user's concern, so it is kept quiet here.
    cb_logger = logging.getLogger("ContinuousBatchingLogger")
    level = cb_logger.level
    cb_logger.setLevel(logging.CRITICAL)
    try:
        gen = GenerationConfig(do_sample=False, eos_token_id=-1, pad_token_id=0)
        manager = model.init_continuous_batching(
            generation_config=gen, continuous_batching_config=setup.config(name)
        )
        processor = manager._create_batch_processor()
        manager.batch_processor = processor
    finally:
        _cb_scheduler.SCHEDULER_MAPPING.pop(name, None)
        cb_logger.setLevel(level)
    if not isinstance(processor.scheduler, cls):
        raise PaceSchedulerError(
            "transformers' continuous batching did not build the registered scheduler "
            f"(got {type(processor.scheduler).__name__}); this transformers version is not "
            "supported"
        )
    return manager, processor


def _step(manager: Any, processor: Any, model: Any) -> bool:
    """One engine step: schedule, forward, update. False when nothing was scheduled."""
    try:
        if not processor.prepare_next_batch():
            return False
        step = getattr(processor, "_generation_step", None)
        if step is not None:
            step(model)
        else:  # older releases keep the step on the manager
            manager._generation_step()
        processor.update_batch()
    except RuntimeError as exc:
        first = (str(exc).strip().splitlines() or ["RuntimeError"])[0]
        raise PaceSchedulerError(f"transformers continuous batching failed: {first}") from None
    return True


def _drain(manager: Any) -> None:
    """Drop the outputs the engine queued for a client (the session reads the scheduler)."""
    router = getattr(manager, "output_router", None)
    q = getattr(router, "output_queue", None)
    if q is None:
        return
    while not q.empty():
        q.get_nowait()


def prompt_ids(spec: RequestSpec, seed: int, vocab: int, index: int) -> list[int]:
    """The prompt tokens of a trace request (random, reproducible: what a random-weight model
    is asked does not change what a scheduler does)."""
    rng = np.random.default_rng([seed, index, 7])
    return [int(t) for t in rng.integers(8, max(vocab, 9), spec.prompt_tokens)]


class EngineSession:
    """One engine (model, paged cache, batch processor, :class:`PaceCBScheduler`) that serves
    runs one after another: :meth:`serve` a trace under a policy, :meth:`profile` a grid.

    Between runs the processor and the cache are reset, the prefix-cache ledger included, so no
    run sees another's cached blocks; the first steps of a session (lazy initialisation) are
    run untimed.
    """

    def __init__(self, model: Any, setup: EngineSetup, device: str = "cpu") -> None:
        self.model = model
        self.setup = setup
        self.device = device
        self._threads: int | None = None
        if not device.startswith("cuda"):
            import torch

            # the clock is this thread's CPU time: torch must compute in this thread only
            self._threads = torch.get_num_threads()
            torch.set_num_threads(1)
        self.manager, self.processor = _engine(model, setup, IRPEager)
        self.scheduler: PaceCBScheduler = self.processor.scheduler
        self.vocab = int(model.config.get_text_config().vocab_size)
        self.timer = _timer(device)
        self._warm()

    def __enter__(self) -> EngineSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the engine now, while the interpreter can still run transformers' finaliser
        (at exit it fails on a half torn-down interpreter)."""
        if getattr(self, "processor", None) is None:
            return
        self.processor.inputs_and_outputs = None
        self.manager.batch_processor = None
        self.processor = None
        self.manager = None
        gc.collect()
        if self._threads is not None:
            import torch

            torch.set_num_threads(self._threads)

    def _reset(self, policy_factory: Callable[[], Policy]) -> _Clock:
        self.processor.reset()
        reset_cache = getattr(self.processor.cache, "reset", None)
        if reset_cache is not None:  # frees every block and clears the prefix-cache ledger
            reset_cache()
        self.scheduler.policy = policy_factory()
        clock = _Clock()
        self.scheduler.clock = clock
        return clock

    def _step(self) -> bool:
        return _step(self.manager, self.processor, self.model)

    def _warm(self) -> None:
        import torch

        self._reset(IRPEager)
        with torch.inference_mode():
            for w in range(2):
                state = RequestState(request_id=f"warm{w}", initial_tokens=[8] * 24,
                                     max_new_tokens=3, eos_token_id=-1)  # fmt: skip
                self.scheduler.add_waiting_request(state)
                while self._step():
                    self.scheduler.step_done()
        _drain(self.manager)

    def serve(
        self,
        requests: Sequence[RequestSpec],
        policy_factory: Callable[[], Policy],
        *,
        seed: int = 0,
        name: str | None = None,
    ) -> RunResult:
        """Serve ``requests`` with a fresh policy from ``policy_factory`` (see :func:`serve`)."""
        import torch

        if not requests:
            raise PaceSchedulerError("serve: no requests")
        reqs = sorted(requests, key=lambda r: r.arrival)
        started = time.perf_counter()
        clock = self._reset(policy_factory)
        scheduler = self.scheduler
        horizon = max(r.arrival + r.ttft_slo + r.tpot_slo * r.critical_path for r in reqs)
        programs: list[Program | None] = []
        i, steps = 0, 0
        with torch.inference_mode():
            while True:
                while i < len(reqs) and reqs[i].arrival <= clock.t:
                    ids = prompt_ids(reqs[i], seed, self.vocab, i)
                    programs.append(scheduler.submit(reqs[i], ids))
                    i += 1
                if not scheduler.has_pending_requests():
                    if i >= len(reqs):
                        break
                    clock.t = max(clock.t, reqs[i].arrival)
                    continue
                if clock.t > horizon:
                    break
                t0 = self.timer()
                ran = self._step()
                clock.t += self.timer() - t0
                scheduler.step_done()
                _drain(self.manager)
                if ran:
                    steps += 1
                elif i < len(reqs):
                    clock.t = max(clock.t, reqs[i].arrival)
                else:
                    raise PaceSchedulerError(
                        "serve: the engine scheduled nothing while requests were pending"
                    )
        programs += [None] * (len(reqs) - i)  # arrivals after the horizon are never served
        result = _result(
            reqs, programs, scheduler, self.setup, steps, time.perf_counter() - started
        )
        result.policy = name or scheduler.policy.name
        return result

    def profile(
        self,
        grid: ProfileConfig | None = None,
        *,
        seed: int = 0,
        progress: Callable[[], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Real engine steps over a grid (see :func:`profile_engine`)."""
        import torch

        grid = grid or ProfileConfig()
        for b in grid.batch_sizes:
            if b > self.setup.max_requests_per_batch:
                raise PaceSchedulerError(
                    f"profile: batch size {b} exceeds max_requests_per_batch "
                    f"{self.setup.max_requests_per_batch}"
                )
        clock = self._reset(IRPEager)
        scheduler = self.scheduler
        rng = np.random.default_rng(seed)
        records: list[dict[str, Any]] = []
        with torch.inference_mode():
            for b in grid.batch_sizes:
                for c in grid.contexts:
                    for r in range(b):
                        ids = [int(t) for t in rng.integers(8, max(self.vocab, 9), c)]
                        scheduler.add_waiting_request(
                            RequestState(request_id=f"p{b}x{c}/{r}", initial_tokens=ids,
                                         max_new_tokens=grid.new_tokens, eos_token_id=-1)
                        )  # fmt: skip
                    before = len(scheduler.step_seconds)
                    while True:
                        t0 = self.timer()
                        ran = self._step()
                        clock.t += self.timer() - t0
                        scheduler.step_done()
                        if not ran:
                            break
                    _drain(self.manager)
                    new = zip(
                        scheduler.step_features[before:],
                        scheduler.step_seconds[before:],
                        strict=True,
                    )
                    for x, sec in new:
                        rec: dict[str, Any] = dict(zip(FEATURES, map(float, x), strict=True))
                        rec.update(kind="decode" if x[2] == 0 else "mixed", batch=b, context=c,
                                   seconds=float(sec))  # fmt: skip
                        records.append(rec)
                    if progress is not None:
                        progress()
        return records


def serve(
    requests: Sequence[RequestSpec],
    model: Any,
    policy_factory: Callable[[], Policy],
    setup: EngineSetup,
    *,
    seed: int = 0,
    device: str = "cpu",
    name: str | None = None,
) -> RunResult:
    """Serve ``requests`` in transformers' continuous-batching engine with ``policy``.

    Arrivals are injected when the serving clock passes them; the clock advances by each
    step's measured time (module doc). The run stops when every request is done or at the
    last SLO deadline (after it nobody can still meet an SLO), as in the simulator. Metrics
    are those of :func:`pace_scheduler.simulator.simulate`, over the same requests. One-off:
    an :class:`EngineSession` serves many runs on one engine.
    """
    with EngineSession(model, setup, device) as session:
        return session.serve(requests, policy_factory, seed=seed, name=name)


def _result(
    reqs: Sequence[RequestSpec],
    programs: Sequence[Program | None],
    scheduler: PaceCBScheduler,
    setup: EngineSetup,
    steps: int,
    wall: float,
) -> RunResult:
    n = len(reqs)
    arrival = np.array([r.arrival for r in reqs])
    first = np.array([p.first_token if p and p.first_token is not None else np.nan
                      for p in programs])  # fmt: skip
    finish = np.array([p.finish if p and p.finish is not None else np.nan for p in programs])
    lcp = np.array([r.critical_path for r in reqs], dtype=float)
    ttft_slo = np.array([r.ttft_slo for r in reqs])
    tpot = np.array([r.tpot_slo for r in reqs])
    keep = np.arange(n) >= int(setup.warmup * n)
    finished = ~np.isnan(finish)
    ttft = first - arrival
    per_token = (finish - first) / lcp
    met = finished & (ttft <= ttft_slo) & (per_token <= tpot)
    span = float(arrival[keep][-1] - arrival[keep][0]) if keep.sum() > 1 else 1.0
    seconds = np.array(scheduler.step_seconds)
    features = np.array(scheduler.step_features).reshape(-1, N_FEATURES)
    return RunResult(
        policy=scheduler.policy.name,
        arrival=arrival[keep],
        ttft=ttft[keep],
        per_token=per_token[keep],
        met=met[keep],
        finished=finished[keep],
        duration=max(span, 1e-9),
        steps=steps,
        mean_width=scheduler.width_sum / scheduler.width_den if scheduler.width_den else 1.0,
        step_seconds=float(seconds.mean()) if seconds.size else 0.0,
        sim_wall=wall,
        decision_seconds=list(scheduler.policy.decision_seconds),
        events=n,
        rejected=list(scheduler.rejected),
        step_features=features,
        step_times=seconds,
    )


def profile_engine(
    model: Any,
    setup: EngineSetup,
    grid: ProfileConfig | None = None,
    *,
    device: str = "cpu",
    seed: int = 0,
    progress: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Real engine steps over a grid: for each (batch ``b``, context ``c``) ``b`` plain
    requests of ``c`` prompt tokens decode ``new_tokens`` tokens each; every step (prefill
    chunks and decodes) is recorded with its features and measured seconds (thread CPU time on
    a CPU). What ``T̂`` is fitted to before Pace serves in this engine."""
    with EngineSession(model, setup, device) as session:
        return session.profile(grid, seed=seed, progress=progress)
