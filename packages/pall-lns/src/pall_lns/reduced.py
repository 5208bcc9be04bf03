"""Reduced sub-MIPs for large models: only the free variables and the rows they can violate.

On a 100k-variable model, fixing variables by bound changes on one SCIP model makes every
sub-MIP pay for transforming and presolving the whole model (seconds per iteration). Here the
sub-MIP is built from the neighbourhood alone, vectorised over the CSR/CSC matrix:

- fixed part: ``b_r = sum_{j fixed} a_rj x_inc_j = (A x_inc)_r - sum_{j free} a_rj x_inc_j``;
  the row becomes ``row_lo_r - b_r <= sum_{j free} a_rj x_j <= row_hi_r - b_r``;
- a row is dropped when it holds for every value of its free variables within their bounds
  (``min_act_r + b_r >= row_lo_r`` and ``max_act_r + b_r <= row_hi_r``), or has no free variable;
- a free variable in no kept row is set to its cheaper finite bound (or keeps its value).

The work is proportional to the free columns' non-zeros and the kept rows, plus O(m + n)
mask passes. The sub-MIP's variables reach SCIP as LP text (:class:`LpText`): every string that
does not depend on the neighbourhood (variable names, coefficients, bounds) is formatted once per
model, and each sub-MIP is a gather over those token arrays and one ``str.join``, with no Python
loop over its variables or non-zeros. Its rows go as arrays (:meth:`LpText.row_arrays`) through
SCIP's C API (:mod:`pall_lns.capi`), or as LP text too (:meth:`LpText.model`) where that is not
reachable. The warm start and the answer go through the C API as arrays too, or through SCIP
solution files on the LP-text path, so no per-variable PySCIPOpt call remains in the loop.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pall_lns.instance import FEAS_TOL, Instance, ranges

__all__ = ["LpText", "Reduced", "reduce"]


@dataclass
class Reduced:
    cols: np.ndarray  # original indices of the sub-MIP's variables (sorted)
    rows: np.ndarray  # original indices of the kept rows (sorted)
    lo: np.ndarray  # kept rows' sides, shifted by the fixed activity
    hi: np.ndarray
    nz: np.ndarray  # CSR positions of the kept rows' free entries, row by row
    row_ptr: np.ndarray  # ``nz[row_ptr[i]:row_ptr[i + 1]]`` are the entries of ``rows[i]``
    x_base: np.ndarray  # incumbent with the row-free variables already at their best bound
    #: A row without free variables is violated by the fixed values (RENS fixes to a rounded LP
    #: point, which need not satisfy every row): the sub-MIP is infeasible as it stands.
    violated: bool = False


def reduce(
    inst: Instance,
    free_mask: np.ndarray,
    x_inc: np.ndarray,
    act: np.ndarray | None = None,
    tol: float = 1e-9,
    *,
    keep_loose: bool = False,
) -> Reduced:
    """The reduced sub-MIP of ``inst`` where variables outside ``free_mask`` equal ``x_inc``.

    ``act = A x_inc`` (kept by the LNS loop) spares the full product; without it one is made.
    ``keep_loose``: free variables in no kept row stay in the sub-MIP (as variables without
    rows) instead of being set to their best bound here; a local-branching row must count
    them, or they would move outside its Hamming ball."""
    free = np.flatnonzero(free_mask)
    if act is None:
        act = inst.activity(x_inc)
    m = inst.m
    r_all, a, j = inst.column_entries(free)
    with np.errstate(invalid="ignore"):
        lo_c = np.where(a > 0, a * inst.lb[j], a * inst.ub[j])
        hi_c = np.where(a > 0, a * inst.ub[j], a * inst.lb[j])
        fixed_act = act - np.bincount(r_all, weights=a * x_inc[j], minlength=m)
        min_act = np.bincount(r_all, weights=lo_c, minlength=m)
        max_act = np.bincount(r_all, weights=hi_c, minlength=m)
        slack = (min_act + fixed_act >= inst.row_lo - tol) & (
            max_act + fixed_act <= inst.row_hi + tol
        )
    touched = np.bincount(r_all, minlength=m) > 0
    with np.errstate(invalid="ignore"):
        scale = 1.0 + np.maximum(
            np.abs(np.where(np.isfinite(inst.row_lo), inst.row_lo, 0)),
            np.abs(np.where(np.isfinite(inst.row_hi), inst.row_hi, 0)),
        )
        off = ((inst.row_lo - fixed_act) / scale > FEAS_TOL) | (
            (fixed_act - inst.row_hi) / scale > FEAS_TOL
        )
    violated = bool(np.any(off & ~touched))
    rows = np.flatnonzero(touched & ~slack)
    # The kept rows' free entries, read row-wise from the CSR arrays (already in row order).
    p = ranges(inst.indptr, rows)
    in_free = free_mask[inst.indices[p]]
    nz = p[in_free]
    seg = np.repeat(np.arange(rows.size), np.diff(inst.indptr)[rows])
    row_ptr = np.concatenate([[0], np.cumsum(np.bincount(seg[in_free], minlength=rows.size))])
    col_mask = np.zeros(inst.n, dtype=bool)
    col_mask[inst.indices[nz]] = True
    cols = np.flatnonzero(col_mask)
    # Free variables in no kept row: their best bound is optimal (objective only).
    x_base = x_inc.copy()
    loose = free[~col_mask[free]]
    if keep_loose:
        col_mask[loose] = True
        cols = np.flatnonzero(col_mask)
        loose = loose[:0]
    c = inst.c[loose]
    best = np.where(c > 0, inst.lb[loose], np.where(c < 0, inst.ub[loose], x_inc[loose]))
    x_base[loose] = np.where(np.isfinite(best), best, x_inc[loose])
    fixed_kept = fixed_act[rows]
    return Reduced(
        cols,
        rows,
        inst.row_lo[rows] - fixed_kept,
        inst.row_hi[rows] - fixed_kept,
        nz,
        row_ptr.astype(np.int64),
        x_base,
        violated,
    )


def _num(v: float) -> str:
    return f"{v:.17g}"


def _term(v: float) -> str:
    # A unit coefficient is left out (LP format allows it): on a set cover that is every
    # entry, and SCIP's reader then parses a third fewer tokens (0.145 s against 0.16-0.19 s
    # for a 46k-column sub-MIP).
    if abs(v) == 1.0:
        return " + " if v > 0 else " - "
    return f" {'+' if v >= 0 else '-'} {abs(v):.17g} "


def _temp(suffix: str, text: str) -> str:
    fd, path = tempfile.mkstemp(prefix="pall-sub-", suffix=suffix)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return path


def _line(v: float) -> str:
    return f"{v:.17g}\n"


def _tokens(values: np.ndarray, fmt: Callable[[float], str]) -> np.ndarray:
    """``fmt(v)`` for every value as an object array, formatted once per distinct value."""
    if values.size == 0:
        return np.zeros(0, dtype=object)
    uniq, inv = np.unique(values, return_inverse=True)
    table = np.empty(uniq.size, dtype=object)
    table[:] = [fmt(v) for v in uniq.tolist()]
    return table[inv.reshape(-1)]


class LpText:
    """LP-format text of reduced sub-MIPs of one model, built from pre-formatted tokens.

    Variables are named ``x<j>`` by their index in the original model, so a solution file
    maps straight back to it. Built once per model (a few seconds' worth of string formatting
    on a million-non-zero model is paid once, not per iteration)."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        n = inst.n
        self.name_nl = np.array([f"x{j}\n" for j in range(n)], dtype=object)
        self.name_sp = np.array([f"x{j} " for j in range(n)], dtype=object)
        #: ``" + 3 "``-style coefficient tokens of the CSR entries and of the objective.
        self.coef = _tokens(inst.data, _term)
        self.obj = _tokens(inst.c, _term)
        self.binary = inst.is_int & (inst.lb == 0) & (inst.ub == 1)
        other = np.flatnonzero(~self.binary)
        self.bound = np.zeros(n, dtype=object)
        lo, hi = inst.lb[other], inst.ub[other]
        self.bound[other] = [
            f" {'-inf' if not np.isfinite(a) else _num(a)} <= x{j} <= "
            f"{'+inf' if not np.isfinite(b) else _num(b)}\n"
            for j, a, b in zip(other.tolist(), lo.tolist(), hi.tolist(), strict=True)
        ]
        self._hdr: list[str] = []

    def _headers(self, k: int) -> np.ndarray:
        if len(self._hdr) < k:
            self._hdr += [f" c{i}:\n" for i in range(len(self._hdr), max(k, 2 * len(self._hdr)))]
        return np.array(self._hdr[:k], dtype=object)

    def model(
        self,
        red: Reduced,
        x_inc: np.ndarray | None = None,
        hamming: int | None = None,
        proximity_cutoff: float | None = None,
    ) -> str:
        """The LP text of ``red`` (minimisation). With ``hamming`` (and ``x_inc``), the
        local-branching row ``sum_{x_inc=0} x_j - sum_{x_inc=1} x_j <= hamming - |ones|`` over
        the sub-MIP's binaries is added. With ``proximity_cutoff`` (and ``x_inc``), the
        objective is that distance instead (its constant ``|ones|`` dropped) and the row
        ``sum_j c_j x_j <= proximity_cutoff`` keeps only improving solutions."""
        inst, cols = self.inst, red.cols
        parts: list[np.ndarray] = [np.array(["Minimize\n obj:\n"], dtype=object)]
        nzc = cols[inst.c[cols] != 0]
        if nzc.size == 0 and cols.size:
            nzc = cols[:1]
        b = cols[self.binary[cols]]
        if proximity_cutoff is not None and x_inc is not None and b.size:
            obj = np.empty(2 * b.size, dtype=object)
            obj[0::2] = np.where(x_inc[b] > 0.5, " - 1 ", " + 1 ")
            obj[1::2] = self.name_nl[b]
        else:
            obj = np.empty(2 * nzc.size, dtype=object)
            obj[0::2], obj[1::2] = self.obj[nzc], self.name_nl[nzc]
            proximity_cutoff = None
        parts += [obj, np.array(["Subject To\n"], dtype=object)]
        parts.append(self._rows(red))
        if proximity_cutoff is not None:
            row = np.empty(2 * nzc.size + 3, dtype=object)
            row[0] = " pall_proximity_cutoff:\n"
            row[1:-2:2], row[2:-2:2] = self.obj[nzc], self.name_nl[nzc]
            row[-2], row[-1] = " <= ", _line(float(proximity_cutoff))
            parts.append(row)
        if hamming is not None and x_inc is not None and b.size:
            ones = x_inc[b] > 0.5
            row = np.empty(2 * b.size + 3, dtype=object)
            row[0] = " pall_local_branching:\n"
            row[1:-2:2] = np.where(ones, " - 1 ", " + 1 ")
            row[2:-2:2] = self.name_nl[b]
            row[-2], row[-1] = " <= ", _line(float(hamming - int(ones.sum())))
            parts.append(row)
        parts += self._tail(cols)
        return "".join(np.concatenate(parts).tolist())

    def variables(
        self, red: Reduced, x_inc: np.ndarray | None = None, proximity: bool = False
    ) -> str:
        """LP text of ``red``'s variables only (objective, bounds, types; no rows), for
        :mod:`pall_lns.capi` to add the rows to. Every column is in the objective, zero
        coefficients included, so SCIP creates the variables in the order of ``red.cols``.
        ``proximity`` (with ``x_inc``): the distance objective of :meth:`model`."""
        cols = red.cols
        obj = np.empty(2 * cols.size, dtype=object)
        if proximity and x_inc is not None and self.binary[cols].any():
            dist = np.where(x_inc[cols] > 0.5, " - 1 ", " + 1 ")
            obj[0::2] = np.where(self.binary[cols], dist, " + 0 ")
        else:
            obj[0::2] = self.obj[cols]
        obj[1::2] = self.name_nl[cols]
        parts = [np.array(["Minimize\n obj:\n"], dtype=object), obj,
                 np.array(["Subject To\n"], dtype=object)]  # fmt: skip
        return "".join(np.concatenate([*parts, *self._tail(cols)]).tolist())

    def row_arrays(
        self,
        red: Reduced,
        x_inc: np.ndarray | None = None,
        hamming: int | None = None,
        proximity_cutoff: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rows :meth:`model` writes, as arrays: ``(col, val, row_ptr, lhs, rhs)`` with
        the original column index and coefficient of every entry, rows in :meth:`model`'s
        order (ranged rows stay one row)."""
        inst, cols = self.inst, red.cols
        col = [inst.indices[red.nz]]
        val = [inst.data[red.nz]]
        count = [np.diff(red.row_ptr)]
        lhs, rhs = [red.lo], [red.hi]
        b = cols[self.binary[cols]]
        if proximity_cutoff is not None and x_inc is not None and b.size:
            nzc = cols[inst.c[cols] != 0]
            if nzc.size == 0:
                nzc = cols[:1]
            col.append(nzc)
            val.append(inst.c[nzc])
            count.append(np.array([nzc.size]))
            lhs.append(np.array([-np.inf]))
            rhs.append(np.array([float(proximity_cutoff)]))
        if hamming is not None and x_inc is not None and b.size:
            ones = x_inc[b] > 0.5
            col.append(b)
            val.append(np.where(ones, -1.0, 1.0))
            count.append(np.array([b.size]))
            lhs.append(np.array([-np.inf]))
            rhs.append(np.array([float(hamming - int(ones.sum()))]))
        row_ptr = np.concatenate([[0], np.cumsum(np.concatenate(count))]).astype(np.int64)
        return (np.concatenate(col), np.concatenate(val).astype(float), row_ptr,
                np.concatenate(lhs), np.concatenate(rhs))  # fmt: skip

    def _tail(self, cols: np.ndarray) -> list[np.ndarray]:
        """Bounds, Binaries, Generals and End of ``cols``."""
        inst = self.inst
        other = cols[~self.binary[cols]]
        parts = [np.array(["Bounds\n"], dtype=object), self.bound[other]]
        bins = cols[self.binary[cols]]
        if bins.size:
            parts += [np.array(["Binaries\n"], dtype=object), self.name_nl[bins]]
        gen = other[inst.is_int[other]]
        if gen.size:
            parts += [np.array(["Generals\n"], dtype=object), self.name_nl[gen]]
        parts.append(np.array(["End\n"], dtype=object))
        return parts

    def _rows(self, red: Reduced) -> np.ndarray:
        """Constraint tokens: per output row ``[header, (coef, name) x cnt, sense, rhs]``; a
        ranged row (both sides finite and different) is written twice, once per side."""
        lo, hi = red.lo, red.hi
        if lo.size == 0:  # every row dropped (a proximity or local-branching sub-MIP keeps its
            return np.zeros(0, dtype=object)  # variables and adds its own row)
        flo, fhi = np.isfinite(lo), np.isfinite(hi)
        two = flo & fhi & (lo != hi)
        out_row = np.repeat(np.arange(lo.size), 1 + two.astype(np.int64))
        first = np.ones(out_row.size, dtype=bool)
        first[1:] = out_row[1:] != out_row[:-1]
        eq = (flo & fhi & (lo == hi))[out_row]
        use_lo = (flo[out_row] & first) & ~eq  # ">=" rows and the first copy of ranged ones
        sense = np.where(eq, " = ", np.where(use_lo, " >= ", " <= ")).astype(object)
        rhs = np.where(use_lo | eq, lo[out_row], hi[out_row])
        cnt = np.diff(red.row_ptr)[out_row]
        length = 2 * cnt + 3
        start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
        out = np.empty(int(length.sum()), dtype=object)
        out[start] = self._headers(out_row.size)
        out[start + length - 2] = sense
        out[start + length - 1] = _tokens(rhs, _line)
        q = ranges(red.row_ptr, out_row)  # positions into red.nz, row by output row
        within = q - np.repeat(red.row_ptr[out_row], cnt)
        pos = np.repeat(start + 1, cnt) + 2 * within
        nz = red.nz[q]
        out[pos] = self.coef[nz]
        out[pos + 1] = self.name_nl[self.inst.indices[nz]]
        return out

    def write(
        self,
        red: Reduced,
        x_inc: np.ndarray,
        hamming: int | None = None,
        *,
        proximity_cutoff: float | None = None,
        warm: bool = True,
        rows: bool = True,
    ) -> tuple[str, str | None]:
        """Write the sub-MIP and, with ``warm``, the warm start (``x_inc`` on its variables)
        to temporary files; returns both paths (``None`` for no start file; the caller
        deletes them). ``rows=False``: the variables only (:meth:`variables`), the rows (and
        the start) going through :mod:`pall_lns.capi`."""
        text = (
            self.model(red, x_inc, hamming, proximity_cutoff)
            if rows
            else self.variables(red, x_inc, proximity_cutoff is not None)
        )
        lp_path = _temp(".lp", text)
        if not warm:
            return lp_path, None
        cols = red.cols
        nzv = cols[x_inc[cols] != 0]
        sol = np.empty(2 * nzv.size, dtype=object)
        sol[0::2] = self.name_sp[nzv]
        sol[1::2] = _tokens(x_inc[nzv], _line)
        try:
            return lp_path, _temp(".sol", "".join(sol.tolist()))
        except BaseException:
            os.unlink(lp_path)
            raise

    @staticmethod
    def read_solution(path: str, cols: np.ndarray, base: np.ndarray) -> np.ndarray:
        """``base`` with the sub-MIP's variables ``cols`` set from a SCIP solution file
        (``x<j> value (obj:c)`` lines, zeros omitted), parsed as one token array."""
        x = base.copy()
        x[cols] = 0.0
        with open(path) as fh:
            toks = np.array(fh.read().split())
        if toks.size == 0:
            return x
        at = np.flatnonzero(np.char.startswith(toks, "x"))
        at = at[at + 1 < toks.size]
        if at.size:
            x[np.char.lstrip(toks[at], "x").astype(np.int64)] = toks[at + 1].astype(float)
        return x
