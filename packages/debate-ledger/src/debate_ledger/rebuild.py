"""Every table and figure of a run, recomputed from the ledger alone (no model calls).

``rebuild(ledger, out)`` reads and validates the ledger, runs the transition analysis, the
audits, the cost card, the replays, the majority-vote baseline and the screen, and writes

    summary.json            every number below, machine-readable
    transitions.md          per model, per family and overall: accuracies, collapses,
                            corrections, collapse risk and correction rate with intervals
    onsets.md               onset rounds and first flipping agents, collapses and corrections
                            apart
    audits.md               parse-failure, tie and agreement rates per round; finish reasons;
                            the recorded answers against the strict coders
    replay.md               each intervention's collapses prevented, corrections lost, U [CI]
    vote.md                 debate against the call-matched majority vote, paired by question
    screen.md               the combined screen, the per-probe tests (exploratory, Holm), the
                            comparator, and the family table
    cost_card.md/.json      calls (one per row: debate calls and resamples), the tokens the
                            backend reported, finish reasons, latency, dollars
    transitions.png, screen.png
    recode.md               with ``recode=CODER``: what re-coding the responses moved

Intervals: every rate is over debates, and the debates of one question (its seeds, its models)
are not independent, so intervals come from a question-clustered bootstrap (resample
questions; :func:`paperstack.stats.cluster_bootstrap_ci`; fixed seed), or Wilson's interval when
fewer than ten questions are there (the table says which).

The output is a pure function of the ledger (and the price table and coder): rows are sorted by
key before analysis, numbers are printed with fixed formats, JSON keys are sorted, bootstraps
are seeded and figures are written without timestamps, so two rebuilds are byte-identical (a
test checks it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from debate_ledger.coders import AUDIT_CODERS, code_answer, get_coder
from debate_ledger.ledger import DebateArrays, Transitions, from_rows, majority_vote, transitions
from debate_ledger.replay import replay_all
from debate_ledger.schemas import LETTERS, LedgerError, LedgerRow, read_ledger
from debate_ledger.screen import PROBES, RISK_SIGN, Association, associate, probe_values
from paperstack.records import atomic_write, prepare_out_dir
from paperstack.stats import MIN_BOOTSTRAP_N, cluster_bootstrap_ci, wilson_ci

__all__ = [
    "FILES",
    "analyze",
    "coder_audit",
    "load_prices",
    "rate",
    "rebuild",
    "recode_rows",
    "render",
    "tree_digest",
]

FILES = (
    "summary.json",
    "transitions.md",
    "onsets.md",
    "audits.md",
    "replay.md",
    "vote.md",
    "screen.md",
    "cost_card.md",
    "cost_card.json",
    "transitions.png",
    "screen.png",
)
BOOTSTRAP_RESAMPLES = 2000


def _num(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else float(f"{x:.12g}")


def rate(values: np.ndarray, clusters: np.ndarray) -> dict[str, Any]:
    """Mean of 0/1 (or real) ``values`` with its 95% interval: question-clustered bootstrap
    over ``clusters`` when there are at least ten, else Wilson (0/1 values only)."""
    values = np.asarray(values, dtype=np.float64)
    n = int(values.size)
    if n == 0:
        return {"value": None, "ci95": None, "n": 0, "method": "none"}
    if len(np.unique(clusters)) >= MIN_BOOTSTRAP_N:
        mean, ci = cluster_bootstrap_ci(values, clusters, resamples=BOOTSTRAP_RESAMPLES)
        method = "cluster-bootstrap"
    elif np.isin(values, (0.0, 1.0)).all():
        mean, ci = float(values.mean()), wilson_ci(int(values.sum()), n)
        method = "wilson"
    else:
        return {"value": _num(values.mean()), "ci95": None, "n": n, "method": "none"}
    return {"value": _num(mean), "ci95": [_num(ci[0]), _num(ci[1])], "n": n, "method": method}


def load_prices(path: str | os.PathLike[str] | None) -> dict[str, dict[str, float]]:
    """A price table: {model: {"input_per_mtok": $, "output_per_mtok": $}}."""
    if path is None:
        return {}
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LedgerError(f"{path}: not a readable JSON price table ({exc})") from None
    if not isinstance(raw, dict):
        raise LedgerError(f"{path}: a price table is an object {{model: {{...}}}}")
    for model, p in raw.items():
        if not isinstance(p, dict) or {"input_per_mtok", "output_per_mtok"} - set(p):
            raise LedgerError(f"{path}: {model}: needs input_per_mtok and output_per_mtok")
        for k in ("input_per_mtok", "output_per_mtok"):
            v = p[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise LedgerError(f"{path}: {model}.{k} must be a number >= 0")
    return raw


def coder_audit(rows: Sequence[LedgerRow]) -> dict[str, dict[str, dict[str, int]]]:
    """Per model and strict coder: how often it agrees with the recorded answer, disagrees
    (names another letter), or abstains (finds no answer where the recorded coder did, or the
    other way round counts as a disagreement)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for r in rows:
        per = out.setdefault(r.model, {c: {"agree": 0, "disagree": 0, "abstain": 0}
                                       for c in AUDIT_CODERS})  # fmt: skip
        for coder in AUDIT_CODERS:
            strict = code_answer(r.response, r.n_options, coder)
            if strict is None and r.shown is not None:
                per[coder]["abstain"] += 1
            elif strict == r.shown:
                per[coder]["agree"] += 1
            else:
                per[coder]["disagree"] += 1
    return {m: out[m] for m in sorted(out)}


