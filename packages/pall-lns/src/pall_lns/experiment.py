"""Equal-wall-time evaluation: plain SCIP, HiGHS, LNS baselines and PALL on the same instances.

Online, every method gets the same wall budget ``T`` (clock started before the file is read), a
single thread, and produces an incumbent timeline; from it the primal integral and the final
primal gap are computed against one reference per instance: the best of the metadata's
``best_known`` (a long reference run, if any) and every method's final value.

Methods: ``scip`` (default settings), ``scip-aggressive`` (SCIP's AGGRESSIVE heuristics
emphasis), ``scip-alns`` (SCIP's own ALNS heuristic at every node, the rest default:
:data:`~pall_lns.baselines.ALNS_PARAMS`), ``highs``; LNS over the same operator ensemble with
``lns-random`` (uniform), ``lns-best-single`` (the ensemble's best operator on the training
instances), ``lns-bandit`` (UCB, SCIP ALNS style), ``lns-linear`` (the softmax-linear selector,
the cheap baseline), ``lns-lm`` (the fine-tuned LM selector called in-process: equal cores, its
decision latency charged to the budget) and ``pall`` (the same LM deployed asynchronously in
its worker process: the paper's method; its worker's CPU time is reported, and its start-up is
outside the budget).

Offline, the selectors are scored on held-out hindsight-oracle states (records of instances
never trained on, of the training families and of an unseen one): at each state the oracle ran
every operator from the same incumbent, so a selector's choice earns ``r_choice / max_o r_o``
(1 = the oracle's choice), paired over states with every other selector.
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

__all__ = [
    "CLAIMS",
    "METHODS",
    "RunRecord",
    "Selectors",
    "claims_from_rows",
    "evaluate",
    "run_method",
    "summarise",
]

METHODS = (
    "scip",
    "scip-aggressive",
    "scip-alns",
    "highs",
    "lns-random",
    "lns-best-single",
    "lns-bandit",
    "lns-linear",
    "lns-lm",
    "pall",
)


@dataclass
class RunRecord:
    instance: str
    family: str
    method: str
    final: float | None  # internal (minimisation) objective
    timeline: list[tuple[float, float]]
    wall_s: float
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Selectors:
    """The selectors the methods use: the softmax-linear baseline (its ensemble is everyone's
    operator pool), the fine-tuned LM (None: the LM methods are skipped), the best single op."""

    linear: LearnedSelector
    lm: Any = None
    best_single: int = 0


def run_method(
    method: str,
    path: str | Path,
    time_limit: float,
    seed: int,
    selectors: Selectors,
    *,
    background_free: bool = True,
    highs_grace: float | None = None,
) -> RunRecord:
    """One method on one instance for ``time_limit`` wall seconds.

    ``background_free=False``: LNS methods free their solved sub-MIPs on the critical path
    (one core, as the solvers get); ``highs_grace``: HiGHS runs in a child process stopped that
    long after its budget (:func:`~pall_lns.baselines.run_highs`)."""
    t0 = time.perf_counter()
    p = Path(path)
    fam = str(read_instance_meta(p).get("family", "user"))
    if method in ("scip", "scip-aggressive", "scip-alns", "highs"):
        if method == "highs":
            base = run_highs(p, time_limit, t0=t0, seed=seed, grace=highs_grace)
        else:
            aggressive, alns = method == "scip-aggressive", method == "scip-alns"
            base = run_scip(p, time_limit, t0=t0, seed=seed, aggressive=aggressive, alns=alns)
        final = None if base.objective is None else base.sense * base.objective
        return RunRecord(
            p.name, fam, method, final, base.timeline, base.wall_s, {"status": base.status}
        )
    ops = selectors.linear.ops
    sel: Any
    cfg = LnsConfig(time_limit, seed=seed, background_free=background_free)
    if method == "lns-random":
        sel = RandomSelector(seed)
    elif method == "lns-best-single":
        sel = FixedSelector(selectors.best_single)
    elif method == "lns-bandit":
        sel = UCBSelector(len(ops), seed=seed)
    elif method == "lns-linear":
        sel = selectors.linear
    elif method in ("lns-lm", "pall"):
        if selectors.lm is None:
            raise PallError(f"method {method}: no LM selector given")
        sel = selectors.lm
        cfg = LnsConfig(
            time_limit, seed=seed, async_select=method == "pall", background_free=background_free
        )
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
            "worker_startup_s": res.stats["worker_startup_s"],
            "worker_cpu_s": res.stats["worker_cpu_s"],
            "decision_s": res.stats["decision_s"],
            "decisions": res.stats["decisions"],
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
    selectors: Selectors,
    *,
    methods: Sequence[str] = METHODS,
    seed: int = 0,
    log: Callable[[RunRecord], None] | None = None,
) -> list[RunRecord]:
    records = []
    for path in paths:
        for method in methods:
            rec = run_method(method, path, time_limit, seed, selectors)
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


def final_within(r: RunRecord, time_limit: float) -> float | None:
    """The run's final value if it kept to its budget (5% + 0.1 s of slack), else the best
    incumbent of its timeline found within it: HiGHS can overrun its time limit on 100k-variable
    models (83 s for 30 s seen), and what it finds after T must not count."""
    limit = time_limit * 1.05 + 0.1
    if r.wall_s <= limit:
        return r.final
    inside = [v for t, v in r.timeline if t <= limit]
    return min(inside) if inside else None


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
            "primal_gap": primal_gap(final_within(r, time_limit), ref),
        }
        for split in (r.family, "all"):
            for metric, v in values.items():
                per.setdefault((r.method, metric, split), {})[r.instance] = v
    rows = [_item_row(m, metric, vals, split) for (m, metric, split), vals in sorted(per.items())]
    return rows, {"references": refs}


#: The claims of the demo: (id, statement, lhs system, op, rhs system or constant, metric,
#: split). The premises come first; every comparison is paired over instances or states.
CLAIMS: tuple[tuple[str, str, str, str, str | float, str, str], ...] = (
    (
        "premise_scip_leaves_room",
        "premise: plain SCIP's incumbent at the budget T is not the best known (its final "
        "primal gap is above 0), so there is something for LNS to improve on",
        "scip", "gt", 0.0, "primal_gap", "all",
    ),
    (
        "premise_operator_choice_matters",
        "premise: on held-out oracle states a uniformly random operator earns less than 90% of "
        "the best operator's reward, so choosing the operator matters",
        "random", "lt", 0.9, "oracle_reward_share", "heldout-same",
    ),
    (
        "lm_beats_random_heldout",
        "Held-out instances of the training families: the fine-tuned LM's choices earn a "
        "larger share of the oracle's reward than random choice",
        "lm", "gt", "random", "oracle_reward_share", "heldout-same",
    ),
    (
        "lm_beats_random_unseen_family",
        "An unseen family (independent set): the LM's choices earn a larger share of the "
        "oracle's reward than random choice",
        "lm", "gt", "random", "oracle_reward_share", "heldout-unseen",
    ),
    (
        "lm_beats_linear_heldout",
        "Held-out instances of the training families: the LM's choices earn a larger share of "
        "the oracle's reward than the softmax-linear selector's",
        "lm", "gt", "linear", "oracle_reward_share", "heldout-same",
    ),
    (
        "pall_beats_scip_integral",
        "PALL (LM selector, asynchronous) has a lower mean primal integral than plain SCIP at "
        "equal wall time, paired over the test instances",
        "pall", "lt", "scip", "primal_integral", "all",
    ),
    (
        "pall_beats_scip_aggressive_integral",
        "PALL has a lower mean primal integral than SCIP with aggressive heuristics",
        "pall", "lt", "scip-aggressive", "primal_integral", "all",
    ),
    (
        "pall_beats_highs_integral",
        "PALL has a lower mean primal integral than HiGHS at equal wall time",
        "pall", "lt", "highs", "primal_integral", "all",
    ),
    (
        "pall_beats_scip_alns_integral",
        "PALL has a lower mean primal integral than SCIP with its own ALNS heuristic at every "
        "node (scip-alns: a bandit over SCIP's neighbourhoods, inside SCIP)",
        "pall", "lt", "scip-alns", "primal_integral", "all",
    ),
    (
        "pall_beats_scip_final_gap",
        "Final quality: PALL's primal gap at the budget T (to the best value known) is lower "
        "than plain SCIP's, paired over the test instances",
        "pall", "lt", "scip", "primal_gap", "all",
    ),
    (
        "pall_beats_scip_aggressive_final_gap",
        "Final quality: PALL's primal gap at T is lower than SCIP's with aggressive heuristics",
        "pall", "lt", "scip-aggressive", "primal_gap", "all",
    ),
    (
        "pall_beats_scip_alns_final_gap",
        "Final quality: PALL's primal gap at T is lower than SCIP's with its ALNS at every node",
        "pall", "lt", "scip-alns", "primal_gap", "all",
    ),
    (
        "pall_beats_highs_final_gap",
        "Final quality: PALL's primal gap at T is lower than HiGHS's",
        "pall", "lt", "highs", "primal_gap", "all",
    ),
    (
        "lm_beats_bandit",
        "Equal cores: LNS with the LM selector in-process (lns-lm) has a lower mean primal "
        "integral than the UCB bandit (SCIP ALNS style) over the same operators",
        "lns-lm", "lt", "lns-bandit", "primal_integral", "all",
    ),
    (
        "lm_beats_random_online",
        "Equal cores: lns-lm has a lower mean primal integral than uniform random operator "
        "choice over the same operators",
        "lns-lm", "lt", "lns-random", "primal_integral", "all",
    ),
    (
        "async_beats_sync",
        "Asynchronous deployment (pall) has a lower mean primal integral than the same LM "
        "deciding in-process (lns-lm), its decision latency hidden behind the sub-MIPs",
        "pall", "lt", "lns-lm", "primal_integral", "all",
    ),
)  # fmt: skip


#: Per family (a split with at least two instances): PALL against these on both metrics.
FAMILY_BASELINES = ("scip", "scip-alns", "highs")

#: Premise each claim rests on (gated: not held means inconclusive, what was measured is kept).
#: Beating SCIP needs SCIP to leave room; an online selector claim needs operator choice to
#: matter; the LM's offline claims need it too.
_ONLINE_SCIP = ("scip", "scip-aggressive", "scip-alns")


def _premise_of(cid: str, lhs: str, rhs: str | float, metric: str) -> str | None:
    if cid.startswith("premise"):
        return None
    if metric == "oracle_reward_share" or cid in ("lm_beats_bandit", "lm_beats_random_online"):
        return "premise_operator_choice_matters"
    if lhs == "pall" and rhs in _ONLINE_SCIP:
        return "premise_scip_leaves_room"
    return None


def claims_from_rows(rows: Sequence[Row]) -> list[Claim]:
    """The demo's claims, computed from the rows (claims whose rows are missing are skipped:
    a ``--dataset`` run, or no LM), then per family (every split other than ``all`` and the
    held-out ones with two or more instances) PALL against :data:`FAMILY_BASELINES` on the
    primal integral and the final primal gap. Each claim is gated on its premise
    (:func:`_premise_of`)."""
    have = {(r.system, r.metric, r.split) for r in rows}
    sizes = {(r.system, r.metric, r.split): len(r.items or ()) for r in rows}
    specs = list(CLAIMS)
    families: list[str] = sorted(
        str(split)
        for system, metric, split in have
        if system == "pall" and metric == "primal_gap" and split not in (None, "all")
        and sizes[(system, metric, split)] >= 2
    )  # fmt: skip
    for fam in families:
        for base in FAMILY_BASELINES:
            for metric, what in (("primal_integral", "integral"), ("primal_gap", "final_gap")):
                specs.append((
                    f"{fam}_pall_beats_{base.replace('-', '_')}_{what}",
                    f"{fam}: PALL's mean {metric.replace('_', ' ')} is lower than {base}'s, "
                    "paired over this family's test instances",
                    "pall", "lt", base, metric, fam,
                ))  # fmt: skip
    claims: list[Claim] = []
    by_id: dict[str, Claim] = {}
    for cid, statement, lhs, op, rhs, metric, split in specs:
        if (lhs, metric, split) not in have:
            continue
        if isinstance(rhs, str) and (rhs, metric, split) not in have:
            continue
        right: tuple[str, str, str] | float = (
            (rhs, metric, split) if isinstance(rhs, str) else float(rhs)
        )
        premise = _premise_of(cid, lhs, rhs, metric)
        requires = [by_id[premise]] if premise in by_id else []
        key = (lhs, metric, split)
        claim = Claim.compare(cid, statement, rows, key, op, right, requires=requires)  # type: ignore[arg-type]
        claims.append(claim)
        by_id[cid] = claim
    return claims


def oracle_reward_shares(
    records: Sequence[dict[str, Any]], choose: Callable[[Any], int] | None
) -> dict[str, float]:
    """Per informative held-out state: the share ``r_choice / max_o r_o`` of the oracle's
    reward that a selector's choice earns (``choose(ctx) -> op``); ``None`` is uniform random
    choice, scored by its expectation ``mean_o r_o / max_o r_o``. Keyed by instance and state,
    so selectors compare paired."""
    from pall_lns.context import context_from_json

    out: dict[str, float] = {}
    for r in records:
        rewards = np.asarray(r["rewards"], dtype=float)
        best = float(rewards.max())
        if best <= 0:
            continue
        if choose is None:
            value = float(np.mean(np.maximum(rewards, 0.0))) / best
        else:
            value = max(float(rewards[choose(context_from_json(r["context"]))]), 0.0) / best
        out[f"{r['instance']}#{r['state']}"] = value
    return out
