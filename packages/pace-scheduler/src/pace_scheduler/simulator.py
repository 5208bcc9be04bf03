"""A discrete-event simulator of a continuous-batching engine serving branching requests.

Events are arrivals and step completions. Each step the engine (vLLM-like):

1. decodes one token for every running sequence;
2. spends the rest of its token budget (``max_batched_tokens``) on chunked prefill, first of
   requests already prefilling, then of waiting requests admitted first come first served while
   a sequence slot and the prompt's KV blocks (plus a watermark) are free;
3. asks the branch-admission policy which pending branches start now (each a new sequence that
   shares its request's prefix KV, so only its own tokens take new blocks);
4. prices the step with the true latency model times lognormal noise, advances the clock, and
   feeds the measured step back to the policy.

A request's own sequence (its "parent") decodes the serial segments and, at a fork, the first
branch, then any branches still pending one after another; admitted branches get their own
sequence and leave when done. The segment after a fork starts when every branch has finished
and reads all of them (the join). KV is counted in blocks: each request's shared prefix once,
plus each sequence's own tokens; a sequence that needs a block when none is free skips the step
(a simplification of vLLM's preemption, rare at these loads).

The per-step batch math (contexts, KV blocks, progress) is numpy over sequence slots; Python
only runs per event (arrival, segment end, branch end).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pace_scheduler.admission import StepView
from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import LatencyModel
from pace_scheduler.policies import Policy
from pace_scheduler.workload import RequestSpec

__all__ = ["EngineConfig", "RunResult", "simulate"]

NOT_ARRIVED, WAITING, PREFILL, SERIAL, FORK, DONE = -1, 0, 1, 2, 3, 4


@dataclass(frozen=True)
class EngineConfig:
    """The serving engine's limits (vLLM names) and the simulator's run limits.

    ``branch_len_hint`` and ``cp_len_hint`` are what the engine tells the controller about work
    it has not run yet (the workload's mean branch length and mean critical path; a request's
    expected remaining critical path is ``max(cp_len_hint − progress, 16)``); the controller
    never sees true lengths.
    The run stops once every request is done or the last SLO deadline
    (``max_i arrival_i + TTFT_i + τ_i·L_cp,i``) has passed: after it no request can still meet
    its SLO, so unfinished ones are counted as misses. ``warmup``: fraction of the first
    requests left out of the metrics (the empty system at the start is lighter than the steady
    state).
    """

    kv_blocks: int = 13_000
    block_size: int = 16
    max_num_seqs: int = 256
    max_batched_tokens: int = 2048
    watermark: float = 0.01
    cascade_attention: bool = False
    branch_len_hint: float = 256.0
    cp_len_hint: float = 540.0
    warmup: float = 0.1

    def __post_init__(self) -> None:
        for name in ("kv_blocks", "block_size", "max_num_seqs", "max_batched_tokens"):
            if getattr(self, name) < 1:
                raise PaceSchedulerError(
                    f"engine: field {name!r} must be >= 1, got {getattr(self, name)}"
                )
        if not 0 <= self.warmup < 1:
            raise PaceSchedulerError(f"engine: field 'warmup' must be in [0, 1), got {self.warmup}")


@dataclass
class RunResult:
    """What one simulated run measured (per request arrays plus run totals)."""

    policy: str
    arrival: np.ndarray
    ttft: np.ndarray
    per_token: np.ndarray
    met: np.ndarray
    finished: np.ndarray
    duration: float
    steps: int
    mean_width: float
    step_seconds: float
    sim_wall: float
    decision_seconds: list[float] = field(default_factory=list)
    events: int = 0
    preemptions: int = 0
    #: ``(request id, reason)`` of requests refused at admission (a prompt larger than the
    #: whole KV cache): they count as SLO misses and never block the queue behind them.
    rejected: list[tuple[str, str]] = field(default_factory=list)
    #: Per step, the latency model's features and the measured seconds (real engines only).
    step_features: np.ndarray | None = None
    step_times: np.ndarray | None = None

    @property
    def goodput(self) -> float:
        """Requests per second that finished within their SLOs (over the arrival window)."""
        return float(self.met.sum() / self.duration)

    @property
    def attainment(self) -> float:
        return float(self.met.mean())

    def per_token_quantile(self, q: float) -> float:
        done = self.per_token[self.finished]
        return float(np.quantile(done, q)) if done.size else float("nan")


def _blocks(tokens: np.ndarray | int, size: int) -> np.ndarray:
    return -(-np.asarray(tokens) // size)


def simulate(
    requests: Sequence[RequestSpec],
    model: LatencyModel,
    policy: Policy,
    engine: EngineConfig | None = None,
    seed: int = 0,
) -> RunResult:
    """Serve ``requests`` with ``policy`` on a batch whose steps cost ``model`` (plus noise)."""
    eng = engine or EngineConfig()
    if not requests:
        raise PaceSchedulerError("simulate: no requests")
    reqs = sorted(requests, key=lambda r: r.arrival)
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    n = len(reqs)
    bs = eng.block_size
    # ---- per-request state
    arrival = np.array([r.arrival for r in reqs])
    prompt = np.array([r.prompt_tokens for r in reqs], dtype=np.int64)
    ttft_slo = np.array([r.ttft_slo for r in reqs])
    tpot = np.array([r.tpot_slo for r in reqs])
    lcp = np.array([r.critical_path for r in reqs], dtype=float)
    state = np.full(n, NOT_ARRIVED)
    prefilled = np.zeros(n, dtype=np.int64)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    progress = np.zeros(n)
    shared = np.zeros(n, dtype=np.int64)  # tokens of the request's shared KV (prefix + joins)
    req_blocks = np.zeros(n, dtype=np.int64)
    seg = np.zeros(n, dtype=np.int64)
    unfinished = np.zeros(n, dtype=np.int64)  # branches of the current fork not yet done
    width = np.zeros(n, dtype=np.int64)  # sequences of the request decoding
    parent_slot = np.full(n, -1)
    pending: list[deque[int]] = [deque() for _ in range(n)]
    n_pending = np.zeros(n, dtype=np.int64)
    # ---- per-slot (sequence) state
    m = eng.max_num_seqs
    used = np.zeros(m, dtype=bool)
    active = np.zeros(m, dtype=bool)  # decodes this step
    lane_req = np.zeros(m, dtype=np.int64)
    ctx = np.zeros(m, dtype=np.int64)
    rem = np.zeros(m, dtype=np.int64)
    own = np.zeros(m, dtype=np.int64)
    is_parent = np.zeros(m, dtype=bool)
    free_slots = list(range(m - 1, -1, -1))
    waiting: deque[int] = deque()
    prefilling: list[int] = []
    rejected: list[tuple[str, str]] = []
    kv_req_total = 0  # blocks held by requests' shared prefixes
    kv_own_total = 0  # blocks held by sequences' own tokens
    watermark = int(eng.watermark * eng.kv_blocks)

    t = 0.0
    next_arrival = 0
    done_count = 0
    steps = 0
    events = 0
    preemptions = 0
    width_sum = 0.0
    width_den = 0.0
    step_total = 0.0
    horizon = float((arrival + ttft_slo + tpot * lcp).max())
    noise_sigma = float(np.sqrt(np.log1p(model.noise_cv**2)))
    noise = np.ones(0)
    coef = (model.alpha, model.weights, model.beta, model.gamma, model.delta, model.eps, model.zeta)

    def free_kv() -> int:
        return eng.kv_blocks - kv_req_total - kv_own_total

    def merge_own(slot: int) -> None:
        """A sequence's own tokens become part of its request's shared KV."""
        nonlocal kv_req_total, kv_own_total
        r = int(lane_req[slot])
        extra = -(-int(own[slot]) // bs)
        req_blocks[r] += extra
        kv_req_total += extra
        kv_own_total -= extra
        shared[r] += own[slot]
        own[slot] = 0

    def release(slot: int) -> None:
        used[slot] = False
        active[slot] = False
        free_slots.append(slot)

    def start_serial(r: int, slot: int) -> None:
        spec = reqs[r]
        state[r] = SERIAL
        ctx[slot] = shared[r]
        rem[slot] = spec.serial_tokens[seg[r]]
        active[slot] = True
        width[r] = 1

    def end_serial(r: int, slot: int) -> None:
        nonlocal kv_req_total, done_count
        spec = reqs[r]
        merge_own(slot)
        f = int(seg[r])
        if f >= len(spec.forks):
            state[r] = DONE
            finish[r] = t
            done_count += 1
            kv_req_total -= int(req_blocks[r])
            req_blocks[r] = 0
            width[r] = 0
            release(slot)
            return
        branches = spec.forks[f]
        if not branches:
            seg[r] += 1
            start_serial(r, slot)
            return
        state[r] = FORK
        unfinished[r] = len(branches)
        pending[r].extend(branches[1:])
        n_pending[r] = len(branches) - 1
        rem[slot] = branches[0]

    def preempt(r: int) -> None:
        """Free every block and sequence of ``r`` and queue it first again (recompute)."""
        nonlocal kv_req_total, kv_own_total
        for slot in np.flatnonzero(used & (lane_req == r)):
            kv_own_total -= -(-int(own[slot]) // bs)
            own[slot] = 0
            release(int(slot))
        kv_req_total -= int(req_blocks[r])
        req_blocks[r] = 0
        state[r] = WAITING
        prefilled[r] = shared[r] = seg[r] = unfinished[r] = n_pending[r] = width[r] = 0
        progress[r] = 0.0
        pending[r].clear()
        waiting.appendleft(r)

    def join(r: int) -> None:
        slot = int(parent_slot[r])
        merge_own(slot)
        seg[r] += 1
        start_serial(r, slot)

    while done_count < n and t <= horizon:
        while next_arrival < n and arrival[next_arrival] <= t:
            state[next_arrival] = WAITING
            waiting.append(next_arrival)
            next_arrival += 1
        if not used.any() and not waiting:
            if next_arrival >= n:
                break
            t = float(arrival[next_arrival])
            continue
        # ---- 1. decodes and chunked prefill
        dec = used & active
        budget = eng.max_batched_tokens - int(np.count_nonzero(dec))
        chunk_req: list[int] = []
        chunk_p: list[int] = []
        for r in prefilling:
            if budget <= 0:
                break
            p = int(min(prompt[r] - prefilled[r], budget))
            chunk_req.append(r)
            chunk_p.append(p)
            budget -= p
        kv_free = free_kv()
        while waiting and budget > 0 and free_slots:
            r = waiting[0]
            need = -(-int(prompt[r]) // bs)
            if need + watermark > eng.kv_blocks:
                # can never fit, even in an empty cache: refuse it (vLLM refuses a prompt
                # longer than its KV capacity at add time) instead of blocking the queue
                waiting.popleft()
                state[r] = DONE
                done_count += 1
                rejected.append(
                    (
                        reqs[r].id,
                        f"prompt of {int(prompt[r])} tokens needs {need} KV blocks, the cache "
                        f"has {eng.kv_blocks} ({watermark} kept free)",
                    )
                )
                continue
            if need + watermark > kv_free:
                break
            waiting.popleft()
            slot = free_slots.pop()
            used[slot] = True
            active[slot] = False
            lane_req[slot] = r
            is_parent[slot] = True
            own[slot] = 0
            parent_slot[r] = slot
            state[r] = PREFILL
            req_blocks[r] = need
            kv_req_total += need
            kv_free -= need
            prefilling.append(r)
            p = int(min(prompt[r], budget))
            chunk_req.append(r)
            chunk_p.append(p)
            budget -= p
        p_tok = float(sum(chunk_p))
        p_attn = float(
            sum(p * (int(prefilled[r]) + p / 2.0) for r, p in zip(chunk_req, chunk_p, strict=True))
        )
        p_ctx = float(sum(int(prefilled[r]) for r in chunk_req))
        base = np.array([float(np.count_nonzero(dec)), float(ctx[dec].sum()), p_tok, p_attn, p_ctx])
        # ---- 2. branch admission
        cand_owner = np.flatnonzero(n_pending > 0) if policy.admits else np.zeros(0, np.int64)
        if cand_owner.size and free_slots:
            in_batch = np.unique(lane_req[used])
            in_batch = in_batch[state[in_batch] != DONE]
            pos = np.searchsorted(in_batch, cand_owner)
            counts = n_pending[cand_owner]
            cand_req = np.repeat(pos, counts)
            starts = np.cumsum(counts) - counts
            rank = np.arange(counts.sum()) - np.repeat(starts, counts) + 1
            owner_rep = np.repeat(cand_owner, counts)
            started_decoding = ~np.isnan(first[in_batch])
            deadline = np.where(
                started_decoding,
                first[in_batch] + tpot[in_batch] * (progress[in_batch] + 1.0),
                arrival[in_batch] + ttft_slo[in_batch],
            )
            bank = np.where(
                started_decoding,
                deadline - tpot[in_batch] - t,
                deadline - t,
            )
            beneficiary = n_pending[in_batch] > 0
            remaining = np.maximum(eng.cp_len_hint - progress[in_batch], 16.0)
            kv_free = free_kv()
            view = StepView(
                now=t,
                base=base,
                deadline=deadline,
                tpot=tpot[in_batch],
                bank=bank,
                remaining=remaining,
                decoding=started_decoding,
                beneficiary=beneficiary,
                cand_req=cand_req,
                cand_rank=rank.astype(float),
                cand_ctx=shared[owner_rep].astype(float),
                cand_width=width[owner_rep].astype(float),
                cand_unfinished=unfinished[owner_rep].astype(float),
                cand_len=np.full(cand_req.size, eng.branch_len_hint),
                cand_blocks=_blocks(np.full(cand_req.size, int(eng.branch_len_hint)), bs).astype(
                    np.int64
                ),
                kv_free_blocks=max(kv_free - watermark, 0),
                seats_free=len(free_slots),
                extra_lanes=int((used & ~is_parent).sum()),
            )
            mask = policy.admit(view)
            if mask.any():
                admitted = np.bincount(owner_rep[mask], minlength=n)
                for r in np.flatnonzero(admitted).tolist():
                    for _ in range(int(admitted[r])):
                        slot = free_slots.pop()
                        used[slot] = True
                        active[slot] = True
                        lane_req[slot] = r
                        is_parent[slot] = False
                        ctx[slot] = shared[r]
                        own[slot] = 0
                        rem[slot] = pending[r].popleft()
                        n_pending[r] -= 1
                        width[r] += 1
                        events += 1
                dec = used & active
                base[0] = float(dec.sum())
                base[1] = float(ctx[dec].sum())
        # ---- 3. KV blocks for this step's new tokens
        need_block = dec & (own % bs == 0)
        needed = int(np.count_nonzero(need_block))
        if needed > free_kv():
            # out of blocks: preempt the newest running requests (they restart), as vLLM does
            while needed > free_kv():
                running = np.flatnonzero((state == SERIAL) | (state == FORK))
                if running.size <= 1:
                    break
                preempt(int(running[-1]))
                preemptions += 1
                dec = used & active
                need_block = dec & (own % bs == 0)
                needed = int(np.count_nonzero(need_block))
            if needed > free_kv():  # a lone request larger than the cache: it waits a step
                dec[np.flatnonzero(need_block)] = False
                needed = 0
            base[0] = float(np.count_nonzero(dec))
            base[1] = float(ctx[dec].sum())
        kv_own_total += needed
        features = base.copy()
        if eng.cascade_attention and dec.any():
            # the shared prefix is read once per request, not once per sequence
            reqs_in = lane_req[dec]
            uniq, per = np.unique(reqs_in, return_counts=True)
            features[1] -= float(((per - 1) * shared[uniq]).sum())
        # ---- 4. run the step
        a, w, b, g, d, e, z = coef
        nd, sc, pt, pa, pc = features
        step = (
            a
            + max(w, b * (nd + pt))
            + g * sc
            + d * pa
            + e * nd
            + z * (nd + pt) * (sc + nd + pc + pt)
        )
        if noise_sigma > 0:
            if steps % 4096 == 0:
                noise = rng.lognormal(-(noise_sigma**2) / 2, noise_sigma, 4096)
            step *= float(noise[steps % 4096])
        policy.observe(features, step)
        t += step
        steps += 1
        step_total += step
        # ---- 5. advance sequences
        dslots = np.flatnonzero(dec)
        if dslots.size:
            ctx[dslots] += 1
            own[dslots] += 1
            rem[dslots] -= 1
            owners = lane_req[dslots]
            in_fork = state[owners] == FORK
            gain = np.where(in_fork, 1.0 / np.maximum(unfinished[owners], 1), 1.0)
            np.add.at(progress, owners, gain)
            n_fork_lanes = int(np.count_nonzero(in_fork))
            if n_fork_lanes:
                width_sum += n_fork_lanes
                width_den += int(np.count_nonzero((state == FORK) & (width > 0)))
        # prefill progress: a finished prompt yields the first token
        for r, p in zip(chunk_req, chunk_p, strict=True):
            prefilled[r] += p
            if prefilled[r] >= prompt[r]:
                prefilling.remove(r)
                if np.isnan(first[r]):
                    first[r] = t
                shared[r] = prompt[r]
                start_serial(r, int(parent_slot[r]))
                events += 1
        # ---- 6. events: sequences that finished their segment or branch
        for slot in dslots[rem[dslots] == 0]:
            slot = int(slot)
            r = int(lane_req[slot])
            events += 1
            if state[r] == SERIAL:
                end_serial(r, slot)
                continue
            unfinished[r] -= 1
            if is_parent[slot]:
                if pending[r]:
                    rem[slot] = pending[r].popleft()
                    n_pending[r] -= 1
                elif unfinished[r] == 0:
                    join(r)
                else:
                    active[slot] = False  # waits for the other branches
                    width[r] -= 1
            else:
                merge_own(slot)
                release(slot)
                width[r] -= 1
                if unfinished[r] == 0:
                    join(r)

    # ---- metrics
    keep = np.arange(n) >= int(eng.warmup * n)
    finished = ~np.isnan(finish)
    ttft = first - arrival
    per_token = (finish - first) / lcp
    met = finished & (ttft <= ttft_slo) & (per_token <= tpot)
    window = max(float(arrival[keep][-1] - arrival[keep][0]), 1e-9) if keep.sum() > 1 else 1.0
    return RunResult(
        policy=policy.name,
        arrival=arrival[keep],
        ttft=ttft[keep],
        per_token=per_token[keep],
        met=met[keep],
        finished=finished[keep],
        duration=window,
        steps=steps,
        mean_width=width_sum / width_den if width_den else 1.0,
        step_seconds=step_total / max(steps, 1),
        sim_wall=time.perf_counter() - started,
        decision_seconds=list(policy.decision_seconds),
        events=events + n,
        preemptions=preemptions,
        rejected=rejected,
    )