def recode_rows(rows: Sequence[LedgerRow], coder: str) -> list[LedgerRow]:
    """The rows with every response re-coded by ``coder`` (shown letter, canonical answer,
    parsed_ok, correct and the coder name updated; everything else as recorded)."""
    get_coder(coder)
    out = []
    for r in rows:
        shown = code_answer(r.response, r.n_options, coder)
        answer = None if shown is None else r.order[LETTERS.index(shown)]
        out.append(
            r.model_copy(
                update={"shown": shown, "answer": answer, "parsed_ok": answer is not None,
                        "correct": answer == r.gold, "coder": coder}
            )
        )  # fmt: skip
    return out


def _counts(mask: np.ndarray, values: np.ndarray, keys: range) -> dict[str, int]:
    return {str(k): int(((values == k) & mask).sum()) for k in keys}


def _group(arr: DebateArrays, tr: Transitions, sel: np.ndarray, vote_ok: np.ndarray) -> dict:
    q = arr.question_ids
    c0, cR = tr.correct[:, 0], tr.correct[:, -1]
    R = arr.n_rounds
    out: dict[str, Any] = {
        "debates": int(sel.sum()),
        "initial_accuracy": rate(c0[sel], q[sel]),
        "final_accuracy": rate(cR[sel], q[sel]),
        "vote_accuracy": rate(vote_ok[sel], q[sel]) if arr.n_resamples else None,
        "collapses": int(tr.collapse[sel].sum()),
        "corrections": int(tr.correction[sel].sum()),
        "collapse_risk": rate(tr.collapse[sel & c0], q[sel & c0]),
        "correction_rate": rate(tr.correction[sel & ~c0], q[sel & ~c0]),
    }
    out["net"] = out["corrections"] - out["collapses"]
    for kind, mask in (("collapse", tr.collapse), ("correction", tr.correction)):
        m = sel & mask
        out[f"{kind}_onsets"] = _counts(m, tr.onset, range(1, R + 1))
        out[f"{kind}_first_flip_round"] = _counts(m, tr.flip_round, range(1, R + 1))
        out[f"{kind}_first_flip_agent"] = _counts(m, tr.flip_agent, range(arr.n_agents))
    ans = arr.answers[sel]
    out["parse_failure_by_round"] = [_num((ans[:, :, r] < 0).mean()) for r in range(R + 1)]
    out["tie_by_round"] = [_num(tr.tie[sel, r].mean()) for r in range(R + 1)]
    out["agreement_by_round"] = [
        _num(((ans[:, :, r] == tr.majority[sel, r][:, None]) & (tr.majority[sel, r][:, None] >= 0))
             .mean())
        for r in range(R + 1)
    ]  # fmt: skip
    return out


