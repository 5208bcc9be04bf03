"""Plain-solver baselines at equal wall time, single thread, with incumbent timelines.

- SCIP: default settings (or its AGGRESSIVE heuristics emphasis), ``parallel/maxnthreads = 1``,
  an ``Eventhdlr`` on ``BESTSOLFOUND`` records ``(seconds, objective)`` at each new incumbent;
- HiGHS (highspy): ``threads = 1``, the ``MipImprovingSolution`` callback records the same;
  with ``grace`` it runs in a child process that is stopped ``grace`` seconds after its budget
  (HiGHS reads and presolves a 400k-row model without reaching its interrupt callbacks).

Clocks start before the file is read (``t0``), as for the LNS, so reading is charged equally.
Timelines are in the internal minimisation sense (``sense * objective``).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pall_lns.errors import PallError
from pall_lns.instance import import_scip, read_scip_model

__all__ = ["ALNS_PARAMS", "BaselineResult", "run_highs", "run_scip"]

#: ``scip-alns``: SCIP's ALNS heuristic (heur_alns.c: a bandit over RENS, RINS, mutation,
#: crossover, local branching, proximity, zero-objective, DINS and trust region) called at every
#: node from the root on, with the node budget of SCIP's AGGRESSIVE emphasis and more; the rest
#: of SCIP (its other heuristics included) at defaults. Chosen before any run of it (issue #53):
#: default SCIP calls ALNS at every 20th depth and not during the root, so on these budgets it
#: hardly runs at all.
ALNS_PARAMS: dict[str, Any] = {
    "heuristics/alns/freq": 1,
    "heuristics/alns/freqofs": 0,
    "heuristics/alns/initduringroot": True,
    "heuristics/alns/waitingnodes": 0,
    "heuristics/alns/nodesofs": 2000,
    "heuristics/alns/nodesquot": 0.3,
    "heuristics/alns/trustregion/active": True,
    "heuristics/alns/maxcallssamesol": -1,
}


@dataclass
class BaselineResult:
    objective: float | None  # model's own sense, None without an incumbent
    timeline: list[tuple[float, float]]
    status: str
    wall_s: float
    dual_bound: float | None = None
    sense: float = 1.0  # -1 for maximisation: internal objective = sense * objective


def run_scip(
    path: str | Path,
    time_limit: float,
    *,
    t0: float | None = None,
    seed: int = 0,
    aggressive: bool = False,
    alns: bool = False,
) -> BaselineResult:
    """Plain SCIP for ``time_limit`` wall seconds (measured from ``t0``); ``aggressive``: SCIP's
    AGGRESSIVE heuristics emphasis (its primal heuristics, ALNS, RINS, crossover... run more
    often and longer), the baseline a reviewer asks for against a primal-heuristic method;
    ``alns``: SCIP's own adaptive LNS heuristic turned up (:data:`ALNS_PARAMS`), everything
    else at its defaults: the classical bandit-over-neighbourhoods method PALL's learned
    selector claims to improve on, run inside SCIP rather than replicated in Python."""
    start: float = time.perf_counter() if t0 is None else t0
    scip = import_scip()
    model = read_scip_model(path)
    model.setIntParam("randomization/randomseedshift", seed)
    if aggressive:
        model.setHeuristics(scip.SCIP_PARAMSETTING.AGGRESSIVE)
    if alns:
        for name, value in ALNS_PARAMS.items():
            model.setParam(name, value)
    sense = -1.0 if model.getObjectiveSense() == "maximize" else 1.0
    timeline: list[tuple[float, float]] = []

    class _Best(scip.Eventhdlr):  # type: ignore[misc,name-defined]
        def eventinit(self) -> None:
            self.model.catchEvent(scip.SCIP_EVENTTYPE.BESTSOLFOUND, self)

        def eventexit(self) -> None:
            self.model.dropEvent(scip.SCIP_EVENTTYPE.BESTSOLFOUND, self)

        def eventexec(self, event: Any) -> None:
            obj = self.model.getSolObjVal(self.model.getBestSol())
            timeline.append((time.perf_counter() - start, sense * obj))

    model.includeEventhdlr(_Best(), "pall_best", "incumbent timeline")
    model.setRealParam("limits/time", max(0.05, time_limit - (time.perf_counter() - start)))
    model.optimize()
    status = model.getStatus()
    obj = model.getObjVal() if model.getNSols() > 0 else None
    try:
        dual = float(model.getDualbound())
    except Exception:
        dual = None
    return BaselineResult(obj, timeline, status, time.perf_counter() - start, dual, sense)


def run_highs(
    path: str | Path,
    time_limit: float,
    *,
    t0: float | None = None,
    seed: int = 0,
    grace: float | None = None,
) -> BaselineResult:
    """Plain HiGHS (single thread) for ``time_limit`` wall seconds (measured from ``t0``).

    ``grace``: run it in a child process and stop that ``grace`` seconds after the budget if
    HiGHS has not returned; the incumbents it reported in time are kept. Its own time limit and
    interrupt callbacks (both set) are not reached while HiGHS reads and presolves a large
    model: on a 100k-variable independent set it returned after 298 s of a 25 s budget. The
    child's start-up (spawning Python, importing highspy) is not charged to the budget."""
    start: float = time.perf_counter() if t0 is None else t0
    _require_highspy()
    if grace is None:
        return _highs(str(path), time_limit, start, seed)
    ctx = mp.get_context("spawn")  # no fork of a process that may hold SCIP, torch or threads
    recv, send = ctx.Pipe(duplex=False)
    left = time_limit - (time.perf_counter() - start)
    child = ctx.Process(
        target=_highs_child, args=(send, str(path), left, seed), name="pall-highs", daemon=True
    )
    child.start()
    send.close()
    timeline: list[tuple[float, float]] = []
    sense, status, dual, shift = 1.0, "killed at the deadline", None, 0.0
    try:
        deadline: float | None = None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.perf_counter())
            if not recv.poll(wait):
                break  # past budget + grace: the incumbents so far are the answer
            try:
                msg = recv.recv()
            except EOFError:
                status = "child exited without an answer"
                break
            if msg[0] == "start":  # the child's clock: its budget starts now
                begun = time.perf_counter()
                deadline = begun + max(0.0, left) + grace
                shift = begun - start
            elif msg[0] == "sense":
                sense = float(msg[1])
            elif msg[0] == "sol":
                timeline.append((shift + float(msg[1]), float(msg[2])))
            elif msg[0] == "done":
                res: BaselineResult = msg[1]
                res.timeline = [(shift + t, v) for t, v in res.timeline]
                res.wall_s = shift + res.wall_s
                return res
            elif msg[0] == "error":
                raise PallError(str(msg[1]))
    finally:
        if child.is_alive():
            child.terminate()
            child.join(2.0)
            if child.is_alive():
                child.kill()
                child.join()
        recv.close()
    obj = sense * timeline[-1][1] if timeline else None
    return BaselineResult(obj, timeline, status, time.perf_counter() - start, dual, sense)


