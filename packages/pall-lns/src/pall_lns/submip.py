"""Sub-MIPs on one SCIP model: fix outside the neighbourhood, warm start, objective limit.

One model is kept for the whole run (PySCIPOpt issues #31/#45: bounds can only change in the
problem stage, so every solve starts with ``freeTransform()``; #1188: ``fixVar`` cannot be
undone, so fixings are ``chgVarLb``/``chgVarUb`` pairs). Only the variables whose fixing changed
since the previous sub-MIP are touched, which keeps the per-iteration Python work proportional to
the neighbourhood, not to the model (the 5% overhead budget on 100k-variable instances).
"""

from __future__ import annotations

import queue
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pall_lns.errors import PallError
from pall_lns.instance import Instance, import_scip, read_instance, read_scip_model

__all__ = ["InitialResult", "SubMipResult", "SubMipSolver"]


@dataclass
class SubMipResult:
    """Outcome of one sub-MIP: SCIP status, the new point (None if none better), times."""

    status: str
    x: np.ndarray | None
    obj: float
    solve_s: float
    setup_s: float
    act: np.ndarray | None = None  # A x of the new point, once the LNS loop has checked it


@dataclass
class InitialResult:
    status: str
    x: np.ndarray | None
    obj: float
    x_lp: np.ndarray | None
    dual_bound: float
    timeline: list[tuple[float, float]]