def _assoc(a: Association) -> dict[str, Any]:
    return {
        "probe": a.probe,
        "families": a.families,
        "rho": _num(a.rho),
        "rho_ci95": None if a.rho_ci95 is None else [_num(x) for x in a.rho_ci95],
        "p": _num(a.p),
        "p_method": a.p_method,
        "p_se": _num(a.p_se),
        "p_holm": _num(a.p_holm),
        "partial_rho": _num(a.partial_rho),
        "partial_ci95": None if a.partial_ci95 is None else [_num(x) for x in a.partial_ci95],
        "partial_p": _num(a.partial_p),
    }


def analyze(
    arr: DebateArrays,
    tr: Transitions,
    *,
    prices: dict[str, dict[str, float]] | None = None,
    gate_probe: str = "agreement",
    audit: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """All numbers of a run, as plain JSON values."""
    prices = prices or {}
    q = arr.question_ids
    if arr.n_resamples:
        _, vote_ok, vote_calls = majority_vote(arr)
    else:
        vote_ok, vote_calls = np.zeros(arr.n_debates, dtype=bool), 0
    per_model = {}
    for m, name in enumerate(arr.models):
        per_model[name] = {"family": arr.model_family[m],
                           **_group(arr, tr, arr.model == m, vote_ok)}  # fmt: skip
    members = {f: [m for m, g in zip(arr.models, arr.model_family, strict=True) if g == f]
               for f in arr.families}  # fmt: skip
    per_family = {
        name: {"models": members[name], **_group(arr, tr, arr.family == g, vote_ok)}
        for g, name in enumerate(arr.families)
    }
    everything = _group(arr, tr, np.ones(arr.n_debates, dtype=bool), vote_ok)

    cost: dict[str, Any] = {}
    for name in arr.models:
        c = dict(arr.cost[name])
        p = prices.get(name)
        c["latency_s"] = _num(c["latency_s"])
        c["dollars"] = (
            _num(c["tokens_in"] / 1e6 * p["input_per_mtok"]
                 + c["tokens_out"] / 1e6 * p["output_per_mtok"])
            if p else None
        )  # fmt: skip
        cost[name] = c
    totals = {k: sum(cost[m][k] for m in arr.models) for k in
              ("calls", "resample_calls", "tokens_in", "tokens_out", "resample_tokens_in",
               "resample_tokens_out")}  # fmt: skip
    totals["latency_s"] = _num(sum(cost[m]["latency_s"] or 0.0 for m in arr.models))
    priced = [cost[m]["dollars"] for m in arr.models if cost[m]["dollars"] is not None]
    totals["dollars"] = _num(sum(priced)) if priced else None
    cost["all"] = totals

    probes = probe_values(arr)
    outcomes, gates = replay_all(arr, tr, probes, gate_probe)
    base = tr.correct[:, -1].astype(np.float64)
    replay = []
    for r, c_pi in outcomes:
        u = rate(c_pi.astype(np.float64) - base, q)
        replay.append({
            "policy": r.policy, "utility": r.utility, "debates": r.debates,
            "collapses_prevented": r.collapses_prevented, "corrections_lost": r.corrections_lost,
            "other_gains": r.other_gains, "other_losses": r.other_losses,
            "utility_per_debate": u,
        })  # fmt: skip

    vote: dict[str, Any] = {"calls_per_debate": arr.n_agents * (arr.n_rounds + 1),
                            "vote_calls_per_debate": vote_calls}  # fmt: skip
    if arr.n_resamples:
        diff = base - vote_ok.astype(np.float64)
        vote["debate_minus_vote"] = rate(diff, q)
        vote["per_model"] = {
            name: rate(diff[arr.model == m], q[arr.model == m]) for m, name in enumerate(arr.models)
        }

    try:
        sc = associate(arr, tr)
    except LedgerError as exc:  # fewer than 3 families with a defined collapse risk
        screen: dict[str, Any] = {"skipped": str(exc)}
    else:
        fam_index = [arr.families.index(f) for f in sc.families]
        fprobes = _family_probe_table(arr)
        screen = {
            "families": list(sc.families),
            "used_probes": list(sc.used),
            "risk_sign": dict(RISK_SIGN),
            "combined": _assoc(sc.combined),
            "probes": [_assoc(a) for a in sc.probes],
            "comparator": _assoc(sc.comparator),
            "collapse_risk": [_num(v) for v in sc.risk],
            "initial_accuracy": [_num(v) for v in sc.initial_accuracy],
            "score": [_num(v) for v in sc.score],
            "family_probes": {p: [_num(fprobes[p][g]) for g in fam_index] for p in PROBES},
        }
    return {
        "agents": arr.n_agents,
        "rounds": arr.n_rounds,
        "resamples": arr.n_resamples,
        "debates": arr.n_debates,
        "questions": len(np.unique(q)),
        "models": list(arr.models),
        "families": list(arr.families),
        "model_family": list(arr.model_family),
        "tokens_estimated": arr.tokens_estimated,
        "tie_rule": "a tie for the most votes, or no parsed vote, is no majority (incorrect)",
        "per_model": per_model,
        "per_family": per_family,
        "all": everything,
        "cost_card": cost,
        "replay": replay,
        "gates": {obj: {m: [_num(t), d] for m, (t, d) in g.items()} for obj, g in gates.items()},
        "vote": vote,
        "screen": screen,
        "coder_audit": audit or {},
    }


def _family_probe_table(arr: DebateArrays) -> dict[str, np.ndarray]:
    from debate_ledger.screen import family_probes

    return family_probes(arr)


# ----------------------------------------------------------------------------- rendering


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x).replace("|", "\\|")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _ci(r: dict[str, Any] | None, digits: int = 3) -> str:
    if not r or r.get("value") is None:
        return "-"
    if r.get("ci95") is None:
        return f"{r['value']:.{digits}f}"
    lo, hi = r["ci95"]
    return f"{r['value']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _p(a: dict[str, Any], key: str = "p") -> str:
    v = a.get(key)
    if v is None:
        return "-"
    if key == "p" and a.get("p_method") == "monte-carlo":
        return f"{v:.4f} ± {a['p_se']:.4f} (MC)"
    return f"{v:.4f}"


