"""The pre-debate screen: eight probes from round 0, one pre-specified combined score, and its
family-level association with collapse risk, tested with exact permutation p-values.

Probes (per debate, from round 0 and the round-0 resamples; a family's value is the mean over
its debates):

1. ``agreement``: share of agents holding the modal round-0 answer (failures count as dissent)
2. ``entropy``: entropy of the round-0 answers over options, divided by log(#options)
3. ``unanimity``: all agents gave the same parsed answer
4. ``tie``: the round-0 plurality is tied (no initial majority)
5. ``parse_failure``: share of round-0 responses with no parsable option
6. ``position_bias``: total-variation distance between the model's round-0 answers *as shown*
   (A = first option displayed) and the letters at which the gold option was shown in the same
   calls: 0 when the model picks positions as often as the gold sits there, whatever the
   shuffle (a model-level probe: the same value for each of its debates)
7. ``verbosity``: mean round-0 output tokens
8. ``resample_consistency``: share of round-0 resamples that agree with the agent's own answer
   (NaN when the run drew no resamples)

**The combined score** (fixed before any data were seen, :data:`RISK_SIGN`): each probe is
turned into a risk direction by a sign (+1: a larger value means more collapse risk), ranked
across the G families (average ranks), and the combined score of a family is the mean of its
signed ranks over the probes defined for every family. The directions: less agreement, more
entropy, less unanimity, more ties, more parse failures, more position bias, more verbosity
(hedging) and less resample consistency all mean a weaker initial commitment, which debate can
overturn.

Association. With G families, x_g = the combined score (or one probe), y_g = conditional
collapse risk (collapses / debates whose initial majority was right), Spearman's rho is the
Pearson correlation of average ranks, and the **exact two-sided p-value** is the share of all
G! rank permutations of y whose |rho| >= |rho_obs| (enumerated for G <= 10; above that a
Monte-Carlo p = (1 + hits) / (1 + B) with its standard error). The t approximation scipy reports
is wrong at this size (G = 7, rho = 0.929: 0.0025 against an exact 0.0067). Controlling for
initial-majority accuracy z uses the partial rank correlation

    rho_xy.z = (rho_xy - rho_xz rho_yz) / sqrt((1 - rho_xz^2)(1 - rho_yz^2)),

with its own exact permutation p (y permuted over families, x and z held together; the paper's
partial rho = 0.767 has p = 0.0877, which the t test with 4 dof, 0.075, does not give). Per
probe the tests are exploratory: their p-values are also given Holm-adjusted over the eight.
The interval of rho that verdicts are judged on is Fisher's z with the Bonett-Wright standard
error for Spearman's rho, sqrt((1 + rho^2 / 2) / (G - 3 - k)) (k = 1 for the partial).
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
    "RISK_SIGN",
    "Association",
    "associate",
    "combined_score",
    "family_probes",
    "holm",
    "partial_exact_p",
    "partial_rho",
    "probe_values",
    "rho_interval",
    "spearman_exact_p",
    "spearman_p",
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
#: +1: a larger probe value means more collapse risk. Fixed before any run (see the module).
RISK_SIGN: dict[str, int] = {
    "agreement": -1,
    "entropy": +1,
    "unanimity": -1,
    "tie": +1,
    "parse_failure": +1,
    "position_bias": +1,
    "verbosity": +1,
    "resample_consistency": -1,
}
MAX_EXACT_G = 10
#: Most families a permutation p takes. Monte Carlo holds ``MC_RESAMPLES x G`` draws, ranks and
#: permuted values at once (about 5 MB per family), so G = 5000 ran for minutes towards 16 GB
#: (issue #46); a debate study compares a handful of model families, and 50 is far above any.
MAX_G = 50
MC_RESAMPLES = 200_000
MC_SEED = 0
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
    for m in range(len(arr.models)):
        sel = arr.model == m
        k = int(arr.n_options[sel].max())
        shown = arr.shown[sel, :, 0]
        ok = shown >= 0
        if ok.any():
            gold = np.broadcast_to(arr.gold_shown[sel][:, None], shown.shape)[ok]
            answered = np.bincount(shown[ok], minlength=k)[:k] / ok.sum()
            where_gold = np.bincount(gold, minlength=k)[:k] / ok.sum()
            bias[sel] = 0.5 * np.abs(answered - where_gold).sum()
    if arr.n_resamples:
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


def combined_score(probes: dict[str, np.ndarray]) -> tuple[np.ndarray, tuple[str, ...]]:
    """The pre-specified combined screen score per family (see the module) and the probes it
    used (those defined for every family)."""
    used = tuple(p for p in PROBES if not np.isnan(probes[p]).any())
    if not used:
        raise LedgerError("combined screen: no probe is defined for every family")
    signed = [RISK_SIGN[p] * _ranks(probes[p]) for p in used]
    return np.mean(signed, axis=0), used


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


def _perm_indices(g: int, resamples: int, seed: int) -> tuple[np.ndarray, str]:
    """All G! permutations (exact) or ``resamples`` random ones (Monte Carlo)."""
    if g <= MAX_EXACT_G:
        return _permutations(g), "exact"
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((resamples, g)), axis=1), "monte-carlo"


def _check_g(x: np.ndarray, y: np.ndarray) -> int:
    g = len(x)
    if len(y) != g:
        raise LedgerError(f"spearman: {g} x values but {len(y)} y values")
    if g < 3:
        raise LedgerError(f"a permutation p needs at least 3 families, got {g}")
    if g > MAX_G:
        raise LedgerError(f"a permutation p takes at most {MAX_G} families, got {g}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise LedgerError("spearman: every value must be a finite number")
    return g


@dataclass(frozen=True)
class PValue:
    """A permutation p-value: exact (all G!) or Monte Carlo (``se`` its standard error)."""

    p: float
    method: str  # "exact" or "monte-carlo"
    permutations: int
    se: float = 0.0


def spearman_p(
    x: np.ndarray, y: np.ndarray, *, resamples: int = MC_RESAMPLES, seed: int = MC_SEED
) -> PValue:
    """Two-sided permutation p of Spearman's rho: exact over all G! permutations of y's ranks
    for G <= 10 (vectorised), Monte Carlo above (``(1 + hits) / (1 + B)``, with its error)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    g = _check_g(x, y)
    rx, ry = _ranks(x), _ranks(y)
    rho = _pearson(rx, ry)
    if math.isnan(rho):
        return PValue(float("nan"), "exact", 0)
    cx = rx - rx.mean()
    cy = ry - ry.mean()
    perms, method = _perm_indices(g, resamples, seed)
    num = cy[perms] @ cx
    rho_perm = num / math.sqrt(float((cx * cx).sum() * (cy * cy).sum()))
    hits = int(np.sum(np.abs(rho_perm) >= abs(rho) - _EPS))
    return _pvalue(hits, len(perms), method)


