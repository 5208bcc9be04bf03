"""The PALL loop: process-aware operator selection driving SCIP sub-MIPs under a wall budget.

Pseudo-code (notes section 1a; every step is timed inside the budget ``T``)::

    x = initial_incumbent(SCIP, init_frac * T)
    while time < T:
        o  = selector.select(ctx)              # or the async answer prepared during t-1
        F  = ops[o](instance, x, x_lp, rng, k) # free set
        x' = submip(fix j not in F to x_j, warm start x, objlimit f(x), time tau)
        r  = reward(x, x'); selector.update(ctx, o, r)
        x  = x' if f(x') < f(x) and x' is feasible for the original model
        k  = k * grow if the sub-MIP was solved (improving or not),
             k * shrink on a timeout without improvement

Every accepted point is checked against the original model (:meth:`Instance.is_feasible`)
before it becomes the incumbent, so the solver never returns an unchecked solution.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pall_lns.async_select import AsyncSelector
from pall_lns.context import Context, Event
from pall_lns.errors import PallError
from pall_lns.instance import FEAS_TOL
from pall_lns.operators import OperatorSpec, State, neighbourhood
from pall_lns.selectors import Selector, UCBSelector, alns_reward
from pall_lns.submip import SubMipSolver
from paperstack.records import JsonlWriter

__all__ = ["LnsConfig", "LnsResult", "Progress", "oracle_reward", "request_stop", "run_lns"]

#: Set by :func:`request_stop`; read by :func:`run_lns` after every SCIP solve.
_STOP = threading.Event()


def request_stop() -> None:
    """Ask the running :func:`run_lns` to stop after the current solve, as Ctrl-C does, and
    return its best checked solution (``interrupted=True``). Safe to call from a signal
    handler or another thread.

    Why it exists beside SCIP's own Ctrl-C: the initial SCIP run hands over to the LNS with
    ``interruptSolve()`` once its incumbent is good, and that hand-over and a user's interrupt
    end the solve with the same status, so a SIGINT that lands in that callback (where
    ``pall solve`` re-raises SIGTERM) was read as the hand-over and the search went on to its
    time limit. This flag is the record that survives the race."""
    _STOP.set()


@dataclass(frozen=True)
class LnsConfig:
    """LNS settings. Defaults are toy-scale versions of the notes' protocol (T = 60 s, tau = 3-5 s
    there); ``submip_time=0`` means ``clip(T / 20, 0.2, 10)`` so short demo budgets still get
    tens of iterations, raised by the amortisation rule (:attr:`overhead_share`,
    :meth:`amortised_tau`) where the fixed cost per iteration is large."""

    time_limit: float
    init_frac: float = 0.1  # share of T for the initial plain-SCIP run
    # Up to this share of T, the initial run of a large model (SubMipSolver.LARGE_FROM) is
    # extended while its incumbent is trivial. 0 (off) since neighbourhoods grow when solved:
    # on 3 of 4 100k-variable instances the LNS then did better from SCIP's early incumbent.
    init_root_frac: float = 0.0
    submip_time: float = 0.0
    k_init: float = 0.2  # initial neighbourhood, share of the integer variables
    k_max_abs: int = 0  # upper bound on k; 0: max(4000, 50% of the integer variables)
    grow: float = 1.2  # after a sub-MIP solved within its limit (SCIP ALNS; CL-LNS uses 1.02)
    shrink: float = 0.8  # after a sub-MIP timeout without improvement
    history: int = 5
    async_select: bool = False
    deadline: float = 0.05  # async: extra wait for the selector after the sub-MIP ends
    seed: int = 0
    #: Sub-MIPs as reduced problems read into a second SCIP (True), by bound changes on the
    #: one kept model (False), or by size (None: reduced from SubMipSolver.LARGE_FROM on).
    reduced: bool | None = None
    #: Amortisation rule (with ``submip_time=0``): each sub-MIP's limit is at least the fixed
    #: cost per iteration (wall time outside SCIP's ``optimize()``, median of the last three
    #: iterations) divided by this share, and at least its own building and reading cost
    #: divided by it, so that cost stays about this share of an iteration that runs to its
    #: limit; capped at ``max(tau, T / 6)`` and the time left. 0.03 (0.04 in 0.2.1): sub-MIPs
    #: that end early pay the whole fixed cost on a shorter iteration, which put 0.2.1's
    #: loops at 5.5-6.6% on a quiet machine. 0 turns the rule off.
    overhead_share: float = 0.03
    #: Reduced sub-MIPs: free the idle sub-SCIP's solved problem on a second thread while the
    #: other one solves (True), or on the critical path (False: one core only, for rows that
    #: compare methods at equal cores; :class:`~pall_lns.submip.SubMipSolver`).
    background_free: bool = True
    #: Relative gap tolerance: the search stops once ``|f - dual| / max(|f|, |dual|)`` is at
    #: most this (the dual bound is SCIP's, from the initial run, which also gets it as its
    #: ``limits/gap``). 0: only when SCIP proved the incumbent optimal. Why: a run that SCIP
    #: solved in its first 0.09 s went on for 541 iterations to its time limit (issue #53).
    #: ``None``: never stop early (``pall bench``, which measures the loop itself).
    gap: float | None = 0.0
    #: Seconds the initial SCIP run may go on past its share of ``T`` while it has no
    #: incumbent; that extra time is not charged to the budget (the clock is moved on by it and
    #: ``stats["first_solution_extra_s"]`` says how much). 0: the first incumbent must come
    #: within ``T`` (the equal-wall-time comparisons). Why: under load a short run on a 100k
    #: model ended with no solution at all ("no feasible solution found in 2s").
    first_grace: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.time_limit) and self.time_limit > 0):
            raise PallError(
                f"--time-limit {self.time_limit:g}: must be a finite number of seconds above 0"
            )
        if not (math.isfinite(self.submip_time) and self.submip_time >= 0):
            raise PallError(
                f"--submip-time {self.submip_time:g}: must be a finite number of seconds >= 0"
            )
        if not 0 < self.init_frac < 1:
            raise PallError(f"init_frac {self.init_frac}: must be in (0, 1)")
        if not 0 <= self.init_root_frac < 1:
            raise PallError(f"init_root_frac {self.init_root_frac}: must be in [0, 1)")
        if not 0 <= self.overhead_share < 1:
            raise PallError(f"overhead_share {self.overhead_share}: must be in [0, 1)")
        if self.gap is not None and not (math.isfinite(self.gap) and 0 <= self.gap < 1):
            raise PallError(f"--gap {self.gap:g}: must be a relative gap in [0, 1)")
        if not (math.isfinite(self.first_grace) and self.first_grace >= 0):
            raise PallError(f"--first-grace {self.first_grace:g}: must be a finite number >= 0")

    @property
    def tau(self) -> float:
        return (
            self.submip_time if self.submip_time > 0 else min(10.0, max(0.2, self.time_limit / 20))
        )

    def amortised_tau(self, fixed_costs: list[float]) -> float:
        """The next sub-MIP's limit under the amortisation rule (:attr:`overhead_share`).

        ``fixed_costs``: seconds outside ``optimize()`` of the iterations so far. Fixed cost
        per iteration (reading and freeing the sub-MIP, building it, selection, checks) grows
        with the sub-MIP and with the machine's load, not with its time limit; a limit of
        ``cost / share`` keeps it at ``share`` of the iteration, at the price of fewer
        iterations. An explicit ``submip_time`` is used as given."""
        base = self.tau
        if self.submip_time > 0 or self.overhead_share <= 0 or not fixed_costs:
            return base
        last = sorted(fixed_costs[-3:])
        cost = last[len(last) // 2]  # the median of the last three (one stall does not count)
        return min(max(base, cost / self.overhead_share), max(base, self.time_limit / 6))


@dataclass
class Progress:
    """What the progress callback receives on each new incumbent."""

    seconds: float
    objective: float
    iteration: int
    op: str


@dataclass
class LnsResult:
    x: np.ndarray | None
    objective: float  # model's own sense
    timeline: list[tuple[float, float]]  # (seconds, internal objective) per incumbent
    iterations: int
    op_counts: list[int]
    wall_s: float
    submip_s: float
    loop_s: float
    fallbacks: int = 0
    interrupted: bool = False
    stats: dict[str, Any] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)  # variable names, in the order of ``x``

    @property
    def overhead(self) -> float:
        """Share of the LNS loop's wall time spent outside sub-MIP solves."""
        return 0.0 if self.loop_s <= 0 else max(0.0, 1.0 - self.submip_s / self.loop_s)


