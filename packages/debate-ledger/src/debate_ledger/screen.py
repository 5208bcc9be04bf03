"""The pre-debate screen: eight probes from round 0, and their family-level association with
collapse risk, tested with exact Spearman p-values.

Probes (per debate, from round 0 and the optional round-0 resamples; a family's value is the mean
over its debates):

1. ``agreement``: share of agents holding the modal round-0 answer (failures count as dissent)
2. ``entropy``: entropy of the round-0 answers over options, divided by log(#options)
3. ``unanimity``: all agents gave the same parsed answer
4. ``tie``: the round-0 plurality is tied (no initial majority)
5. ``parse_failure``: share of round-0 responses with no parsable option
6. ``position_bias``: total-variation distance between the family's pooled round-0 answer letters
   and uniform (a family-level probe; the same value for each of its debates)
7. ``verbosity``: mean round-0 output tokens
8. ``resample_consistency``: share of round-0 resamples that agree with the agent's own answer
   (NaN when the run drew no resamples)

Association. With G families, x_g = probe value, y_g = conditional collapse risk
(collapses / debates whose initial majority was right), Spearman's rho is the Pearson correlation
of average ranks, and the **exact two-sided p-value** is the share of all G! rank permutations of
y whose |rho| >= |rho_obs| (enumerated for G <= 10; the t approximation scipy reports is wrong at
this size: for G = 7, rho = 0.929 it gives 0.0025 against an exact 0.0067). Controlling for
initial-majority accuracy z uses the partial rank correlation

    rho_xy.z = (rho_xy - rho_xz rho_yz) / sqrt((1 - rho_xz^2)(1 - rho_yz^2)),

and the comparator (how well initial accuracy alone tracks collapse risk) is reported beside it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from debate_ledger.ledger import DebateArrays, Transitions, vote_counts
from debate_ledger.schemas import LedgerError

__all__ = [
    "PROBES",
    "Association",
    "associate",
    "family_probes",
    "partial_rho",
    "probe_values",
    "spearman_exact_p",
    "spearman_p_bruteforce",
    "spearman_rho",
]

PROBES = (
    "agreement",
    "entropy",
    "unanimity",
    "tie",
    "parse_failure",
    "position_bias",
    "verbosity",
    "resample_consistency",
)
MAX_EXACT_G = 10
_EPS = 1e-9  # |rho| comparisons: rho values of permutations are rationals; avoid float misses


def probe_values(arr: DebateArrays) -> dict[str, np.ndarray]:
    """Per-debate values of the eight probes, each of shape (D,)."""
    r0 = arr.answers[:, :, :1]
    counts = vote_counts(r0)[:, 0, :].astype(np.float64)  # (D, K)
    A = arr.n_agents
    parsed = counts.sum(axis=1)
    top = counts.max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(parsed[:, None] > 0, counts / np.maximum(parsed, 1)[:, None], 0.0)
        ent = -(np.where(p > 0, p * np.log(p), 0.0)).sum(axis=1) / np.log(arr.n_options)
    n_top = (counts == top[:, None]).sum(axis=1)
    fails = (arr.answers[:, :, 0] < 0).mean(axis=1)
    bias = np.zeros(arr.n_debates)
    for g in range(len(arr.families)):
        sel = arr.family == g
        k = int(arr.n_options[sel].max())
        letters = arr.answers[sel, :, 0].ravel()
        letters = letters[letters >= 0]
        if letters.size:
            share = np.bincount(letters, minlength=k)[:k] / letters.size
            bias[sel] = 0.5 * np.abs(share - 1.0 / k).sum()
    if arr.resamples.shape[2]:
        own = arr.answers[:, :, :1]
        ok = (arr.resamples >= 0) & (own >= 0)
        consistent = np.where(ok, arr.resamples == own, False).sum(axis=(1, 2))
        consistency = consistent / (arr.resamples.shape[1] * arr.resamples.shape[2])
    else:
        consistency = np.full(arr.n_debates, np.nan)
    return {
        "agreement": top / A,
        "entropy": ent,
        "unanimity": ((top == A) & (parsed == A)).astype(np.float64),
        "tie": ((n_top > 1) & (top > 0)).astype(np.float64),
        "parse_failure": fails,
        "position_bias": bias,
        "verbosity": arr.tokens_out[:, :, 0].mean(axis=1).astype(np.float64),
        "resample_consistency": consistency,
    }


def family_probes(arr: DebateArrays) -> dict[str, np.ndarray]:
    """Family means of each probe, shape (G,)."""
    values = probe_values(arr)
    G = len(arr.families)
    out = {}
    for name, v in values.items():
        sums = np.bincount(arr.family, weights=np.nan_to_num(v, nan=0.0), minlength=G)
        n = np.bincount(arr.family, weights=(~np.isnan(v)).astype(float), minlength=G)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[name] = np.where(n > 0, sums / np.maximum(n, 1), np.nan)
    return out


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based), ties share the mean rank."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        tied = x == v
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else float("nan")


def spearman_rho(x: np.ndarray, y: np.ndarray) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.shape != y.shape or x.ndim != 1:
        raise LedgerError("spearman needs two 1-D arrays of the same length")
    return _pearson(_ranks(x), _ranks(y))


@lru_cache(maxsize=8)
def _permutations(g: int) -> np.ndarray:
    return np.array(list(itertools.permutations(range(g))), dtype=np.int8)


def spearman_exact_p(x: np.ndarray, y: np.ndarray) -> float:
    """Exact two-sided permutation p-value of Spearman's rho (all G! permutations of y's ranks,
    vectorised), for 3 <= G <= 10. Ties are handled by average ranks, as in the statistic."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    g = len(x)
    if not 3 <= g <= MAX_EXACT_G:
        raise LedgerError(f"exact Spearman p needs 3..{MAX_EXACT_G} families, got {g}")
    rx, ry = _ranks(x), _ranks(y)
    rho = _pearson(rx, ry)
    if math.isnan(rho):
        return float("nan")
    cx = rx - rx.mean()
    cy = ry - ry.mean()
    perms = _permutations(g)
    num = cy[perms] @ cx
    rho_perm = num / math.sqrt(float((cx * cx).sum() * (cy * cy).sum()))
    return float(np.mean(np.abs(rho_perm) >= abs(rho) - _EPS))