def _pvalue(hits: int, total: int, method: str) -> PValue:
    if method == "exact":
        return PValue(hits / total, method, total)
    p = (1 + hits) / (1 + total)
    return PValue(p, method, total, math.sqrt(p * (1 - p) / total))


def spearman_exact_p(x: np.ndarray, y: np.ndarray) -> float:
    """Exact two-sided permutation p-value of Spearman's rho (all G! permutations of y's ranks,
    vectorised), for 3 <= G <= 10. Ties are handled by average ranks, as in the statistic."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    g = _check_g(x, y)
    if g > MAX_EXACT_G:
        raise LedgerError(
            f"exact Spearman p needs 3..{MAX_EXACT_G} families, got {g} (use spearman_p: "
            "Monte Carlo above 10)"
        )
    return spearman_p(x, y).p


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


def _partial(rxy: np.ndarray, rxz: float, ryz: np.ndarray) -> np.ndarray:
    den = np.sqrt(np.maximum((1 - rxz**2) * (1 - ryz**2), 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, (rxy - rxz * ryz) / np.where(den > 1e-12, den, 1.0), np.nan)


def partial_rho(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    rxy, rxz, ryz = spearman_rho(x, y), spearman_rho(x, z), spearman_rho(y, z)
    return float(_partial(np.array(rxy), rxz, np.array(ryz)))


def partial_exact_p(
    x: np.ndarray,
    y: np.ndarray,
    z: np.ndarray,
    *,
    resamples: int = MC_RESAMPLES,
    seed: int = MC_SEED,
) -> PValue:
    """Two-sided permutation p of the partial rank correlation rho_xy.z: y's ranks permuted over
    all G! orders (x and z held together), exact for G <= 10, Monte Carlo above."""
    x, y, z = (np.asarray(v, float) for v in (x, y, z))
    g = _check_g(x, y)
    _check_g(x, z)
    obs = partial_rho(x, y, z)
    if math.isnan(obs):
        return PValue(float("nan"), "exact", 0)

    def centred(v: np.ndarray) -> np.ndarray:
        r = _ranks(v)
        r = r - r.mean()
        return r / math.sqrt(float((r * r).sum()))

    cx, cy, cz = centred(x), centred(y), centred(z)
    perms, method = _perm_indices(g, resamples, seed)
    yp = cy[perms]
    part = _partial(yp @ cx, float(cx @ cz), yp @ cz)
    hits = int(np.sum(np.nan_to_num(np.abs(part), nan=0.0) >= abs(obs) - _EPS))
    return _pvalue(hits, len(perms), method)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment of ``pvalues`` (NaN stays NaN and is not counted)."""
    idx = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    m = len(idx)
    out = [float("nan")] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def rho_interval(rho: float, g: int, controls: int = 0) -> tuple[float, float] | None:
    """95% interval of a Spearman (partial) rho: Fisher z with the Bonett-Wright standard error
    sqrt((1 + rho^2/2) / (G - 3 - controls)); None when G is too small or rho is +-1."""
    df = g - 3 - controls
    if math.isnan(rho) or df < 1 or abs(rho) >= 1.0:
        return None
    se = math.sqrt((1 + rho * rho / 2) / df)
    z = math.atanh(rho)
    return math.tanh(z - 1.959963984540054 * se), math.tanh(z + 1.959963984540054 * se)


