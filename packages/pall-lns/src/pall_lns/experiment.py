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

from pall_lns.baselines import run_highs, run_scip
from pall_lns.errors import PallError
from pall_lns.lns import LnsConfig, run_lns
from pall_lns.metrics import primal_gap, primal_integral
from pall_lns.selectors import FixedSelector, LearnedSelector, RandomSelector, UCBSelector
from paperstack.records import Claim, Row

__all__ = [
    "CLAIMS",
    "METHODS",
    "RunRecord",
    "claims_from_rows",
    "evaluate",
    "run_method",
    "summarise",
]

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
    """Best known value per instance (internal sense): the best final value of any method, and
    the metadata's ``best_known`` (a long reference run) where there is one."""
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


def _item_row(system: str, metric: str, values: dict[str, float], split: str) -> Row:
    """Per-instance values as a row (paired over instances in claims); one instance gives a
    plain row (n = 1, no interval: any claim on it is inconclusive)."""
    if len(values) >= 2:
        return Row.from_items(system, metric, values, split=split)
    (value,) = values.values()
    return Row(system=system, metric=metric, value=value, n=1, split=split)


def summarise(
    records: Sequence[RunRecord], paths: Sequence[str | Path], time_limit: float
) -> tuple[list[Row], dict[str, Any]]:
    """Rows per method x family (and ``all``) for primal integral and final primal gap.

    Each row carries its per-instance values (``items``, keyed by instance name), so two
    methods compare paired over the same instances: the interval of the mean difference is a
    paired bootstrap over instances (Student t below ten)."""
    refs = _reference(records, paths)
    per: dict[tuple[str, str, str], dict[str, float]] = {}
    for r in records:
        ref = refs[r.instance]
        values = {
            "primal_integral": primal_integral(r.timeline, ref, time_limit),
            "primal_gap": primal_gap(r.final, ref),
        }
        for split in (r.family, "all"):
            for metric, v in values.items():
                per.setdefault((r.method, metric, split), {})[r.instance] = v
    rows = [_item_row(m, metric, vals, split) for (m, metric, split), vals in sorted(per.items())]
    return rows, {"references": refs}


#: The claims of the demo: (id, statement, lhs system, op, rhs system, metric). The premise
#: comes first; every comparison is paired over the test instances ("all" split).
CLAIMS: tuple[tuple[str, str, str, str, str | float, str], ...] = (
    (
        "premise_scip_leaves_room",
        "premise: plain SCIP's incumbent at the budget T is not the best known (its final "
        "primal gap is above 0), so there is something for LNS to improve on",
        "scip",
        "gt",
        0.0,
        "primal_gap",
    ),
    (
        "pall_beats_scip_integral",
        "PALL (learned selector, asynchronous) has a lower mean primal integral than plain SCIP "
        "at equal wall time, paired over the test instances",
        "pall",
        "lt",
        "scip",
        "primal_integral",
    ),
    (
        "pall_beats_highs_integral",
        "PALL has a lower mean primal integral than HiGHS at equal wall time",
        "pall",
        "lt",
        "highs",
        "primal_integral",
    ),
    (
        "learned_beats_bandit",
        "The learned selector (lns-learned, in-process) has a lower mean primal integral than "
        "the UCB bandit (SCIP ALNS style) over the same operators",
        "lns-learned",
        "lt",
        "lns-bandit",
        "primal_integral",
    ),
    (
        "learned_beats_random",
        "The learned selector has a lower mean primal integral than uniform random operator "
        "choice over the same operators",
        "lns-learned",
        "lt",
        "lns-random",
        "primal_integral",
    ),
)


def claims_from_rows(rows: Sequence[Row]) -> list[Claim]:
    """The demo's claims, computed from the rows (claims whose rows are missing are skipped:
    a ``--dataset`` run or a reduced method list)."""
    have = {(r.system, r.metric, r.split) for r in rows}
    claims = []
    for cid, statement, lhs, op, rhs, metric in CLAIMS:
        if (lhs, metric, "all") not in have:
            continue
        if isinstance(rhs, str) and (rhs, metric, "all") not in have:
            continue
        right: tuple[str, str, str] | float = (
            (rhs, metric, "all") if isinstance(rhs, str) else float(rhs)
        )
        claims.append(
            Claim.compare(cid, statement, rows, (lhs, metric, "all"), op, right)  # type: ignore[arg-type]
        )
    return claims