def spearman_p_bruteforce(x: np.ndarray, y: np.ndarray) -> float:
    """The same p-value by a plain loop over itertools.permutations (the independent check)."""
    rx, ry = list(_ranks(np.asarray(x, float))), list(_ranks(np.asarray(y, float)))
    obs = abs(_pearson(np.array(rx), np.array(ry)))
    hits = total = 0
    for perm in itertools.permutations(ry):
        total += 1
        if abs(_pearson(np.array(rx), np.array(perm))) >= obs - _EPS:
            hits += 1
    return hits / total


def partial_rho(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    rxy, rxz, ryz = spearman_rho(x, y), spearman_rho(x, z), spearman_rho(y, z)
    den = math.sqrt(max((1 - rxz**2) * (1 - ryz**2), 0.0))
    return (rxy - rxz * ryz) / den if den > 1e-12 else float("nan")


@dataclass(frozen=True)
class Association:
    probe: str
    families: int
    rho: float
    p_exact: float
    partial_rho: float  # controlling for initial-majority accuracy


def associate(arr: DebateArrays, tr: Transitions) -> tuple[list[Association], Association]:
    """Each probe's association with conditional collapse risk across families, and the
    comparator (initial-majority accuracy). Families with no right initial majority (risk
    undefined) and probes that are NaN for a family are left out of that test."""
    G = len(arr.families)
    right0 = np.bincount(arr.family, weights=tr.correct[:, 0], minlength=G)
    debates = np.bincount(arr.family, minlength=G)
    collapses = np.bincount(arr.family, weights=tr.collapse, minlength=G)
    with np.errstate(invalid="ignore", divide="ignore"):
        risk = np.where(right0 > 0, collapses / np.maximum(right0, 1), np.nan)
    init_acc = right0 / np.maximum(debates, 1)
    probes = family_probes(arr)

    def test(name: str, x: np.ndarray) -> Association:
        ok = ~np.isnan(x) & ~np.isnan(risk)
        g = int(ok.sum())
        if g < 3:
            return Association(name, g, float("nan"), float("nan"), float("nan"))
        xs, ys, zs = x[ok], risk[ok], init_acc[ok]
        p = spearman_exact_p(xs, ys) if g <= MAX_EXACT_G else float("nan")
        return Association(name, g, spearman_rho(xs, ys), p, partial_rho(xs, ys, zs))

    return [test(name, probes[name]) for name in PROBES], test("initial_accuracy", init_acc)