def _require_highspy() -> None:
    try:
        import highspy  # noqa: F401
    except ImportError:
        raise PallError(
            "solver HiGHS is missing: highspy is not installed (a dependency of pall-lns: "
            "pip install highspy)"
        ) from None


def _highs_child(conn: Any, path: str, time_limit: float, seed: int) -> None:
    """:func:`run_highs` in a child process: reports its start, every incumbent and the result
    through ``conn`` (times from its own start)."""
    start = time.perf_counter()
    try:
        conn.send(("start",))
        res = _highs(path, time_limit, start, seed, conn)
        conn.send(("done", res))
    except PallError as exc:
        conn.send(("error", str(exc)))
    except KeyboardInterrupt:  # the parent's Ctrl-C reaches the child too; the parent reports
        pass
    finally:
        conn.close()


def _highs(
    path: str, time_limit: float, start: float, seed: int, conn: Any = None
) -> BaselineResult:
    """One HiGHS run for ``time_limit`` seconds from ``start`` (``conn``: report incumbents)."""
    import highspy

    from pall_lns.instance import _quiet_stdout

    with _quiet_stdout():  # HiGHS prints its banner on fd 1 whatever output_flag says
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", seed)
    status = h.readModel(path)
    if status == highspy.HighsStatus.kError:
        raise PallError(f"{path}: HiGHS cannot read the model")
    sense = -1.0 if h.getLp().sense_ == highspy.ObjSense.kMaximize else 1.0
    if conn is not None:
        conn.send(("sense", sense))
    timeline: list[tuple[float, float]] = []

    def _improving(e: Any) -> None:
        point = (time.perf_counter() - start, sense * float(e.data_out.objective_function_value))
        timeline.append(point)
        if conn is not None:
            conn.send(("sol", *point))

    h.cbMipImprovingSolution.subscribe(_improving)
    deadline = start + time_limit

    def _stop_at_deadline(e: Any) -> None:
        # HiGHS's own time_limit was overrun on 100k-variable models (83-88 s for 30 s, and 10+
        # minutes on independent set): its interrupt callbacks enforce the budget as well.
        if time.perf_counter() > deadline:
            e.interrupt()

    for hook in (h.cbSimplexInterrupt, h.cbIpmInterrupt, h.cbMipInterrupt):
        hook.subscribe(_stop_at_deadline)
    h.setOptionValue("time_limit", max(0.05, time_limit - (time.perf_counter() - start)))
    h.run()
    model_status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    obj = float(info.objective_function_value) if info.primal_solution_status == 2 else None
    if obj is not None and not np.isfinite(obj):
        obj = None
    dual = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else None
    return BaselineResult(obj, timeline, model_status, time.perf_counter() - start, dual, sense)