def _rho(a: dict[str, Any], key: str = "rho") -> str:
    v = a.get(key)
    if v is None:
        return "-"
    ci = a.get(f"{key}_ci95" if key == "rho" else "partial_ci95")
    return f"{v:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def render(summary: dict[str, Any], out: Path) -> list[Path]:
    """Write the tables and figures of ``summary`` into ``out``; returns the paths."""
    pm, pf, al = summary["per_model"], summary["per_family"], summary["all"]
    groups = [(f"{pm[m]['family']} / {m}", pm[m]) for m in summary["models"]]
    groups += [(f"{f} (family)", pf[f]) for f in summary["families"]]
    groups.append(("all", al))
    method = al["final_accuracy"]["method"]
    head = (
        f"{summary['debates']} debates of {summary['questions']} questions, "
        f"{summary['agents']} agents, rounds 0..{summary['rounds']}, {summary['resamples']} "
        f"round-0 resamples per agent. Tie rule: {summary['tie_rule']}. Intervals: 95%, "
        f"{method} over questions.\n\n"
    )
    files: dict[str, str] = {}
    files["transitions.md"] = (
        "# Transitions\n\n" + head
        + _table(
            ["family / model", "debates", "initial acc", "final acc", "collapses",
             "corrections", "net", "collapse risk", "correction rate"],
            [[name, g["debates"], _ci(g["initial_accuracy"]), _ci(g["final_accuracy"]),
              g["collapses"], g["corrections"], g["net"], _ci(g["collapse_risk"]),
              _ci(g["correction_rate"])] for name, g in groups],
        )
    )  # fmt: skip
    R, A = summary["rounds"], summary["agents"]
    onset_parts = ["# Onsets and first flips\n\nOnset: the first round whose majority's "
                   "correctness differs from round 0. First flip: the earliest (round, lowest "
                   "agent) at or before the onset whose answer changed.\n"]  # fmt: skip
    for kind in ("collapse", "correction"):
        onset_parts.append(
            f"\n## {kind.capitalize()}s\n\n"
            + _table(
                ["family / model", f"{kind}s"] + [f"onset r={r}" for r in range(1, R + 1)]
                + [f"first flip r={r}" for r in range(1, R + 1)]
                + [f"first flip agent {a}" for a in range(A)],
                [[name, g[f"{kind}s"]]
                 + [g[f"{kind}_onsets"][str(r)] for r in range(1, R + 1)]
                 + [g[f"{kind}_first_flip_round"][str(r)] for r in range(1, R + 1)]
                 + [g[f"{kind}_first_flip_agent"][str(a)] for a in range(A)]
                 for name, g in groups],
            )
        )  # fmt: skip
    files["onsets.md"] = "".join(onset_parts)
    cc = summary["cost_card"]
    audit = summary["coder_audit"]
    audit_rows = []
    for m in summary["models"]:
        row = [m]
        for coder in AUDIT_CODERS:
            a = audit.get(m, {}).get(coder)
            row.append("-" if a is None else f"{a['agree']} / {a['disagree']} / {a['abstain']}")
        fr = cc[m]["finish_reasons"]
        row.append(", ".join(f"{k} {v}" for k, v in fr.items()))
        audit_rows.append(row)
    files["audits.md"] = (
        "# Audits\n\n"
        + _table(
            ["family / model"] + [f"parse fail r{r}" for r in range(R + 1)]
            + [f"tie r{r}" for r in range(R + 1)] + [f"agreement r{r}" for r in range(R + 1)],
            [[name] + g["parse_failure_by_round"] + g["tie_by_round"] + g["agreement_by_round"]
             for name, g in groups],
        )
        + "\nRecorded answers against the strict coders (agree / disagree / abstain: the strict "
        "coder found no answer where the recorded one did), and the finish reasons of all "
        "calls (`length`: the token budget ran out).\n\n"
        + _table(["model", *AUDIT_CODERS, "finish reasons"], audit_rows)
    )  # fmt: skip
    files["replay.md"] = (
        "# Intervention replays\n\nU = gains - losses = (collapses prevented + other gains) - "
        "(corrections lost + other losses); both sides are always shown. U per debate with its "
        "question-clustered interval; the gated freeze is fit leave-one-model-out.\n\n"
        + _table(
            ["policy", "collapses prevented", "corrections lost", "other gains",
             "other losses", "utility U", "U per debate [95% CI]"],
            [[r["policy"], r["collapses_prevented"], r["corrections_lost"], r["other_gains"],
              r["other_losses"], r["utility"], _ci(r["utility_per_debate"], 4)]
             for r in summary["replay"]],
        )
        + ("" if len(summary["models"]) >= 2 else "\nNo gated freeze: it is fit "
           "leave-one-model-out and this ledger holds one model.\n")
    )  # fmt: skip
    vote = summary["vote"]
    if "debate_minus_vote" in vote:
        body = (
            f"The majority vote takes the plurality of the {vote['vote_calls_per_debate']} "
            f"independent round-0 answers of a debate (agents and resamples); the debate made "
            f"{vote['calls_per_debate']} calls"
            + (" (call-matched)" if vote["vote_calls_per_debate"] == vote["calls_per_debate"]
               else " (NOT call-matched: run with resamples = rounds)")
            + ". Debate - vote is paired by debate, clustered by question.\n\n"
            + _table(
                ["family / model", "debate final acc", "vote acc", "debate - vote",
                 "debate tokens out", "vote tokens out"],
                [[f"{pm[m]['family']} / {m}", _ci(pm[m]["final_accuracy"]),
                  _ci(pm[m]["vote_accuracy"]), _ci(vote["per_model"][m]),
                  cc[m]["tokens_out"] - cc[m]["resample_tokens_out"],
                  cc[m]["resample_tokens_out"]] for m in summary["models"]]
                + [["all", _ci(al["final_accuracy"]), _ci(al["vote_accuracy"]),
                    _ci(vote["debate_minus_vote"]),
                    cc["all"]["tokens_out"] - cc["all"]["resample_tokens_out"],
                    cc["all"]["resample_tokens_out"]]],
            )
        )  # fmt: skip
    else:
        body = "No round-0 resamples in this ledger: no majority-vote baseline.\n"
    files["vote.md"] = "# Debate against majority vote\n\n" + body
    files["screen.md"] = _screen_md(summary["screen"])
    note = " (some tokens estimated as words)" if summary["tokens_estimated"] else ""
    files["cost_card.md"] = (
        f"# Cost card{note}\n\nOne call per ledger row (debate calls and round-0 resamples); "
        "tokens as the backend reported them (`source`).\n\n"
        + _table(
            ["model", "calls", "of which resamples", "tokens in", "tokens out", "source",
             "latency s", "dollars"],
            [[m, cc[m]["calls"], cc[m]["resample_calls"], cc[m]["tokens_in"],
              cc[m]["tokens_out"], cc[m]["tokens_source"], cc[m]["latency_s"], cc[m]["dollars"]]
             for m in summary["models"]]
            + [["all", cc["all"]["calls"], cc["all"]["resample_calls"], cc["all"]["tokens_in"],
                cc["all"]["tokens_out"], "", cc["all"]["latency_s"], cc["all"]["dollars"]]],
        )
    )  # fmt: skip
    files["cost_card.json"] = json.dumps(cc, indent=2, sort_keys=True) + "\n"
    if "recode" in summary:
        files["recode.md"] = _recode_md(summary["recode"])
    files["summary.json"] = json.dumps(summary, indent=2, sort_keys=True) + "\n"
    paths = [atomic_write(out / name, text) for name, text in files.items()]
    paths += _figures(summary, out)
    return paths