def oracle_reward(f_t: float, f_o: float, seconds: float, eps: float = 1e-9) -> float:
    """``r_o = (f(x_t) - f(x_o)) / max(|f(x_t)|, eps) / time_o`` (hindsight-oracle reward)."""
    return float((f_t - f_o) / max(abs(f_t), eps) / max(seconds, 1e-3))


class _Search:
    """Mutable LNS state shared by the loop and the hindsight oracle."""

    #: Earlier incumbents kept for crossover and DINS (SCIP's crossover uses 3 solutions).
    POOL = 3

    def __init__(
        self, path: str | Path, ops: list[OperatorSpec], cfg: LnsConfig, t0: float
    ) -> None:
        if not ops:
            raise PallError("the operator ensemble is empty")
        self.cfg, self.ops, self.t0 = cfg, ops, t0
        self.rng = np.random.default_rng(cfg.seed)
        self.solver = SubMipSolver(
            path, seed=cfg.seed, reduced=cfg.reduced, background_free=cfg.background_free
        )
        self.inst = self.solver.inst
        n_int = max(1, self.inst.int_idx.size)
        self.k_min = min(10, n_int)
        k_cap = cfg.k_max_abs if cfg.k_max_abs > 0 else max(4000, n_int // 2)
        self.k_max = max(self.k_min, min(n_int, k_cap))
        self.k = float(np.clip(cfg.k_init * n_int, self.k_min, self.k_max))
        self.history: list[Event] = []
        self.sum_r = np.zeros(len(ops))
        self.count = np.zeros(len(ops), dtype=int)
        self.stagnation = 0
        self.iteration = 0
        self.x: np.ndarray | None = None
        self.pool: list[np.ndarray] = []
        self.act: np.ndarray | None = None  # A x of the incumbent, updated on acceptance
        self.f = np.inf
        self.x_lp: np.ndarray | None = None
        self.dual = -np.inf
        self.timeline: list[tuple[float, float]] = []
        self.uncharged = 0.0
        self.init_status = ""
        self.first_extra = 0.0  # seconds past the initial share, not charged (first_grace)
        #: Seconds of the loop's own phases outside the sub-MIP (``bench`` prints them).
        self.phases: dict[str, float] = {}

    def charge(self, phase: str, since: float) -> float:
        """Add the seconds since ``since`` to ``phase``; returns the current clock."""
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - since
        return now

    def now(self) -> float:
        """Seconds charged to the search (the oracle excludes its forks via ``uncharged``)."""
        return time.perf_counter() - self.t0 - self.uncharged

    def start(self) -> None:
        budget = self.cfg.init_frac * self.cfg.time_limit
        start = self.now()
        grace = self.cfg.first_grace
        init = self.solver.initial(
            budget,
            max_time=self.cfg.time_limit - start + grace,
            root_time=max(budget, self.cfg.init_root_frac * self.cfg.time_limit - start),
            gap=self.cfg.gap or 0.0,
        )
        self.init_status = init.status
        timeline = [(start + t, v) for t, v in init.timeline]
        if grace > 0 and timeline and timeline[0][0] > start + budget:
            # The first incumbent came after the initial share: the time from there to the end
            # of the initial run is not charged, so the LNS keeps its share of the budget.
            self.first_extra = max(0.0, self.now() - (start + budget))
            self.t0 += self.first_extra
            timeline = [(min(t, start + budget), v) for t, v in timeline]
        self.timeline += timeline
        self.x_lp, self.dual = init.x_lp, init.dual_bound
        if init.x is not None:
            bad, what = self.inst.violation(init.x)
            if bad > 1e-6:
                raise PallError(f"{self.inst.name}: SCIP's initial solution violates {what}")
            self.x, self.f = init.x, init.obj
            self.act = self.inst.activity(init.x)

    def reached(self) -> str | None:
        """``"optimal"`` once SCIP proved the incumbent optimal, ``"gap"`` once the gap to its
        dual bound is within ``cfg.gap``, else ``None`` (search on)."""
        if self.x is None or self.cfg.gap is None:
            return None
        g = self.gap()
        if self.init_status == "optimal" or g <= 1e-9:
            return "optimal"
        if g <= self.cfg.gap:
            return "gap"
        return None

    def gap(self) -> float:
        if not np.isfinite(self.dual) or not np.isfinite(self.f):
            return 1.0
        return float(abs(self.f - self.dual) / max(abs(self.f), abs(self.dual), 1e-9))

    def context(self) -> Context:
        inst = self.inst
        mean = np.where(self.count > 0, self.sum_r / np.maximum(self.count, 1), 0.0)
        return Context(
            n_ops=len(self.ops),
            op_labels=tuple(o.label for o in self.ops),
            n_vars=inst.n,
            n_rows=inst.m,
            density=inst.density,
            int_frac=inst.int_idx.size / max(1, inst.n),
            progress=min(1.0, self.now() / self.cfg.time_limit),
            iteration=self.iteration,
            stagnation=self.stagnation,
            k_frac=self.k / max(1, inst.int_idx.size),
            gap=self.gap(),
            history=tuple(self.history[-self.cfg.history :]),
            op_mean=tuple(float(v) for v in mean),
            op_count=tuple(int(v) for v in self.count),
        )

    def try_op(
        self, op: int, tau: float, stretch: tuple[float, float] | None = None
    ) -> tuple[Any, float]:
        """Run operator ``op`` from the current incumbent; returns (result, seconds).
        ``stretch``: see :meth:`SubMipSolver._scip_limit`."""
        assert self.x is not None
        t = time.perf_counter()
        state = State(self.x, self.x_lp, tuple(self.pool))
        nb = neighbourhood(self.ops[op], self.inst, state, self.rng, round(self.k))
        t = self.charge("neighbourhood", t)
        res = self.solver.solve(
            nb.free,
            self.x,
            tau,
            nb.hamming,
            self.act,
            fix_to=nb.fix_to,
            proximity=nb.proximity,
            stretch=stretch,
        )
        tc = time.perf_counter()
        if res.x is not None:
            # Checked against the original model: the rows touched by the change (the rest
            # keep the incumbent's checked activity), so the check costs what the change does.
            assert self.act is not None
            bad, res.act = self.inst.recheck(self.x, self.act, res.x)
            if bad > FEAS_TOL:
                res.x, res.obj, res.act = None, self.f, None  # SCIP's point fails the model
                res.status = "rejected"
        self.charge("check", tc)
        return res, time.perf_counter() - t

    def apply(self, op: int, res: Any, seconds: float, tau: float) -> tuple[float, bool]:
        improved = res.x is not None and res.obj < self.f
        f_old = self.f
        closed = 0.0
        if improved:
            denom = f_old - self.dual if np.isfinite(self.dual) else abs(f_old)
            closed = (f_old - res.obj) / max(denom, 1e-9)
            if self.x is not None:
                self.pool = ([*self.pool, self.x])[-self.POOL :]
            self.x, self.f, self.act = res.x, res.obj, res.act
            self.timeline.append((self.now(), self.f))
            self.stagnation = 0
        else:
            self.stagnation += 1
        r_b = alns_reward(improved, closed, seconds / max(tau, 1e-9))
        r_o = oracle_reward(f_old, self.f, seconds)
        self.sum_r[op] += r_o
        self.count[op] += 1
        self.history.append(Event(op, r_o, improved, res.status, seconds))
        if res.status in ("optimal", "infeasible"):
            # Solved within its limit ("infeasible" under the objective limit: nothing better in
            # F), improving or not: a larger neighbourhood is affordable. SCIP's ALNS lowers its
            # fixing rate on these statuses alike; growing only after failures would keep
            # sub-MIPs that finish in a fraction of tau, each paying the fixed per-iteration cost.
            self.k = min(self.k_max, self.k * self.cfg.grow)
        elif res.status == "timelimit" and not improved:
            self.k = max(self.k_min, self.k * self.cfg.shrink)
        self.iteration += 1
        return r_b, improved


def run_lns(
    path: str | Path,
    ops: list[OperatorSpec],
    selector: Selector,
    cfg: LnsConfig,
    *,
    trajectory: str | Path | None = None,
    on_improve: Callable[[Progress], None] | None = None,
    t0: float | None = None,
) -> LnsResult:
    """Run PALL-style LNS on the model at ``path`` for ``cfg.time_limit`` wall seconds.

    ``t0`` (a ``time.perf_counter()`` value) lets a caller start the clock before reading the
    file, so every method is charged the same. Ctrl-C (in or out of SCIP) or
    :func:`request_stop` stops the loop and the best checked solution is returned with
    ``interrupted=True``.
    """
    t0 = time.perf_counter() if t0 is None else t0
    _STOP.clear()
    asel: AsyncSelector | None = None
    startup_s = 0.0
    bandit_fallback = UCBSelector(len(ops), seed=cfg.seed)
    if cfg.async_select:
        # The worker (and an LM it loads) starts outside the budget: the clock is moved on by
        # its start-up, which is reported (stats["worker_startup_s"]).
        ts = time.perf_counter()
        asel = AsyncSelector(selector, len(ops), cfg.deadline, bandit_fallback)
        startup_s = time.perf_counter() - ts
        t0 += startup_s
    try:
        s = _Search(path, ops, cfg, t0)
    except BaseException:
        if asel is not None:
            asel.close()  # the model was bad, not the worker: it serves the next run
        raise
    clean = False
    writer = JsonlWriter(trajectory, fsync=False) if trajectory else None
    fallbacks = 0
    decide_s = 0.0
    interrupted = False
    stop: str | None = None
    submip_s = loop_s = init_end = 0.0
    fixed_costs: list[float] = []  # seconds outside optimize() per iteration (amortisation)
    try:
        if asel is not None:
            asel.submit(s.context())  # the first choice is made during the initial SCIP run
        s.start()
        interrupted = s.solver.interrupted or _STOP.is_set()
        if s.x is not None:
            if on_improve:
                on_improve(Progress(s.now(), s.inst.sense * s.f, 0, "scip-initial"))
            if writer:
                writer.write({"event": "initial", "t": s.now(), "obj": s.inst.sense * s.f})
        elif not interrupted:  # interrupted first: the caller says so, not "no solution"
            raise PallError(
                f"{s.inst.name}: no feasible solution found in "
                f"{cfg.time_limit + cfg.first_grace:g}s (SCIP found none; "
                "a longer --first-grace lets its first run go on)"
            )
        loop_start = init_end = s.now()
        stop = s.reached()
        while stop is None and not interrupted and s.now() < cfg.time_limit - 0.02:
            it_start = s.now()
            left = cfg.time_limit - s.now()
            tau = min(cfg.amortised_tau(fixed_costs), left)
            if fixed_costs and left < 2 * tau and cfg.submip_time <= 0 < cfg.overhead_share:
                # The rule's tail: a last sub-MIP shorter than the amortised limit would pay the
                # full fixed cost for a fraction of the search, so this one takes what is left.
                tau = left
            if tau < 0.02:
                break  # before the selection, so a fallback is never counted for no iteration
            before = {**s.solver.breakdown, **s.phases}
            tp = time.perf_counter()
            ctx = s.context()
            used_fallback = False
            if asel is None:
                td = time.perf_counter()
                op = selector.select(ctx)
                decide_s += time.perf_counter() - td
            else:
                answer = asel.collect()
                if answer is None or not 0 <= answer < len(ops):
                    answer = bandit_fallback.select(ctx)
                    fallbacks += 1
                    used_fallback = True
                op = answer
            tau = max(0.01, min(tau, cfg.time_limit - s.now()))
            if asel is not None:
                s.count[op] += 1  # the selector sees that op is now running
                asel.submit(s.context())
                s.count[op] -= 1
            s.charge("select", tp)
            stretch = None
            if cfg.submip_time <= 0 < cfg.overhead_share:
                # the rule on this sub-MIP's own building and reading cost, known before SCIP
                # starts; never past the cap or the budget
                most = min(max(tau, cfg.time_limit / 6), cfg.time_limit - s.now())
                stretch = (cfg.overhead_share, max(tau, most))
            res, seconds = s.try_op(op, tau, stretch)
            tau = max(tau, s.solver.last_limit)  # the limit this sub-MIP got
            tp = time.perf_counter()
            submip_s += res.solve_s
            interrupted = s.solver.interrupted or _STOP.is_set()
            r_b, improved = s.apply(op, res, seconds, tau)
            if improved:
                stop = s.reached()
            (asel if asel is not None else selector).update(ctx, op, r_b)
            if improved and on_improve:
                on_improve(Progress(s.now(), s.inst.sense * s.f, s.iteration, s.ops[op].label))
            tp = s.charge("bookkeeping", tp)  # before the line, so its split_s includes it
            if writer:
                writer.write(
                    {
                        "event": "iteration",
                        "iter": s.iteration,
                        "t": s.now(),
                        "op": op,
                        "label": s.ops[op].label,
                        "k": round(s.k),
                        "status": res.status,
                        "solve_s": res.solve_s,
                        "iter_s": s.now() - it_start,
                        "obj": s.inst.sense * s.f,
                        "improved": improved,
                        "reward": s.history[-1].reward,
                        "fallback": used_fallback,
                        "tau": tau,
                        # this iteration's seconds outside optimize(), by phase (SCIP's
                        # presolving is inside it, given for the reader)
                        "split_s": {
                            k: d
                            for k, v in {**s.solver.breakdown, **s.phases}.items()
                            if k != "lp_tokens_once" and (d := round(v - before.get(k, 0.0), 6)) > 0
                        },
                    }
                )
            s.charge("bookkeeping", tp)
            fixed_costs.append(max(0.0, s.now() - it_start - res.solve_s))
        loop_s = s.now() - loop_start
        clean = True
    except KeyboardInterrupt:
        interrupted = True
    finally:
        s.solver.close()
        if asel is not None:
            asel.close(keep=clean)  # after a failure the worker is stopped, not reused
            if fallbacks:
                warnings.warn(
                    f"{s.inst.name}: the selector worker missed its deadline in {fallbacks} of "
                    f"{s.iteration} iterations; the fallback bandit chose there",
                    stacklevel=2,
                )
    if s.x is not None:  # final check against the original model before anything is returned
        bad, what = s.inst.violation(s.x)
        if bad > 1e-6:
            raise PallError(f"{s.inst.name}: internal error, incumbent violates {what}")
    result = LnsResult(
        x=s.x,
        objective=s.inst.sense * s.f,
        timeline=s.timeline,
        iterations=s.iteration,
        op_counts=[int(c) for c in s.count],
        wall_s=s.now(),
        submip_s=submip_s,
        loop_s=loop_s,
        fallbacks=fallbacks,
        interrupted=interrupted,
        names=s.inst.names,
        stats={
            "sense": s.inst.sense,
            "k_final": s.k,
            "dual_bound": s.inst.sense * s.dual if np.isfinite(s.dual) else None,
            "config": asdict(cfg),
            "submip_breakdown_s": dict(s.solver.breakdown),
            "loop_breakdown_s": dict(s.phases),
            "reduced": s.solver.reduced,
            # how reduced sub-MIPs' rows reach SCIP: "c-api" (pall_lns.capi) or "lp-text"
            "builder": (
                None
                if not s.solver.reduced
                else "c-api"
                if s.solver.builder is not None
                else "lp-text"
            ),
            "builder_reason": s.solver.builder_reason,
            "init_end_s": init_end,
            # why the search ended: "optimal" (SCIP's proof), "gap" (within cfg.gap of SCIP's
            # dual bound), "interrupted" or "time_limit"
            "stop": stop or ("interrupted" if interrupted else "time_limit"),
            "gap": s.gap() if s.x is not None else None,
            "first_solution_extra_s": s.first_extra,
            "worker_startup_s": startup_s,
            "worker_cpu_s": asel.worker_cpu_s if asel is not None else 0.0,
            "decision_s": (float(sum(asel.latencies)) if asel is not None else decide_s),
            "decisions": (len(asel.latencies) if asel is not None else s.iteration),
        },
    )
    if writer:
        writer.write(
            {
                "event": "final",
                "t": result.wall_s,
                # None before any incumbent (interrupted during SCIP's first run): JSON has no inf
                "obj": result.objective if result.x is not None else None,
                "iterations": result.iterations,
                "overhead": result.overhead,
                "interrupted": interrupted,
                "fallbacks": result.fallbacks,
                "stop": result.stats["stop"],
                "gap": result.stats["gap"],
            }
        )
        writer.close()
    return result
