"""Rows of a sub-MIP handed to SCIP's C API from arrays, without its text reader.

Profiling SCIP's LP reader on a 90k-column, 750k-non-zero sub-MIP of the 100k set cover (0.4-0.6
s per read) put half of it in looking up every coefficient's variable by name
(``SCIPhashtableRetrieve``, ``SCIPhashGetKeyVar``, ``strcmp``: a hash lookup and a cache miss per
non-zero), and our LP text for those rows cost another 0.2-0.3 s. Variables are cheap to read
(0.05 s for 80k columns with no rows), so a reduced sub-MIP now reaches SCIP in two parts: its
variables, objective and bounds as a small LP text, and its rows through
``SCIPcreateConsBasicLinear(scip, &cons, "", nvars, vars, vals, lhs, rhs)`` called by
:mod:`ctypes` with the variables' ``SCIP_VAR*`` gathered by numpy from ``SCIPgetVars``: no
names, no parsing, one call per row into the same ``libscip`` that PySCIPOpt loaded.

The warm start and the answer take the same road (0.2.4): the incumbent's values go in with
``SCIPcreateSol``/``SCIPsetSolVals``/``SCIPaddSolFree`` and the best solution comes back with
``SCIPgetBestSol``/``SCIPgetSolVals``, one call each over the same ``SCIP_VAR*`` array, where
0.2.3 wrote and parsed a solution file both ways (SCIP looks every line's variable up by name).

The library is found among the loaded objects of the process (``/proc/self/maps``) or beside
PySCIPOpt (``pyscipopt.libs``, ``.dylibs``, ``lib``); a missing library, symbol or ABI mismatch
leaves :func:`load` returning ``None`` with the reason, and the caller writes the rows as LP
text (the 0.2.2 path). Every SCIP call's return code is checked.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pall_lns.errors import PallError

__all__ = ["RowBuilder", "load"]


_SCIP_OKAY = 1
_state: dict[str, Any] = {}


def _library_paths() -> list[str]:
    """``libscip`` as loaded by PySCIPOpt first (the same copy, so the same SCIP), then beside
    the package."""
    import pyscipopt

    found: list[str] = []
    maps = Path("/proc/self/maps")
    if maps.exists():
        for line in maps.read_text().splitlines():
            part = line.split()
            if len(part) >= 6 and "libscip" in os.path.basename(part[-1]):
                found.append(part[-1])
    root = Path(pyscipopt.__file__).resolve().parent
    for where in (root.parent / "pyscipopt.libs", root / ".dylibs", root.parent / "lib",
                  Path(sys.prefix) / "lib"):  # fmt: skip
        found += sorted(glob.glob(str(where / "libscip*")))
    return list(dict.fromkeys(found))


class RowBuilder:
    """``SCIPcreateConsBasicLinear``/``SCIPaddCons``/``SCIPreleaseCons`` and ``SCIPgetVars``
    over ctypes, for PySCIPOpt models in the problem stage; the warm start and the best
    solution's values through ``SCIPsetSolVals``/``SCIPgetSolVals``."""

    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        vp, i = ctypes.c_void_p, ctypes.c_int
        self.path = path
        self._create = lib.SCIPcreateConsBasicLinear
        self._create.argtypes = [vp, ctypes.POINTER(vp), ctypes.c_char_p, i, vp, vp,
                                 ctypes.c_double, ctypes.c_double]  # fmt: skip
        self._create.restype = i
        self._add = lib.SCIPaddCons
        self._add.argtypes = [vp, vp]
        self._add.restype = i
        self._release = lib.SCIPreleaseCons
        self._release.argtypes = [vp, ctypes.POINTER(vp)]
        self._release.restype = i
        self._vars = lib.SCIPgetVars
        self._vars.argtypes = [vp]
        self._vars.restype = ctypes.POINTER(ctypes.c_uint64)
        self._nvars = lib.SCIPgetNVars
        self._nvars.argtypes = [vp]
        self._nvars.restype = i
        self._nconss = lib.SCIPgetNConss
        self._nconss.argtypes = [vp]
        self._nconss.restype = i
        self._name = lib.SCIPvarGetName
        self._name.argtypes = [vp]
        self._name.restype = ctypes.c_char_p
        self._create_sol = lib.SCIPcreateSol
        self._create_sol.argtypes = [vp, ctypes.POINTER(vp), vp]
        self._create_sol.restype = i
        self._set_vals = lib.SCIPsetSolVals
        self._set_vals.argtypes = [vp, vp, i, vp, vp]
        self._set_vals.restype = i
        self._add_sol = lib.SCIPaddSolFree
        self._add_sol.argtypes = [vp, ctypes.POINTER(vp), ctypes.POINTER(ctypes.c_uint)]
        self._add_sol.restype = i
        self._best = lib.SCIPgetBestSol
        self._best.argtypes = [vp]
        self._best.restype = vp
        self._get_vals = lib.SCIPgetSolVals
        self._get_vals.argtypes = [vp, vp, i, vp, vp]
        self._get_vals.restype = i
        self._capsule = ctypes.pythonapi.PyCapsule_GetPointer
        self._capsule.argtypes = [ctypes.py_object, ctypes.c_char_p]
        self._capsule.restype = vp

    def scip(self, model: Any) -> int:
        """The model's ``SCIP*``."""
        ptr = self._capsule(model.to_ptr(False), b"scip")
        if not ptr:
            raise PallError("PySCIPOpt returned no SCIP pointer")
        return int(ptr)

    def var_pointers(self, model: Any) -> np.ndarray:
        """The model's ``SCIP_VAR*`` in SCIP's order, as ``uint64`` (a copy: SCIP's array
        moves when variables are added)."""
        scip = self.scip(model)
        n = int(self._nvars(scip))
        if n == 0:
            return np.zeros(0, dtype=np.uint64)
        return np.ctypeslib.as_array(self._vars(scip), shape=(n,)).copy()

    def var_name(self, ptr: int) -> str:
        """``SCIPvarGetName`` of a ``SCIP_VAR*`` from :meth:`var_pointers`."""
        name = self._name(ptr)
        return name.decode() if name is not None else ""

    def add_rows(
        self,
        model: Any,
        var_ptrs: np.ndarray,
        vals: np.ndarray,
        row_ptr: np.ndarray,
        lhs: np.ndarray,
        rhs: np.ndarray,
    ) -> None:
        """Add row ``i``: ``lhs[i] <= sum_k vals[k] x_{var_ptrs[k]} <= rhs[i]`` over
        ``k in row_ptr[i]:row_ptr[i+1]`` (infinite sides as SCIP's infinity), unnamed."""
        scip = self.scip(model)
        inf = float(model.infinity())
        ptrs = np.ascontiguousarray(var_ptrs, dtype=np.uint64)
        vals = np.ascontiguousarray(vals, dtype=np.float64)
        lo = np.where(np.isfinite(lhs), lhs, -inf).astype(np.float64)
        hi = np.where(np.isfinite(rhs), rhs, inf).astype(np.float64)
        if ptrs.size != vals.size or row_ptr.size != lo.size + 1 or int(row_ptr[-1]) != ptrs.size:
            raise PallError("internal error: row arrays of different lengths")
        before = int(self._nconss(scip))
        base_v, base_a = ptrs.ctypes.data, vals.ctypes.data
        cons = ctypes.c_void_p()
        ref = ctypes.byref(cons)
        create, add, release = self._create, self._add, self._release
        start = row_ptr[:-1].tolist()
        count = np.diff(row_ptr).tolist()
        for a, k, left, right in zip(start, count, lo.tolist(), hi.tolist(), strict=True):
            if create(scip, ref, b"", k, base_v + 8 * a, base_a + 8 * a, left, right) != _SCIP_OKAY:
                raise PallError("SCIP could not create a sub-MIP row (SCIPcreateConsBasicLinear)")
            ok = add(scip, cons) == _SCIP_OKAY
            if release(scip, ref) != _SCIP_OKAY or not ok:
                raise PallError("SCIP could not add a sub-MIP row (SCIPaddCons)")
        if int(self._nconss(scip)) != before + lo.size:
            raise PallError("SCIP's row count differs from the rows added")

    def add_start(self, model: Any, var_ptrs: np.ndarray, values: np.ndarray) -> bool:
        """Hand SCIP a starting solution: ``values[i]`` for ``var_ptrs[i]`` (the others 0),
        as PySCIPOpt's ``addSol(readSolFile(...))`` did from a file; returns whether SCIP
        stored it. For a model in the problem stage, whose variables are ``var_ptrs``."""
        scip = self.scip(model)
        ptrs = np.ascontiguousarray(var_ptrs, dtype=np.uint64)
        vals = np.ascontiguousarray(values, dtype=np.float64)
        if ptrs.size != vals.size:
            raise PallError("internal error: start values and variables of different lengths")
        sol = ctypes.c_void_p()
        if self._create_sol(scip, ctypes.byref(sol), None) != _SCIP_OKAY:
            raise PallError("SCIP could not create the sub-MIP's start (SCIPcreateSol)")
        ok = self._set_vals(scip, sol, ptrs.size, ptrs.ctypes.data, vals.ctypes.data)
        stored = ctypes.c_uint(0)  # SCIP_Bool; SCIPaddSolFree frees the solution either way
        if self._add_sol(scip, ctypes.byref(sol), ctypes.byref(stored)) != _SCIP_OKAY:
            raise PallError("SCIP could not take the sub-MIP's start (SCIPaddSolFree)")
        if ok != _SCIP_OKAY:
            raise PallError("SCIP could not set the sub-MIP's start (SCIPsetSolVals)")
        return bool(stored.value)

    def best_values(self, model: Any, var_ptrs: np.ndarray) -> np.ndarray | None:
        """Values of ``var_ptrs`` (original variables) in SCIP's best solution, or ``None``
        when it has none; one ``SCIPgetSolVals`` call, no solution file."""
        scip = self.scip(model)
        sol = self._best(scip)
        if not sol:
            return None
        ptrs = np.ascontiguousarray(var_ptrs, dtype=np.uint64)
        out = np.empty(ptrs.size, dtype=np.float64)
        code = _SCIP_OKAY
        if ptrs.size:
            code = self._get_vals(scip, sol, ptrs.size, ptrs.ctypes.data, out.ctypes.data)
        if code != _SCIP_OKAY:
            raise PallError("SCIP could not give the sub-MIP's solution (SCIPgetSolVals)")
        return out