def _screen_md(sc: dict[str, Any]) -> str:
    if "skipped" in sc:
        return f"# Pre-debate screen\n\nNot computed: {sc['skipped']}.\n"
    signs = ", ".join(f"{'+' if RISK_SIGN[p] > 0 else '-'}{p}" for p in sc["used_probes"])
    c = sc["combined"]
    lines = [
        "# Pre-debate screen\n",
        f"G = {len(sc['families'])} families. Combined score (pre-specified): the mean of the "
        f"signed family ranks of {signs}. Spearman rho with conditional collapse risk; p is a "
        "two-sided permutation p (exact over all G! orders up to G = 10, Monte Carlo above); "
        "the partial rho controls for initial-majority accuracy (its p permutes collapse risk); "
        "rho intervals: Fisher z, Bonett-Wright SE.\n",
        _table(
            ["test", "G", "rho [95% CI]", "p", "partial rho [95% CI]", "partial p"],
            [["combined score", c["families"], _rho(c), _p(c), _rho(c, "partial_rho"),
              _p(c, "partial_p")],
             ["initial accuracy (comparator)", sc["comparator"]["families"],
              _rho(sc["comparator"]), _p(sc["comparator"]), "-", "-"]],
        ),
        "\nPer probe (exploratory; p Holm-adjusted over the eight):\n",
        _table(
            ["probe", "risk sign", "rho [95% CI]", "p", "Holm p", "partial rho", "partial p"],
            [[a["probe"], "+" if RISK_SIGN[a["probe"]] > 0 else "-", _rho(a), _p(a),
              _p(a, "p_holm"), _fmt(a["partial_rho"]), _p(a, "partial_p")]
             for a in sc["probes"]],
        ),
        "\n",
        _table(
            ["family", "collapse risk", "initial acc", "score", *PROBES],
            [[f, sc["collapse_risk"][g], sc["initial_accuracy"][g], sc["score"][g]]
             + [sc["family_probes"][p][g] for p in PROBES]
             for g, f in enumerate(sc["families"])],
        ),
    ]  # fmt: skip
    return "\n".join(lines)


