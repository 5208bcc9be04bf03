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
    over ctypes, for PySCIPOpt models in the problem stage."""

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
    """A two-row problem with known optimum 2, its variables read as LP text and its rows added
    through ``builder``: catches a different SCIP copy or ABI before any real sub-MIP depends
    on it."""
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
    m.optimize()
    if m.getStatus() != "optimal" or abs(m.getObjVal() - 2.0) > 1e-9:
        raise PallError(f"check problem solved to {m.getStatus()} {m.getObjVal()}, not 2")
    return builder
