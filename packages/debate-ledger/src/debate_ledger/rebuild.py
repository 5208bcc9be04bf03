"""Every table and figure of a run, recomputed from the ledger alone (no model calls).

``rebuild(ledger, out)`` reads and validates the ledger, runs the transition analysis, the audits,
the cost card, the replays and the screen, and writes

    summary.json            every number below, machine-readable
    transitions.md          per family: initial/final accuracy, collapses, corrections, risks
    onsets.md               onset rounds and first flipping agents of the transitions
    audits.md               parse-failure, tie and agreement rates per round
    replay.md               each intervention's collapses prevented, corrections lost, utility
    screen.md               probe values per family, Spearman rho, exact p, partial rho
    cost_card.md/.json      calls, tokens, latency, dollars (with a user price table)
    transitions.png, screen.png

The output is a pure function of the ledger (and the price table): rows are sorted by key before
analysis, numbers are printed with fixed formats, JSON keys are sorted, and figures are written
without timestamps, so two rebuilds are byte-identical (a test checks it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from debate_ledger.ledger import DebateArrays, Transitions, from_rows, transitions
from debate_ledger.replay import replay_all
from debate_ledger.schemas import LedgerError, read_ledger
from debate_ledger.screen import PROBES, associate, family_probes, probe_values
from paperstack.records import atomic_write, prepare_out_dir
from paperstack.stats import wilson_ci

__all__ = ["analyze", "load_prices", "rebuild", "render", "tree_digest"]

FILES = (
    "summary.json",
    "transitions.md",
    "onsets.md",
    "audits.md",
    "replay.md",
    "screen.md",
    "cost_card.md",
    "cost_card.json",
    "transitions.png",
    "screen.png",
)


def _num(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else float(f"{x:.12g}")


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
            if not isinstance(p[k], (int, float)) or p[k] < 0:
                raise LedgerError(f"{path}: {model}.{k} must be a number >= 0")
    return raw


def analyze(
    arr: DebateArrays,
    tr: Transitions,
    *,
    prices: dict[str, dict[str, float]] | None = None,
    gate_probe: str = "agreement",
) -> dict[str, Any]:
    """All numbers of a run, as plain JSON values."""
    prices = prices or {}
    G = len(arr.families)
    fam = arr.family
    per_family: dict[str, Any] = {}
    groups = [(name, fam == g) for g, name in enumerate(arr.families)]
    groups.append(("all", np.ones_like(fam, dtype=bool)))
    for name, sel in groups:
        n = int(sel.sum())
        right0 = int(tr.correct[sel, 0].sum())
        collapses = int(tr.collapse[sel].sum())
        corrections = int(tr.correction[sel].sum())
        onset = tr.onset[sel & (tr.collapse | tr.correction)]
        ans = arr.answers[sel]
        agree = []
        for r in range(arr.n_rounds + 1):
            m = tr.majority[sel, r]
            agree.append(_num(((ans[:, :, r] == m[:, None]) & (m[:, None] >= 0)).mean()))
        per_family[name] = {
            "model": arr.models[arr.families.index(name)] if name != "all" else "-",
            "debates": n,
            "initial_accuracy": _num(right0 / n),
            "final_accuracy": _num(tr.correct[sel, -1].mean()),
            "collapses": collapses,
            "corrections": corrections,
            "net": corrections - collapses,
            "collapse_risk": _num(collapses / right0) if right0 else None,
            "collapse_risk_ci95": [_num(x) for x in wilson_ci(collapses, right0)]
            if right0
            else None,
            "correction_rate": _num(corrections / (n - right0)) if n > right0 else None,
            "correction_rate_ci95": [_num(x) for x in wilson_ci(corrections, n - right0)]
            if n > right0
            else None,
            "onset_counts": {str(r): int((onset == r).sum()) for r in range(1, arr.n_rounds + 1)},
            "first_flip_agent_counts": {
                str(a): int(((tr.flip_agent == a) & sel & (tr.collapse | tr.correction)).sum())
                for a in range(arr.n_agents)
            },
            "parse_failure_by_round": [
                _num((ans[:, :, r] < 0).mean()) for r in range(arr.n_rounds + 1)
            ],
            "tie_by_round": [_num(tr.tie[sel, r].mean()) for r in range(arr.n_rounds + 1)],
            "agreement_by_round": agree,
        }
    # cost card
    cost: dict[str, Any] = {}
    for name, sel in groups:
        model = per_family[name]["model"]
        t_in, t_out = int(arr.tokens_in[sel].sum()), int(arr.tokens_out[sel].sum())
        p = prices.get(model)
        dollars = (
            _num(t_in / 1e6 * p["input_per_mtok"] + t_out / 1e6 * p["output_per_mtok"])
            if p
            else None
        )
        cost[name] = {
            "model": model,
            "calls": int(sel.sum()) * arr.n_agents * (arr.n_rounds + 1),
            "tokens_in": t_in,
            "tokens_out": t_out,
            "latency_s": _num(arr.latency[sel].sum()),
            "dollars": dollars,
        }
    if prices and any(cost[f]["dollars"] is not None for f in arr.families):
        cost["all"]["dollars"] = _num(sum(cost[f]["dollars"] or 0.0 for f in arr.families))
    probes = probe_values(arr)
    results, gates = replay_all(arr, tr, probes, gate_probe)
    assoc, comparator = associate(arr, tr)
    fprobes = family_probes(arr)
    return {
        "agents": arr.n_agents,
        "rounds": arr.n_rounds,
        "debates": arr.n_debates,
        "families": list(arr.families),
        "tokens_estimated": arr.tokens_estimated,
        "tie_rule": "a tie for the most votes, or no parsed vote, is no majority (incorrect)",
        "per_family": per_family,
        "cost_card": cost,
        "replay": [
            {
                "policy": r.policy,
                "utility": r.utility,
                "collapses_prevented": r.collapses_prevented,
                "corrections_lost": r.corrections_lost,
                "other_gains": r.other_gains,
                "other_losses": r.other_losses,
                "debates": r.debates,
            }
            for r in results
        ],
        "gates": {obj: {f: [_num(t), d] for f, (t, d) in g.items()} for obj, g in gates.items()},
        "screen": {
            "family_probes": {p: [_num(v) for v in fprobes[p]] for p in PROBES},
            "collapse_risk": [per_family[f]["collapse_risk"] for f in arr.families],
            "initial_accuracy": [per_family[f]["initial_accuracy"] for f in arr.families],
            "associations": [
                {
                    "probe": a.probe,
                    "families": a.families,
                    "rho": _num(a.rho),
                    "p_exact": _num(a.p_exact),
                    "partial_rho": _num(a.partial_rho),
                }
                for a in [*assoc, comparator]
            ],
        },
        "G": G,
    }


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


def _ci(v: Any) -> str:
    return "-" if v is None else f"[{v[0]:.3f}, {v[1]:.3f}]"


def render(summary: dict[str, Any], out: Path) -> list[Path]:
    """Write the tables and figures of ``summary`` into ``out``; returns the paths."""
    pf = summary["per_family"]
    names = [*summary["families"], "all"]
    head = (
        f"{summary['debates']} debates, {summary['agents']} agents, rounds 0..{summary['rounds']}."
        f" Tie rule: {summary['tie_rule']}.\n\n"
    )
    files: dict[str, str] = {}
    files["transitions.md"] = (
        "# Transitions\n\n"
        + head
        + _table(
            [
                "family",
                "model",
                "debates",
                "initial acc",
                "final acc",
                "collapses",
                "corrections",
                "net",
                "collapse risk [95% CI]",
                "correction rate [95% CI]",
            ],
            [
                [
                    f,
                    pf[f]["model"],
                    pf[f]["debates"],
                    pf[f]["initial_accuracy"],
                    pf[f]["final_accuracy"],
                    pf[f]["collapses"],
                    pf[f]["corrections"],
                    pf[f]["net"],
                    f"{_fmt(pf[f]['collapse_risk'])} {_ci(pf[f]['collapse_risk_ci95'])}",
                    f"{_fmt(pf[f]['correction_rate'])} {_ci(pf[f]['correction_rate_ci95'])}",
                ]
                for f in names
            ],
        )
    )
    R = summary["rounds"]
    files["onsets.md"] = "# Onsets of collapses and corrections\n\n" + _table(
        ["family"]
        + [f"onset r={r}" for r in range(1, R + 1)]
        + [f"first flip agent {a}" for a in range(summary["agents"])],
        [
            [f]
            + [pf[f]["onset_counts"][str(r)] for r in range(1, R + 1)]
            + [pf[f]["first_flip_agent_counts"][str(a)] for a in range(summary["agents"])]
            for f in names
        ],
    )
    files["audits.md"] = "# Audits\n\n" + _table(
        ["family"]
        + [f"parse fail r{r}" for r in range(R + 1)]
        + [f"tie r{r}" for r in range(R + 1)]
        + [f"agreement r{r}" for r in range(R + 1)],
        [
            [f]
            + pf[f]["parse_failure_by_round"]
            + pf[f]["tie_by_round"]
            + pf[f]["agreement_by_round"]
            for f in names
        ],
    )
    files["replay.md"] = (
        "# Intervention replays\n\nU = gains - losses = (collapses prevented + other gains) - "
        "(corrections lost + other losses); both sides are always shown.\n\n"
        + _table(
            [
                "policy",
                "collapses prevented",
                "corrections lost",
                "other gains",
                "other losses",
                "utility U",
            ],
            [
                [
                    r["policy"],
                    r["collapses_prevented"],
                    r["corrections_lost"],
                    r["other_gains"],
                    r["other_losses"],
                    r["utility"],
                ]
                for r in summary["replay"]
            ],
        )
    )
    sc = summary["screen"]
    files["screen.md"] = (
        "# Pre-debate screen\n\nFamily-level Spearman correlation of each round-0 probe with "
        "conditional collapse risk; p is exact (all G! permutations); partial rho controls for "
        "initial-majority accuracy; the comparator row is initial accuracy itself.\n\n"
        + _table(
            ["probe", "G", "rho", "exact p", "partial rho"],
            [
                [a["probe"], a["families"], a["rho"], a["p_exact"], a["partial_rho"]]
                for a in sc["associations"]
            ],
        )
        + "\n"
        + _table(
            ["family", "collapse risk", "initial acc", *PROBES],
            [
                [f, sc["collapse_risk"][g], sc["initial_accuracy"][g]]
                + [sc["family_probes"][p][g] for p in PROBES]
                for g, f in enumerate(summary["families"])
            ],
        )
    )
    cc = summary["cost_card"]
    note = " (tokens estimated as words)" if summary["tokens_estimated"] else ""
    files["cost_card.md"] = f"# Cost card{note}\n\n" + _table(
        ["family", "model", "calls", "tokens in", "tokens out", "latency s", "dollars"],
        [
            [
                f,
                cc[f]["model"],
                cc[f]["calls"],
                cc[f]["tokens_in"],
                cc[f]["tokens_out"],
                cc[f]["latency_s"],
                cc[f]["dollars"],
            ]
            for f in names
        ],
    )
    files["cost_card.json"] = json.dumps(cc, indent=2, sort_keys=True) + "\n"
    files["summary.json"] = json.dumps(summary, indent=2, sort_keys=True) + "\n"
    paths = [atomic_write(out / name, text) for name, text in files.items()]
    paths += _figures(summary, out)
    return paths


def _figures(summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pf = summary["per_family"]
    fams = summary["families"]
    meta = {"Software": None}
    paths = []
    fig, ax = plt.subplots(figsize=(7, 3.5))
    x = np.arange(len(fams))
    ax.bar(x - 0.2, [pf[f]["collapses"] for f in fams], 0.4, label="collapses")
    ax.bar(x + 0.2, [pf[f]["corrections"] for f in fams], 0.4, label="corrections")
    ax.set_xticks(x, fams, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("debates")
    ax.legend()
    fig.tight_layout()
    tmp = out / ".transitions.png.tmp"
    fig.savefig(tmp, format="png", dpi=100, metadata=meta)
    plt.close(fig)
    paths.append(tmp.replace(out / "transitions.png"))
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    sc = summary["screen"]
    xs = sc["family_probes"]["agreement"]
    ys = sc["collapse_risk"]
    ax.scatter(
        [v if v is not None else np.nan for v in xs], [v if v is not None else np.nan for v in ys]
    )
    for f, xv, yv in zip(fams, xs, ys, strict=True):
        if xv is not None and yv is not None:
            ax.annotate(f, (xv, yv), fontsize=7)
    ax.set_xlabel("round-0 agreement (family mean)")
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
) -> dict[str, Any]:
    """Recompute everything from ``ledger`` into ``out``; returns the summary."""
    rows = read_ledger(ledger)
    arr = from_rows(rows, source=str(ledger))
    tr = transitions(arr.answers, arr.gold)
    summary = analyze(arr, tr, prices=load_prices(prices), gate_probe=gate_probe)
    render(summary, prepare_out_dir(out))
    return summary


def tree_digest(directory: str | os.PathLike[str]) -> dict[str, str]:
    """sha256 of each rebuild output file in ``directory`` (for byte-identity checks)."""
    d = Path(directory)
    return {
        name: hashlib.sha256((d / name).read_bytes()).hexdigest()
        for name in FILES
        if (d / name).is_file()
    }