def _recode_md(rc: dict[str, Any]) -> str:
    return (
        f"# Re-coded with {rc['coder']}\n\n"
        f"{rc['rows_changed']} of {rc['rows']} answers changed ({rc['parsed_before']} parsed "
        f"before, {rc['parsed_after']} after); {rc['transitions_changed']} debates changed "
        f"transition (collapses {rc['collapses_before']} -> {rc['collapses_after']}, "
        f"corrections {rc['corrections_before']} -> {rc['corrections_after']}). Every table "
        "here uses the re-coded answers.\n"
    )


def _figures(summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pm = summary["per_model"]
    models = summary["models"]
    meta = {"Software": None}
    paths = []
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(models) + 2), 3.8))
    x = np.arange(len(models))
    ax.bar(x - 0.2, [pm[m]["collapses"] for m in models], 0.4, label="collapses")
    ax.bar(x + 0.2, [pm[m]["corrections"] for m in models], 0.4, label="corrections")
    ax.set_xticks(x, [f"{pm[m]['family']}/{m.split('/')[-1]}" for m in models], rotation=35,
                  ha="right", fontsize=7)  # fmt: skip
    ax.set_ylabel("debates")
    ax.legend()
    fig.tight_layout()
    tmp = out / ".transitions.png.tmp"
    fig.savefig(tmp, format="png", dpi=100, metadata=meta)
    plt.close(fig)
    paths.append(tmp.replace(out / "transitions.png"))
    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    sc = summary["screen"]
    if "skipped" in sc:
        ax.text(0.5, 0.5, "screen not computed:\nfewer than 3 families", ha="center",
                va="center", transform=ax.transAxes)  # fmt: skip
        ax.set_axis_off()
    else:
        xs, ys = sc["score"], sc["collapse_risk"]
        ax.scatter(xs, ys)
        for f, xv, yv in zip(sc["families"], xs, ys, strict=True):
            ax.annotate(f, (xv, yv), fontsize=7, xytext=(3, 3), textcoords="offset points")
        c = sc["combined"]
        if c["rho"] is not None:
            ax.set_title(f"rho = {c['rho']:.3f}, p = {c['p']:.4f}", fontsize=9)
        ax.set_xlabel("combined screen score (mean signed rank)")
        ax.set_ylabel("conditional collapse risk")
    fig.tight_layout()
    tmp = out / ".screen.png.tmp"
    fig.savefig(tmp, format="png", dpi=100, metadata=meta)
    plt.close(fig)
    paths.append(tmp.replace(out / "screen.png"))
    return paths