class SubMipSolver:
    """Owns the SCIP model of one instance and solves its sub-MIPs."""

    #: From this many variables on, sub-MIPs are reduced (:meth:`solve_reduced`) and the initial
    #: run may wait for a non-trivial incumbent (:meth:`initial`'s ``root_time``).
    LARGE_FROM = 20_000
    #: The initial run is extended (up to ``root_time``) while SCIP's gap exceeds this.
    TRIVIAL_GAP = 2.0

    def __init__(
        self,
        path: str | Path,
        inst: Instance | None = None,
        seed: int = 0,
        reduced: bool | None = None,
        background_free: bool = True,
        c_api: bool | None = None,
    ) -> None:
        self.scip = import_scip()
        self.model = read_scip_model(path)
        self.inst = inst if inst is not None else read_instance(path, self.model)
        self.vars = self.model.getVars()
        if [v.name for v in self.vars] != self.inst.names:
            raise PallError(f"{path}: variable order differs between readers")
        m = self.model
        m.setIntParam("randomization/randomseedshift", int(seed) % 2**31)
        m.setBoolParam("misc/catchctrlc", True)
        self.orig_lb = self.inst.lb.copy()
        self.orig_ub = self.inst.ub.copy()
        self._fixed = np.zeros(self.inst.n, dtype=bool)
        self._fixval = np.zeros(self.inst.n)
        self.interrupted = False
        self._sink: dict[str, Any] = {}
        self._handler_included = False
        self.seed = int(seed) % 2**31
        self.large = self.inst.n >= self.LARGE_FROM
        #: ``True`` (default from :attr:`LARGE_FROM` variables on): every sub-MIP is built as its
        #: own small problem and read into a second, reused SCIP (:meth:`solve_reduced`);
        #: ``False``: bound changes on the one kept model (:meth:`solve_fixed`). At 100k
        #: variables the kept model costs more per iteration: SCIP transforms all 1.1M
        #: non-zeros before presolve drops the fixed columns, and ``freeTransform`` frees them
        #: (1.5-1.8 s each on a 100k set cover, against 0.3-0.45 s to read and free the
        #: reduced sub-MIP), so the reduced path stays the default there.
        self.reduced = self.large if reduced is None else bool(reduced)
        #: Seconds per phase of the sub-MIPs outside ``optimize()`` (on the kept model: bounds,
        #: warm_start, read_back, scip_free = ``freeTransform``; reduced: reduce, write,
        #: read_back, scip_read, scip_free), and SCIP's own presolving time inside it, for
        #: ``bench``.
        self.breakdown: dict[str, float] = {}
        self._lp: Any = None  # pall_lns.reduced.LpText, built at the first reduced sub-MIP
        #: Rows of reduced sub-MIPs through SCIP's C API (:mod:`pall_lns.capi`), or ``None``:
        #: written as LP text with the variables (``builder_reason`` says why).
        self.builder: Any = None
        self.builder_reason = ""
        if self.reduced and c_api is not False:  # None: where it loads; False: LP text
            from pall_lns import capi

            self.builder = capi.load()
            self.builder_reason = capi.reason()
            if self.builder is None and c_api:
                raise PallError(f"SCIP's C API is not reachable: {self.builder_reason}")
        elif self.reduced:
            self.builder_reason = "c_api=False"
        self._pos = np.zeros(self.inst.n, dtype=np.int64)  # column -> position in a sub-MIP
        #: The two reused sub-SCIPs of reduced sub-MIPs, used in turn (:meth:`_sub_scip`), and
        #: the thread freeing the idle one's last problem while the other one solves.
        self._subs: list[Any] = []
        self._turn = 0
        self._frees: queue.Queue[Any] | None = None  # to the freeing thread (None: stop)
        self._freer_thread: threading.Thread | None = None
        #: ``False``: no freeing thread; the idle sub-SCIP's last problem is freed on the
        #: critical path (timed as ``scip_free``), so the search uses one core only (the
        #: equal-cores rows of a comparison).
        self.background_free = bool(background_free)
        #: The last sub-MIP's time limit, after :meth:`_scip_limit` (the loop records it).
        self.last_limit = 0.0
        self._stretch: tuple[float, float] | None = None

    # ------------------------------------------------------------------ helpers
    def _values(self, sol: Any, idx: np.ndarray, base: np.ndarray) -> np.ndarray:
        x = base.copy()
        get, vs = self.model.getSolVal, self.vars
        x[idx] = [get(sol, vs[j]) for j in idx.tolist()]
        x[self.inst.int_idx] = np.round(x[self.inst.int_idx])
        return x

    def _set_bounds(self, fixed: np.ndarray, values: np.ndarray) -> None:
        changed = np.flatnonzero((fixed != self._fixed) | (fixed & (values != self._fixval)))
        m, vs = self.model, self.vars
        inf = m.infinity()
        was = self._fixed
        lb = np.where(fixed, values, np.where(np.isfinite(self.orig_lb), self.orig_lb, -inf))
        ub = np.where(fixed, values, np.where(np.isfinite(self.orig_ub), self.orig_ub, inf))
        chg_lb, chg_ub = m.chgVarLb, m.chgVarUb
        for j, lo, hi, w in zip(
            changed.tolist(),
            lb[changed].tolist(),
            ub[changed].tolist(),
            was[changed].tolist(),
            strict=True,
        ):
            if w and lo > self._fixval[j]:  # moving a fixed value up: raise ub first
                chg_ub(vs[j], hi)
                chg_lb(vs[j], lo)
            else:
                chg_lb(vs[j], lo)
                chg_ub(vs[j], hi)
        self._fixed = fixed.copy()
        self._fixval = np.where(fixed, values, 0.0)

    def _set_objective(self, cols: np.ndarray, coefs: np.ndarray) -> None:
        """Objective coefficients of ``cols`` only, in the model's sense (PySCIPOpt has no
        ``chgVarObj``; ``setObjective(..., clear=False)`` changes just the terms it is given)."""
        from pyscipopt.scip import Expr, Term

        vs = self.vars
        terms = {Term(vs[j]): h for j, h in zip(cols.tolist(), coefs.tolist(), strict=True)}
        self.model.setObjective(Expr(terms), self.model.getObjectiveSense(), clear=False)

    def _warm_start(self, x: np.ndarray) -> None:
        sol = self.model.createSol()
        set_val, vs = self.model.setSolVal, self.vars
        for j in np.flatnonzero(x).tolist():
            set_val(sol, vs[j], float(x[j]))
        self.model.addSol(sol, free=True)

    # ------------------------------------------------------------------ initial run
    def initial(
        self,
        time_limit: float,
        max_time: float | None = None,
        root_time: float | None = None,
        gap: float = 0.0,
    ) -> InitialResult:
        """A short plain-SCIP run for the first incumbent, the root LP point and a dual bound.

        Runs ``time_limit`` seconds; while no incumbent exists it resumes the same solve with
        doubled limits up to ``max_time`` (default ``time_limit``); while the only incumbents
        predate the first LP solution (trivial/presolve heuristics: on a 100k-column set cover
        the all-columns cover, 50x the optimum) it resumes up to ``root_time`` (large models
        only, see :attr:`LARGE_FROM`), so the search starts from SCIP's better heuristics
        (LP-based ones once the root LP is solved), where the LNS has something to improve."""
        max_time = time_limit if max_time is None else max_time
        # Only large models (the reduced-sub-MIP regime) wait for a non-trivial incumbent: on
        # small ones SCIP's root is over in milliseconds and the LNS should get the budget.
        if root_time is None or not self.large:
            root_time = time_limit
        root_time = min(root_time, max_time)
        m = self.model
        lp: dict[str, float] = {}
        timeline: list[tuple[float, float]] = []
        t0 = time.perf_counter()
        sense = self.inst.sense
        scip = self.scip
        sink = self._sink
        sink.clear()
        sink.update(lp=lp, timeline=timeline, t0=t0, sense=sense, trivial_gap=self.TRIVIAL_GAP)
        if not self._handler_included:

            class _Handler(scip.Eventhdlr):  # type: ignore[misc,name-defined]
                def eventinit(self) -> None:
                    self.model.catchEvent(scip.SCIP_EVENTTYPE.FIRSTLPSOLVED, self)
                    self.model.catchEvent(scip.SCIP_EVENTTYPE.BESTSOLFOUND, self)

                def eventexit(self) -> None:
                    self.model.dropEvent(scip.SCIP_EVENTTYPE.FIRSTLPSOLVED, self)
                    self.model.dropEvent(scip.SCIP_EVENTTYPE.BESTSOLFOUND, self)

                def eventexec(self, event: Any) -> None:
                    if not sink.get("active"):
                        return
                    if event.getType() == scip.SCIP_EVENTTYPE.BESTSOLFOUND:
                        obj = self.model.getSolObjVal(self.model.getBestSol())
                        sink["timeline"].append(
                            (time.perf_counter() - sink["t0"], sink["sense"] * obj)
                        )
                        if (
                            sink.get("stop_when_good")
                            and sink.get("lp_t") is not None
                            and self.model.getGap() <= sink["trivial_gap"]
                        ):
                            # Extension phase: the first non-trivial incumbent is what it was
                            # for, so hand over to the LNS now rather than at the limit.
                            sink["stopped"] = True
                            self.model.interruptSolve()
                    elif not sink["lp"]:
                        sink["lp_t"] = time.perf_counter() - sink["t0"]
                        for col in self.model.getLPColsData():
                            sink["lp"][col.getVar().name.removeprefix("t_")] = col.getPrimsol()

            m.includeEventhdlr(_Handler(), "pall_init", "first LP point and incumbents")
            self._handler_included = True
        sink["active"] = True
        # ``gap``: SCIP stops on its own once its gap is that small (status "gaplimit"); reset
        # below, so the sub-MIPs on this model still solve to optimality within their limit.
        m.setRealParam("limits/gap", float(gap))
        m.setRealParam("limits/time", max(0.05, time_limit))
        m.optimize()
        limit = max(0.05, time_limit)

        def pre_root() -> bool:
            """Every incumbent so far predates the first LP, or is more than ``1 +
            TRIVIAL_GAP`` times SCIP's dual bound (SCIP's gap is relative to the smaller)."""
            lp_t = sink.get("lp_t")
            if lp_t is None or all(t <= lp_t for t, _ in timeline):
                return True
            try:
                return bool(m.getGap() > self.TRIVIAL_GAP)
            except Exception:  # no gap in this stage
                return False

        while m.getStatus() == "timelimit":
            elapsed = time.perf_counter() - t0
            if m.getNSols() == 0 and elapsed < max_time - 0.05:
                cap = max_time
            elif m.getNSols() > 0 and pre_root() and elapsed < root_time - 0.05:
                cap = root_time
                sink["stop_when_good"] = True
            else:
                break
            # Resume the same solve (no restart) with a doubled limit.
            limit = min(2 * limit, cap)
            m.setRealParam("limits/time", limit)
            m.optimize()
        sink["active"] = False
        status = m.getStatus()
        if sink.get("stopped") and status == "userinterrupt":
            status = "timelimit"  # our own hand-over, not the user's Ctrl-C
        self.interrupted = status == "userinterrupt"
        if status == "infeasible":
            raise PallError(f"{self.inst.name}: the model is infeasible (SCIP proved it)")
        if status in ("unbounded", "inforunbd"):
            raise PallError(f"{self.inst.name}: the model is unbounded or infeasible ({status})")
        x = None
        obj = np.inf
        if m.getNSols() > 0:
            x = self._values(m.getBestSol(), np.arange(self.inst.n), np.zeros(self.inst.n))
            obj = self.inst.objective(x)
        try:
            dual = sense * m.getDualbound()
        except Exception:  # no bound in this stage
            dual = -np.inf
        if not np.isfinite(dual) or abs(dual) >= m.infinity():
            dual = -np.inf
        x_lp = None
        if lp:
            base = x if x is not None else np.zeros(self.inst.n)
            x_lp = np.array([lp.get(nm, base[j]) for j, nm in enumerate(self.inst.names)])
        m.freeTransform()
        m.setRealParam("limits/gap", 0.0)
        return InitialResult(status, x, obj, x_lp, float(dual), timeline)

    # ------------------------------------------------------------------ sub-MIP
    def solve(
        self,
        free: np.ndarray,
        x_inc: np.ndarray,
        time_limit: float,
        hamming: int | None = None,
        act: np.ndarray | None = None,
        *,
        fix_to: np.ndarray | None = None,
        proximity: float | None = None,
        stretch: tuple[float, float] | None = None,
    ) -> SubMipResult:
        """Dispatch: :meth:`solve_fixed` on the one kept model, or :meth:`solve_reduced` when
        built with ``reduced=True``. ``fix_to``: RENS fixes to the rounded LP point, not the
        incumbent; ``proximity``: a distance objective; ``act`` is ``A x_inc`` if known;
        ``stretch = (share, most)``: the amortisation rule on this sub-MIP's own cost
        (:meth:`_scip_limit`). The limit it got is :attr:`last_limit`."""
        self.last_limit = time_limit
        self._stretch = stretch
        if self.reduced:
            return self.solve_reduced(
                free, x_inc, time_limit, hamming, act, fix_to=fix_to, proximity=proximity
            )
        return self.solve_fixed(free, x_inc, time_limit, hamming, fix_to=fix_to,
                                proximity=proximity)  # fmt: skip

    def _scip_limit(self, time_limit: float, spent: float) -> float:
        """SCIP's ``limits/time`` for a sub-MIP whose building and reading took ``spent`` s.

        The sub-MIP's limit ``time_limit`` counts from the start of its building. With a
        ``stretch = (share, most)``, it is raised to ``spent / share`` (at most ``most``): the
        cost of building and reading this very sub-MIP is known before SCIP starts, so even the
        first sub-MIPs, before the loop's rule has seen any (:meth:`LnsConfig.amortised_tau`),
        keep it near ``share`` of their iteration."""
        limit = time_limit
        if self._stretch is not None:
            share, most = self._stretch
            limit = max(limit, min(most, spent / share))
        self.last_limit = limit
        return max(0.01, limit - spent)

    def _new_sub(self) -> Any:
        sub = self.scip.Model()
        sub.hideOutput()
        sub.setIntParam("parallel/maxnthreads", 1)
        sub.setIntParam("lp/threads", 1)
        sub.setBoolParam("misc/catchctrlc", True)
        sub.setIntParam("randomization/randomseedshift", self.seed)
        return sub

    def _sub_scip(self) -> Any:
        """The sub-SCIP this reduced sub-MIP is read into: two reused instances, in turn.

        Reading a problem into a reused SCIP needs the last one freed first (``freeProb``); a
        fresh ``Model()`` per sub-MIP cost 0.16-0.19 s on 100k-variable runs, as SCIP tears
        down and rebuilds its plugins, but ``freeProb`` of a solved 20-50k-column sub-MIP still
        costs 0.1-0.3 s (its transformed problem, LP, cuts and tree), on the critical path of
        every iteration. With two instances, the one that solved the previous sub-MIP is freed
        by a thread (:meth:`_free_in_background`) while this one solves under
        ``optimizeNogil`` (SCIP without the GIL), so the freeing overlaps the search instead of
        adding to it; only a free that outlasts the next solve is waited for (timed as
        ``scip_free``). Separate SCIP instances share no solver state, so this is safe.
        Parameters are set once; they survive ``freeProb``."""
        while len(self._subs) < 2:
            self._subs.append(self._new_sub())
        self._join_free()
        return self._subs[self._turn]

    def _join_free(self) -> None:
        if self._frees is not None:
            self._frees.join()

    @staticmethod
    def _freer(jobs: queue.Queue[Any]) -> None:
        while (sub := jobs.get()) is not None:
            try:
                sub.freeProb()
            finally:
                jobs.task_done()
        jobs.task_done()

    def _free_in_background(self, sub: Any) -> None:
        """Queue ``sub``'s solved problem to the freeing thread (waited for before its next use).

        The thread is started once and woken through a queue: ``freeProb`` holds the GIL, so a
        thread started per job would make ``Thread.start()`` wait out the whole free before
        the caller reaches ``optimizeNogil``. Queued just before the solve, the free takes the
        GIL only once the caller has released it inside SCIP."""
        self._join_free()
        if sub.getStage() == 0 or not (sub.getNVars() or sub.getNConss()):
            return
        if not self.background_free:
            return  # freed in the caller's thread before its next read (solve_reduced)
        if self._frees is None:
            self._frees = queue.Queue()
            self._freer_thread = threading.Thread(
                target=self._freer, args=(self._frees,), name="pall-free", daemon=True
            )
            self._freer_thread.start()
        self._frees.put(sub)

    def close(self) -> None:
        """Wait for a background free and stop the freeing thread (the solver's SCIPs are
        released with the object)."""
        if self._frees is not None and self._freer_thread is not None:
            self._frees.put(None)
            self._freer_thread.join()
            self._frees = self._freer_thread = None

    def solve_reduced(
        self,
        free: np.ndarray,
        x_inc: np.ndarray,
        time_limit: float,
        hamming: int | None = None,
        act: np.ndarray | None = None,
        *,
        fix_to: np.ndarray | None = None,
        proximity: float | None = None,
    ) -> SubMipResult:
        """The sub-MIP as a small SCIP problem (:mod:`pall_lns.reduced`) read into the one
        reused sub-SCIP: warm start from ``x_inc``, objective limit at the incumbent's value,
        ``limits/time = time_limit``.

        ``fix_to`` (RENS): integer variables outside ``free`` are fixed to these values instead
        of the incumbent's (no warm start unless they agree). ``proximity = delta`` (Fischetti
        and Monaci 2014): the objective becomes the Hamming distance to the incumbent over the
        sub-MIP's binaries, with the row ``c x <= f(x_inc) - delta_abs``, so any solution SCIP
        finds improves the incumbent and is the nearest such one it found.

        Variables travel as LP text; the rows, the warm start and the answer as arrays
        through SCIP's C API (:attr:`builder`; LP text and SCIP solution files where it is
        ``None``), so the Python work per sub-MIP is a few vectorised gathers and one call per
        row."""
        import os

        from pall_lns.reduced import LpText, reduce

        t0 = time.perf_counter()
        inst = self.inst
        if self._lp is None:
            self._lp = LpText(inst)  # once per model: every neighbourhood-free string
            self.breakdown["lp_tokens_once"] = time.perf_counter() - t0
            t0 = time.perf_counter()
        mask = ~inst.is_int
        mask[free] = True
        x_fix = x_inc
        warm = True
        if fix_to is not None:
            x_fix = np.where(mask, x_inc, fix_to)
            warm = bool(np.array_equal(x_fix, x_inc))
            act = inst.activity(x_fix) if not warm else act
        red = reduce(inst, mask, x_fix, act, keep_loose=hamming is not None or bool(proximity))
        bd = self.breakdown
        rows_before = bd.get("scip_rows", 0.0)
        tick = time.perf_counter()
        bd["reduce"] = bd.get("reduce", 0.0) + tick - t0
        base = red.x_base
        f_inc = inst.objective(x_inc)
        status = "optimal"
        solve_s = 0.0
        t1 = t2 = time.perf_counter()
        x_new = base
        if red.violated:  # a row without free variables is violated by the fixings
            return SubMipResult("infeasible", None, f_inc, 0.0, time.perf_counter() - t0)
        if red.cols.size:
            cols = red.cols
            fixed_part = inst.objective(base) - float(np.sum(inst.c[cols] * base[cols]))
            cutoff = None
            if proximity is not None:
                delta = max(proximity * max(abs(f_inc), 1.0), 1e-6)
                cutoff = f_inc - fixed_part - delta
            builder = self.builder
            # With the C API the rows, the warm start and the answer skip the files (capi).
            lp_path, sol_path = self._lp.write(
                red, x_inc, hamming, proximity_cutoff=cutoff, warm=warm and builder is None,
                rows=builder is None,
            )  # fmt: skip
            tr = time.perf_counter()
            bd["write"] = bd.get("write", 0.0) + tr - tick
            sub = self._sub_scip()  # waits for a background free still running on it
            ptrs: np.ndarray | None = None  # the sub-MIP's SCIP_VAR*, in the order of cols
            try:
                if sub.getStage() != 0 and (sub.getNVars() or sub.getNConss()):
                    sub.freeProb()  # only if the background free was not started
                tf = time.perf_counter()
                bd["scip_free"] = bd.get("scip_free", 0.0) + tf - tr
                sub.readProblem(lp_path)
                if builder is not None:
                    tv = time.perf_counter()
                    ptrs = self._add_rows(builder, sub, red, x_inc, hamming, cutoff)
                    bd["scip_rows"] = bd.get("scip_rows", 0.0) + time.perf_counter() - tv
                if warm:
                    if builder is not None and ptrs is not None:
                        builder.add_start(sub, ptrs, x_inc[cols])
                    elif sol_path is not None:
                        sub.addSol(sub.readSolFile(sol_path), free=True)
            finally:
                os.unlink(lp_path)
                if sol_path is not None:
                    os.unlink(sol_path)
            if proximity is None:
                if warm:
                    sub.setObjlimit(float(np.sum(inst.c[cols] * x_inc[cols])))
                else:
                    sub.setObjlimit(f_inc - fixed_part)
            sub.setRealParam("limits/time", self._scip_limit(time_limit, time.perf_counter() - t0))
            t1 = time.perf_counter()
            bd["scip_read"] = (
                bd.get("scip_read", 0.0) + t1 - tf - (bd.get("scip_rows", 0.0) - rows_before)
            )
            # The other sub-SCIP's last problem is freed while this one solves.
            self._free_in_background(self._subs[1 - self._turn])
            self._turn = 1 - self._turn
            t1 = time.perf_counter()
            sub.optimizeNogil()
            t2 = time.perf_counter()
            solve_s = t2 - t1
            bd["scip_presolve"] = bd.get("scip_presolve", 0.0) + float(sub.getPresolvingTime())
            status = sub.getStatus()
            self.interrupted = status == "userinterrupt"
            if sub.getNSols() > 0:
                if builder is not None and ptrs is not None:
                    vals = builder.best_values(sub, ptrs)
                    if vals is None:
                        raise PallError(f"{inst.name}: SCIP counts a solution but has no best")
                    x_new = base.copy()
                    x_new[cols] = vals
                else:
                    fd, out = tempfile.mkstemp(prefix="pall-sub-", suffix=".sol")
                    os.close(fd)
                    try:
                        sub.writeBestSol(out)
                        x_new = LpText.read_solution(out, cols, base)
                    finally:
                        os.unlink(out)
                ii = inst.is_int
                x_new[ii] = np.round(x_new[ii])
            elif not warm:
                # Fixed elsewhere than the incumbent (RENS) and no solution: the base point
                # (the incumbent's values on the sub-MIP's columns) was never shown feasible.
                x_new = x_inc
            tb = time.perf_counter()
            bd["read_back"] = bd.get("read_back", 0.0) + tb - t2
            # The solved problem stays in this sub-SCIP until the other one's next solve, when
            # it is freed in the background; waiting for that free is timed as scip_free.
        obj = inst.objective(x_new)
        if not obj < f_inc - 1e-9 * max(1.0, abs(f_inc)):
            return SubMipResult(status, None, f_inc, solve_s, time.perf_counter() - t0 - solve_s)
        return SubMipResult(status, x_new, obj, solve_s, (t1 - t0) + (time.perf_counter() - t2))

    def _add_rows(
        self,
        builder: Any,
        sub: Any,
        red: Any,
        x_inc: np.ndarray,
        hamming: int | None,
        cutoff: float | None,
    ) -> np.ndarray:
        """The rows of ``red`` (and its local-branching or proximity row) added to ``sub``,
        whose variables were just read in the order of ``red.cols``, through SCIP's C API;
        returns those variables' ``SCIP_VAR*`` (valid until the problem is freed)."""
        col, val, row_ptr, lhs, rhs = self._lp.row_arrays(red, x_inc, hamming, cutoff)
        ptrs = builder.var_pointers(sub)
        cols = red.cols
        if ptrs.size != cols.size:
            raise PallError(
                f"{self.inst.name}: SCIP read {ptrs.size} sub-MIP variables, not {cols.size}"
            )
        pos = self._pos
        pos[cols] = np.arange(cols.size)
        if cols.size:  # SCIP kept the order of the objective: spot-check both ends
            names = [builder.var_name(int(ptrs[0])), builder.var_name(int(ptrs[-1]))]
            if names != [f"x{cols[0]}", f"x{cols[-1]}"]:
                raise PallError(f"{self.inst.name}: SCIP reordered the sub-MIP's variables")
        builder.add_rows(sub, ptrs[pos[col]], val, row_ptr, lhs, rhs)
        return ptrs

    def solve_fixed(
        self,
        free: np.ndarray,
        x_inc: np.ndarray,
        time_limit: float,
        hamming: int | None = None,
        *,
        fix_to: np.ndarray | None = None,
        proximity: float | None = None,
    ) -> SubMipResult:
        """Solve the sub-MIP on the one kept model: integer variables outside ``free`` fixed.

        They are fixed to ``x_inc`` (``fix_to`` for RENS: the rounded LP point, warm started
        only where it equals the incumbent) by bound changes in SCIP's problem stage (only
        those that changed since the last sub-MIP), then the model is optimised with the
        sub-MIP's limits (warm start ``x_inc``, objective limit ``f(x_inc)``, ``limits/time``),
        its answer read and ``freeTransform()`` called; the problem itself is never re-read or
        freed. SCIP's presolve removes the fixed columns inside ``optimize()``. With
        ``hamming``, the local-branching row ``sum_{j in F} |x_j - x_inc_j| <= hamming`` over
        the free binaries is added for this solve. With ``proximity = delta`` (Fischetti and
        Monaci 2014) the free variables' objective becomes the Hamming distance to ``x_inc``
        over the free binaries (0 for the others), with the row ``c_F x_F <= f(x_inc) -
        delta_abs - c_fixed x_fixed``: any solution found improves the incumbent.
        """
        t0 = time.perf_counter()
        m, inst, bd = self.model, self.inst, self.breakdown
        fixed = inst.is_int.copy()
        fixed[free] = False
        values = x_inc if fix_to is None else np.where(fixed, fix_to, x_inc)
        warm = fix_to is None or bool(np.array_equal(values, x_inc))
        self._set_bounds(fixed, values)
        f_inc = inst.objective(x_inc)
        extra_cons = None
        prox_vars: np.ndarray | None = None
        vs, quicksum = self.vars, self.scip.quicksum
        if hamming is not None:
            fb = free[inst.is_int[free] & (inst.lb[free] == 0) & (inst.ub[free] == 1)]
            if fb.size:
                ones = fb[x_inc[fb] > 0.5]
                zeros = fb[x_inc[fb] <= 0.5]
                expr = quicksum(vs[j] for j in zeros.tolist()) - quicksum(
                    vs[j] for j in ones.tolist()
                )
                extra_cons = m.addCons(expr <= hamming - ones.size, name="pall_local_branching")
        if proximity is not None:
            sub = np.union1d(free, np.flatnonzero(~inst.is_int))
            binary = inst.is_int[sub] & (inst.lb[sub] == 0) & (inst.ub[sub] == 1)
            dist = np.where(binary, np.where(x_inc[sub] > 0.5, -1.0, 1.0), 0.0)
            # SCIP's coefficients are in the model's sense: internal c = sense * c_model.
            self._set_objective(sub, inst.sense * dist)
            prox_vars = sub
            delta = max(proximity * max(abs(f_inc), 1.0), 1e-6)
            rest = f_inc - float(np.sum(inst.c[sub] * x_inc[sub]))
            nz = sub[inst.c[sub] != 0]
            expr = quicksum(float(inst.c[j]) * vs[j] for j in nz.tolist())
            extra_cons = m.addCons(expr <= f_inc - rest - delta, name="pall_proximity_cutoff")
        tw = time.perf_counter()
        bd["bounds"] = bd.get("bounds", 0.0) + tw - t0
        if warm:
            self._warm_start(x_inc)
        if proximity is None:
            m.setObjlimit(inst.sense * f_inc)
        m.setRealParam("limits/time", self._scip_limit(time_limit, time.perf_counter() - t0))
        t1 = time.perf_counter()
        bd["warm_start"] = bd.get("warm_start", 0.0) + t1 - tw
        m.optimize()
        t2 = time.perf_counter()
        bd["scip_presolve"] = bd.get("scip_presolve", 0.0) + float(m.getPresolvingTime())
        status = m.getStatus()
        self.interrupted = status == "userinterrupt"
        x_new: np.ndarray | None = None
        obj = f_inc
        if m.getNSols() > 0:
            sol = m.getBestSol()
            idx = np.union1d(free, np.flatnonzero(~inst.is_int))
            cand = self._values(sol, idx, values)
            cand_obj = inst.objective(cand)
            if cand_obj < f_inc - 1e-9 * max(1.0, abs(f_inc)):
                x_new, obj = cand, cand_obj
        tf = time.perf_counter()
        bd["read_back"] = bd.get("read_back", 0.0) + tf - t2
        m.freeTransform()
        t3 = time.perf_counter()
        bd["scip_free"] = bd.get("scip_free", 0.0) + t3 - tf
        if extra_cons is not None:
            m.delCons(extra_cons)
        if prox_vars is not None:
            self._set_objective(prox_vars, (inst.sense * inst.c)[prox_vars])
        m.setObjlimit(m.infinity() * inst.sense)  # no limit for the next (initial-style) solve
        t4 = time.perf_counter()
        bd["bounds"] = bd.get("bounds", 0.0) + t4 - t3
        return SubMipResult(status, x_new, obj, t2 - t1, (t1 - t0) + (t4 - t2))