@dataclass(frozen=True)
class Association:
    probe: str
    families: int
    rho: float
    p: float
    p_method: str
    p_se: float
    p_holm: float
    partial_rho: float  # controlling for initial-majority accuracy
    partial_p: float
    rho_ci95: tuple[float, float] | None
    partial_ci95: tuple[float, float] | None


@dataclass(frozen=True)
class Screen:
    """Everything the screen reports: the combined score's test (the pre-specified one), the
    per-probe tests (exploratory, Holm-adjusted), the comparator (initial-majority accuracy),
    and the family-level inputs."""

    combined: Association
    probes: list[Association]
    comparator: Association
    used: tuple[str, ...]
    families: tuple[str, ...]  # the families tested (collapse risk defined)
    risk: np.ndarray
    initial_accuracy: np.ndarray
    score: np.ndarray


def family_risk(arr: DebateArrays, tr: Transitions) -> tuple[np.ndarray, np.ndarray]:
    """(conditional collapse risk, initial-majority accuracy) per family; risk is NaN for a
    family with no right initial majority."""
    G = len(arr.families)
    right0 = np.bincount(arr.family, weights=tr.correct[:, 0], minlength=G)
    debates = np.bincount(arr.family, minlength=G)
    collapses = np.bincount(arr.family, weights=tr.collapse, minlength=G)
    with np.errstate(invalid="ignore", divide="ignore"):
        risk = np.where(right0 > 0, collapses / np.maximum(right0, 1), np.nan)
    return risk, right0 / np.maximum(debates, 1)


def associate(arr: DebateArrays, tr: Transitions) -> Screen:
    """The screen over the families whose collapse risk is defined."""
    risk, init_acc = family_risk(arr, tr)
    ok = ~np.isnan(risk)
    probes = {k: v[ok] for k, v in family_probes(arr).items()}
    fams = tuple(f for f, keep in zip(arr.families, ok, strict=True) if keep)
    ys, zs = risk[ok], init_acc[ok]
    g = len(fams)

    def test(name: str, x: np.ndarray, *, partial: bool = True) -> Association:
        nan = float("nan")
        if g < 3 or np.isnan(x).any():
            return Association(name, g, nan, nan, "none", 0.0, nan, nan, nan, None, None)
        rho = spearman_rho(x, ys)
        pv = spearman_p(x, ys)
        prho = partial_rho(x, ys, zs) if partial else nan
        pp = partial_exact_p(x, ys, zs).p if partial and not math.isnan(prho) else nan
        return Association(
            name, g, rho, pv.p, pv.method, pv.se, nan, prho, pp,
            rho_interval(rho, g), rho_interval(prho, g, 1) if partial else None,
        )  # fmt: skip

    if g < 3:
        raise LedgerError(
            f"the screen needs at least 3 families with a right initial majority, got {g}"
        )
    score, used = combined_score(probes)
    per = [test(p, probes[p]) for p in PROBES]
    adjusted = holm([a.p for a in per])
    per = [_with_holm(a, h) for a, h in zip(per, adjusted, strict=True)]
    return Screen(
        combined=test("combined", score),
        probes=per,
        comparator=test("initial_accuracy", zs, partial=False),
        used=used,
        families=fams,
        risk=ys,
        initial_accuracy=zs,
        score=score,
    )


def _with_holm(a: Association, p_holm: float) -> Association:
    from dataclasses import replace

    return replace(a, p_holm=p_holm)