def rebuild(
    ledger: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    prices: str | os.PathLike[str] | None = None,
    gate_probe: str = "agreement",
    recode: str | None = None,
) -> dict[str, Any]:
    """Recompute everything from ``ledger`` into ``out``; returns the summary. ``recode``
    re-codes every response with that coder first and reports what moved."""
    rows = read_ledger(ledger)
    price_table = load_prices(prices)
    out_dir = prepare_out_dir(out)
    extra: dict[str, Any] = {}
    if recode is not None:
        before = from_rows(rows, source=str(ledger))
        tr0 = transitions(before.answers, before.gold)
        new_rows = recode_rows(rows, recode)
        arr = from_rows(new_rows, source=str(ledger))
        tr = transitions(arr.answers, arr.gold)
        extra["recode"] = {
            "coder": recode,
            "rows": len(rows),
            "rows_changed": sum(a.answer != b.answer for a, b in zip(rows, new_rows, strict=True)),
            "parsed_before": sum(r.parsed_ok for r in rows),
            "parsed_after": sum(r.parsed_ok for r in new_rows),
            "transitions_changed": int(((tr0.collapse != tr.collapse)
                                        | (tr0.correction != tr.correction)).sum()),
            "collapses_before": int(tr0.collapse.sum()),
            "collapses_after": int(tr.collapse.sum()),
            "corrections_before": int(tr0.correction.sum()),
            "corrections_after": int(tr.correction.sum()),
        }  # fmt: skip
        rows = new_rows
    else:
        arr = from_rows(rows, source=str(ledger))
        tr = transitions(arr.answers, arr.gold)
    summary = analyze(arr, tr, prices=price_table, gate_probe=gate_probe, audit=coder_audit(rows))
    summary.update(extra)
    render(summary, out_dir)
    return summary


def tree_digest(directory: str | os.PathLike[str]) -> dict[str, str]:
    """sha256 of each rebuild output file in ``directory`` (for byte-identity checks)."""
    d = Path(directory)
    return {
        name: hashlib.sha256((d / name).read_bytes()).hexdigest()
        for name in (*FILES, "recode.md")
        if (d / name).is_file()
    }
