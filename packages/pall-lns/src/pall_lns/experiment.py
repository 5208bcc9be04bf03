"""Equal-wall-time evaluation: plain SCIP, HiGHS, LNS baselines and PALL on the same instances.

Every method gets the same wall budget ``T`` (clock started before the file is read), a single
thread, and produces an incumbent timeline; from it the primal integral and the final primal gap
are computed against one reference per instance: the best of the metadata's ``best_known`` (a
long reference run) and every method's final value.

Methods: ``scip``, ``highs``, ``lns-random`` (uniform over the ensemble), ``lns-best-single``
(the ensemble's best operator on the training instances), ``lns-bandit`` (UCB, SCIP ALNS style),
``lns-learned`` (the learned selector, called in-process) and ``pall`` (the same selector deployed
asynchronously in a separate process: the full method). The learned-vs-bandit/random claims
compare ``lns-learned`` (the selector itself); the claims against SCIP and HiGHS use ``pall``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pall_lns.baselines import run_highs, run_scip
from pall_lns.errors import PallError
from pall_lns.lns import LnsConfig, run_lns
from pall_lns.metrics import primal_gap, primal_integral
from pall_lns.selectors import FixedSelector, LearnedSelector, RandomSelector, UCBSelector
from paperstack.records import Claim, Row
from paperstack.stats import mean_ci

__all__ = ["METHODS", "RunRecord", "claims_from_rows", "evaluate", "summarise"]

METHODS = ("scip", "highs", "lns-random", "lns-best-single", "lns-bandit", "lns-learned", "pall")


@dataclass
class RunRecord:
    instance: str
    family: str
    method: str
    final: float | None  # internal (minimisation) objective
    timeline: list[tuple[float, float]]
    wall_s: float
    info: dict[str, Any] = field(default_factory=dict)


def run_method(
    method: str,
    path: str | Path,
    time_limit: float,
    seed: int,
    selector: LearnedSelector,
    best_single: int,
) -> RunRecord:
    """One method on one instance for ``time_limit`` wall seconds."""
    t0 = time.perf_counter()
    p = Path(path)
    fam = str(read_instance_meta(p).get("family", "user"))
    if method in ("scip", "highs"):
        fn = run_scip if method == "scip" else run_highs
        base = fn(p, time_limit, t0=t0, seed=seed)
        final = None if base.objective is None else base.sense * base.objective
        return RunRecord(
            p.name, fam, method, final, base.timeline, base.wall_s, {"status": base.status}
        )
    ops = selector.ops
    sel: Any
    cfg = LnsConfig(time_limit, seed=seed)
    if method == "lns-random":
        sel = RandomSelector(seed)
    elif method == "lns-best-single":
        sel = FixedSelector(best_single)
    elif method == "lns-bandit":
        sel = UCBSelector(len(ops), seed=seed)
    elif method == "lns-learned":
        sel = selector
    elif method == "pall":
        sel = selector
        cfg = LnsConfig(time_limit, seed=seed, async_select=True)
    else:
        raise ValueError(method)
    try:
        res = run_lns(p, ops, sel, cfg, t0=t0)
    except PallError as exc:  # e.g. SCIP found no incumbent within the whole budget
        return RunRecord(
            p.name, fam, method, None, [], time.perf_counter() - t0, {"error": str(exc)}
        )
    final = None if res.x is None else -res.objective if res.stats["sense"] < 0 else res.objective
    return RunRecord(
        p.name,
        fam,
        method,
        final,
        res.timeline,
        res.wall_s,
        {
            "iterations": res.iterations,
            "overhead": res.overhead,
            "op_counts": res.op_counts,
            "fallbacks": res.fallbacks,
        },
    )


def read_instance_meta(path: Path) -> dict[str, Any]:
    import json

    side = path.with_name(path.name.split(".")[0] + ".json")
    if side.is_file():
        data = json.loads(side.read_text())
        return data if isinstance(data, dict) else {}
    return {}


def evaluate(
    paths: Sequence[str | Path],
    time_limit: float,
    selector: LearnedSelector,
    best_single: int,
    *,
    methods: Sequence[str] = METHODS,
    seed: int = 0,
    log: Callable[[RunRecord], None] | None = None,
) -> list[RunRecord]:
    records = []
    for path in paths:
        for method in methods:
            rec = run_method(method, path, time_limit, seed, selector, best_single)
            records.append(rec)
            if log:
                log(rec)
    return records


def _reference(records: Sequence[RunRecord], paths: Sequence[str | Path]) -> dict[str, float]:
    refs: dict[str, float] = {}
    for p in paths:
        p = Path(p)
        meta = read_instance_meta(p)
        vals = [r.final for r in records if r.instance == p.name and r.final is not None]
        if "best_known" in meta:
            sense = -1.0 if meta.get("sense") == "maximize" else 1.0
            vals.append(sense * float(meta["best_known"]))
        refs[p.name] = min(vals) if vals else 0.0
    return refs


def summarise(
    records: Sequence[RunRecord], paths: Sequence[str | Path], time_limit: float
) -> tuple[list[Row], dict[str, Any]]:
    """Rows per method x family (and ``all``) for primal integral and final primal gap."""
    refs = _reference(records, paths)
    per: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in records:
        ref = refs[r.instance]
        pi = primal_integral(r.timeline, ref, time_limit)
        gap = primal_gap(r.final, ref)
        for split in (r.family, "all"):
            d = per.setdefault((r.method, split), {"primal_integral": [], "primal_gap": []})
            d["primal_integral"].append(pi)
            d["primal_gap"].append(gap)
    rows: list[Row] = []
    for (method, split), d in sorted(per.items()):
        for metric, vals in d.items():
            if len(vals) >= 2:
                m, ci = mean_ci(vals)
                rows.append(
                    Row(system=method, metric=metric, value=m, ci95=ci, n=len(vals), split=split)
                )
            else:
                rows.append(
                    Row(system=method, metric=metric, value=float(vals[0]), n=1, split=split)
                )
    families = sorted({r.family for r in records})
    for base in ("scip", "highs"):
        wins = sum(
            1
            for f in families
            if (
                ("pall", f) in per
                and (base, f) in per
                and np.mean(per[("pall", f)]["primal_integral"])
                < np.mean(per[(base, f)]["primal_integral"])
            )
        )
        rows.append(
            Row(
                system=f"pall-vs-{base}",
                metric="families_lower_integral",
                value=float(wins),
                n=len(families),
                split="all",
            )
        )
    return rows, {"references": refs}


def claims_from_rows(rows: Sequence[Row]) -> list[Claim]:
    """The issue's four claims, computed from the rows."""
    have = {(r.system, r.metric, r.split) for r in rows}
    claims = []
    for base, shown in (("scip", "SCIP"), ("highs", "HiGHS")):
        claims.append(
            Claim.compare(
                f"pall_beats_{base}_integral",
                f"PALL has a lower mean primal integral than plain {shown} "
                "at equal wall time on at least 3 of the 4 families.",
                rows,
                (f"pall-vs-{base}", "families_lower_integral", "all"),
                "ge",
                3.0,
            )
        )
    for base, cid in (
        ("lns-bandit", "learned_beats_bandit"),
        ("lns-random", "learned_beats_random"),
    ):
        if ("lns-learned", "primal_integral", "all") in have and (
            base,
            "primal_integral",
            "all",
        ) in have:
            claims.append(
                Claim.compare(
                    cid,
                    "The learned selector (lns-learned) has a lower mean primal integral than "
                    f"{base} over all test instances.",
                    rows,
                    ("lns-learned", "primal_integral", "all"),
                    "lt",
                    (base, "primal_integral", "all"),
                )
            )
    return claims