def load() -> RowBuilder | None:
    """The shared :class:`RowBuilder`, or ``None`` (reason in :func:`reason`) where the C API
    cannot be reached; ``PALL_SUBMIP_BUILDER=lp`` turns it off (the LP-text rows of 0.2.2)."""
    if "builder" in _state:
        return _state["builder"]  # type: ignore[no-any-return]
    builder: RowBuilder | None = None
    why = ""
    if os.environ.get("PALL_SUBMIP_BUILDER", "").strip().lower() == "lp":
        why = "PALL_SUBMIP_BUILDER=lp"
    else:
        paths = _library_paths()
        why = "no libscip found beside PySCIPOpt" if not paths else ""
        for path in paths:
            try:
                builder = _check(RowBuilder(path))
                break
            except (OSError, AttributeError, PallError) as err:
                why = f"{path}: {err}"
    _state["builder"], _state["reason"] = builder, why
    return builder


def reason() -> str:
    """Why :func:`load` gave ``None`` ('' when it did not)."""
    load()
    return str(_state.get("reason", ""))


def _check(builder: RowBuilder) -> RowBuilder:
    """A two-row problem with known optimum 2 at [0, 1, 0], its variables read as LP text, its
    rows added through ``builder`` and the start [1, 0, 1] (value 4) handed over; solved once
    stopping at the first solution (the start must come back) and once to optimality (the
    optimum must come back): catches a different SCIP copy or ABI before any real sub-MIP
    depends on it."""
    import tempfile

    import pyscipopt

    m = pyscipopt.Model()
    m.hideOutput()
    fd, path = tempfile.mkstemp(prefix="pall-capi-", suffix=".lp")
    with os.fdopen(fd, "w") as fh:
        fh.write("Minimize\n obj: + 1 x0 + 2 x1 + 3 x2\nSubject To\nBinaries\nx0\nx1\nx2\nEnd\n")
    try:
        m.readProblem(path)
    finally:
        os.unlink(path)
    ptrs = builder.var_pointers(m)
    mine = [int(v.ptr()) for v in m.getVars()]
    if ptrs.tolist() != mine or [builder.var_name(p) for p in mine] != ["x0", "x1", "x2"]:
        raise PallError("SCIPgetVars disagrees with PySCIPOpt's variables")
    builder.add_rows(m, ptrs[[0, 1, 1, 2]], np.ones(4), np.array([0, 2, 4]),
                     np.array([1.0, 1.0]), np.array([np.inf, np.inf]))  # fmt: skip
    if not builder.add_start(m, ptrs, np.array([1.0, 0.0, 1.0])) or m.getNSols() != 1:
        raise PallError("SCIP did not store the check problem's start (value 4)")
    m.setIntParam("limits/solutions", 1)  # stop at the start: it is what SCIP reports back
    m.optimize()
    start = builder.best_values(m, ptrs)
    if start is None or start.tolist() != [1.0, 0.0, 1.0]:
        raise PallError(f"check problem's start read back as {start}, not [1, 0, 1]")
    m.freeTransform()
    m.setIntParam("limits/solutions", -1)
    m.optimize()
    best = builder.best_values(m, ptrs)
    if m.getStatus() != "optimal" or abs(m.getObjVal() - 2.0) > 1e-9:
        raise PallError(f"check problem solved to {m.getStatus()} {m.getObjVal()}, not 2")
    if best is None or best.tolist() != [0.0, 1.0, 0.0]:
        raise PallError(f"check problem's optimum read back as {best}, not [0, 1, 0]")
    return builder
