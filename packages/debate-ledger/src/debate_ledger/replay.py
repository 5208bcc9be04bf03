"""Replaying interventions over the ledger, offline, with both sides of the trade-off shown.

An intervention is a policy pi that, from the recorded rounds, decides which majority the debate
reports instead of the last one. Its signed utility over debates d is

    U(pi) = sum_d (c^pi_d - c^base_d),    c^base_d = c_R(d)

which splits exactly into gains (base wrong, pi right) minus losses (base right, pi wrong). The
gains on collapsed debates are the **collapses prevented**, the losses on corrected debates the
**corrections lost**; both are always reported, with the remaining gains and losses (debates that
were wrong or right at both ends but passed through the other state), so a policy can never look
good by showing only one side.

Policies:
- ``freeze@r``: report m_r (freeze@0 = no debate: the initial vote).
- ``early-stop``: stop at the first round whose parsed answers are unanimous (all agents
  parsed, one option) and report it; else m_R.
- ``gated-freeze[probe,objective]``: report m_0 when the probe flags risk, else m_R. The
  threshold and its direction are fit **leave-one-model-out**, as in the paper: for each model,
  on the other models' debates, as a collapse detector (``youden``, the default reading of the
  paper's gate) or directly for utility (``utility``); then applied to the held-out model, so no
  model's own outcomes set its gate.

Every policy also returns its per-debate outcomes ``c^pi``, so U gets a question-clustered
interval (:mod:`debate_ledger.rebuild`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from debate_ledger.ledger import DebateArrays, Transitions
from debate_ledger.schemas import LedgerError

__all__ = ["ReplayResult", "early_stop", "freeze", "probe_gated_freeze", "replay_all", "score"]


@dataclass(frozen=True)
class ReplayResult:
    policy: str
    utility: int
    collapses_prevented: int
    corrections_lost: int
    other_gains: int
    other_losses: int
    debates: int

    @property
    def gains(self) -> int:
        return self.collapses_prevented + self.other_gains

    @property
    def losses(self) -> int:
        return self.corrections_lost + self.other_losses


def score(
    policy: str, c_pi: np.ndarray, tr: Transitions, mask: np.ndarray | None = None
) -> ReplayResult:
    base = tr.correct[:, -1]
    sel = np.ones_like(base) if mask is None else mask
    gain = c_pi & ~base & sel
    loss = ~c_pi & base & sel
    prevented = int((gain & tr.collapse).sum())
    lost = int((loss & tr.correction).sum())
    res = ReplayResult(
        policy=policy,
        utility=int(gain.sum()) - int(loss.sum()),
        collapses_prevented=prevented,
        corrections_lost=lost,
        other_gains=int(gain.sum()) - prevented,
        other_losses=int(loss.sum()) - lost,
        debates=int(sel.sum()),
    )
    assert res.utility == res.gains - res.losses
    return res


def freeze(tr: Transitions, r: int) -> np.ndarray:
    if not 0 <= r < tr.correct.shape[1]:
        raise LedgerError(f"freeze round {r} is outside 0..{tr.correct.shape[1] - 1}")
    return tr.correct[:, r].copy()


def early_stop(arr: DebateArrays, tr: Transitions) -> np.ndarray:
    a = arr.answers
    unanimous = (a >= 0).all(axis=1) & (a == a[:, :1, :]).all(axis=1)  # (D, R+1)
    first = np.where(unanimous.any(axis=1), unanimous.argmax(axis=1), a.shape[2] - 1)
    return tr.correct[np.arange(a.shape[0]), first]


def _fit_gate(
    values: np.ndarray, tr: Transitions, train: np.ndarray, objective: str
) -> tuple[float, str]:
    """(tau, direction) fit on the ``train`` debates; direction 'le' flags v <= tau.

    ``objective="youden"`` fits the gate as a collapse detector (max TPR - FPR for "this debate
    collapses"), the reading of the paper's probe gate: a risk screen, judged afterwards by its
    utility. ``objective="utility"`` fits U directly (an upper bound on what a gate on this probe
    can do), flagging nothing when no threshold has positive utility on the training families.
    Ties go to the gate flagging fewer debates.
    """
    v = values[train]
    delta = tr.correct[train, 0].astype(np.int64) - tr.correct[train, -1].astype(np.int64)
    pos = tr.collapse[train]
    best: tuple[float, int, float, str] = (0.0, 0, -np.inf, "le")  # flags nothing
    cand = np.unique(v[~np.isnan(v)])
    for direction in ("le", "ge"):
        if cand.size == 0:
            continue
        flags = v[None, :] <= cand[:, None] if direction == "le" else v[None, :] >= cand[:, None]
        flagged = flags.sum(axis=1)
        if objective == "utility":
            gain = (flags * delta[None, :]).sum(axis=1).astype(np.float64)
        elif objective == "youden":
            tpr = (flags & pos[None, :]).sum(axis=1) / max(int(pos.sum()), 1)
            fpr = (flags & ~pos[None, :]).sum(axis=1) / max(int((~pos).sum()), 1)
            gain = tpr - fpr
        else:
            raise LedgerError(f"gate objective must be youden or utility, got {objective!r}")
        i = int(np.lexsort((flagged, -gain))[0])
        key = (float(gain[i]), -int(flagged[i]))
        if key > best[:2]:
            best = (key[0], key[1], float(cand[i]), direction)
    return best[2], best[3]


def probe_gated_freeze(
    arr: DebateArrays, tr: Transitions, values: np.ndarray, objective: str = "youden"
) -> tuple[np.ndarray, dict[str, tuple[float, str]]]:
    """c^pi for the leave-one-model-out probe-gated freeze, and the gate fit for each model."""
    c_pi = tr.correct[:, -1].copy()
    gates: dict[str, tuple[float, str]] = {}
    if len(arr.models) < 2:
        raise LedgerError("the gated freeze is fit leave-one-model-out: it needs two models")
    for g, name in enumerate(arr.models):
        held = arr.model == g
        tau, direction = _fit_gate(values, tr, ~held, objective)
        gates[name] = (tau, direction)
        v = values[held]
        flag = (v <= tau) if direction == "le" else (v >= tau)
        flag &= ~np.isnan(v)
        c_pi[held] = np.where(flag, tr.correct[held, 0], tr.correct[held, -1])
    return c_pi, gates


def replay_all(
    arr: DebateArrays, tr: Transitions, probes: dict[str, np.ndarray], gate_probe: str = "agreement"
) -> tuple[list[tuple[ReplayResult, np.ndarray]], dict[str, dict[str, tuple[float, str]]]]:
    """Every built-in policy, overall: (result, per-debate c^pi) pairs and the fitted gates
    (objective -> held-out model -> (tau, direction))."""
    if gate_probe not in probes:
        raise LedgerError(f"unknown gate probe {gate_probe!r}; known: {', '.join(probes)}")
    outcomes = [(f"freeze@{r}", freeze(tr, r)) for r in range(arr.n_rounds)]
    outcomes.append(("early-stop", early_stop(arr, tr)))
    gates: dict[str, dict[str, tuple[float, str]]] = {}
    if len(arr.models) >= 2:
        for objective in ("youden", "utility"):
            c_pi, gates[objective] = probe_gated_freeze(arr, tr, probes[gate_probe], objective)
            outcomes.append((f"gated-freeze[{gate_probe},{objective}]", c_pi))
    return [(score(name, c, tr), c) for name, c in outcomes], gates
