"""The three uses evaluated per item, for every scorer, in one place (both arms use it).

Given candidate trajectories in groups of ``N`` (one prompt each), each with an outcome label,
a labelled first wrong step when it failed, and scores from every method, :func:`evaluate_uses`
returns per-item values a paired comparison needs:

- best-of-N: for each group, 1 if the method's highest-scoring candidate succeeded (random's
  value is the group's mean success, its exact expectation; ``oracle`` is pass@N);
- uncertainty: the AUROC of the trajectory score predicting success, one number per call (an
  AUROC is not a mean over items; the demo pairs it over seeds);
- attribution: for each failed trajectory with a labelled first error, 1 if the blamed step is
  that step, for every (step scorer, rule) pair, the positional priors (first step, last step,
  a uniform step: the hit's expectation ``1/T``) and any method that blames steps itself (a
  PRM).

:func:`choose_best` picks a baseline by its validation number, so the test rows of "the best
confidence baseline" are never chosen on the test split.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from progress_advantage.attribution import (
    ATTRIBUTION_RULES,
    POSITIONAL_PRIORS,
    attribute_failure,
    positional_hit,
)
from progress_advantage.metrics import auroc
from progress_advantage.selection import best_of_n, majority_vote

__all__ = ["Uses", "choose_best", "evaluate_uses", "mean_of"]


@dataclass
class Uses:
    """Per-item best-of-N and attribution hits, and AUROCs, keyed by method."""

    bon: dict[str, dict[str, float]] = field(default_factory=dict)
    auroc: dict[str, float] = field(default_factory=dict)
    attribution: dict[str, dict[str, float]] = field(default_factory=dict)


def evaluate_uses(
    prefix: str,
    groups: Sequence[Sequence[int]],
    success: np.ndarray,
    first_error: Sequence[int | None],
    n_steps: Sequence[int],
    trajectory_scores: Mapping[str, np.ndarray],
    step_scores: Mapping[str, Sequence[np.ndarray | None]],
    blamed: Mapping[str, Sequence[int | None]] | None = None,
    answers: Sequence[str | None] | None = None,
) -> Uses:
    """Every use for every method; item ids are ``prefix + index`` (group or trajectory).

    NaN trajectory scores (an unscorable candidate) never win best-of-N and are left out of
    the AUROC. ``step_scores[m][i]`` is ``None`` for an unscorable trajectory (not blamed).
    """
    out = Uses()
    for name, s in trajectory_scores.items():
        out.bon[name] = {
            f"{prefix}{k}": float(success[g[best_of_n(s[list(g)])]]) for k, g in enumerate(groups)
        }
        ok = ~np.isnan(s)
        value = auroc(s[ok], success[ok])
        if np.isfinite(value):
            out.auroc[name] = value
    out.bon["random"] = {
        f"{prefix}{k}": float(success[list(g)].mean()) for k, g in enumerate(groups)
    }
    out.bon["oracle (pass@N)"] = {
        f"{prefix}{k}": float(success[list(g)].any()) for k, g in enumerate(groups)
    }
    if answers is not None:
        out.bon["majority-vote"] = {
            f"{prefix}{k}": float(success[g[majority_vote([answers[i] for i in g])]])
            for k, g in enumerate(groups)
        }
    failed = [i for i, e in enumerate(first_error) if e is not None and not success[i]]
    for name, tables in step_scores.items():
        for rule in ATTRIBUTION_RULES:
            hits: dict[str, float] = {}
            for i in failed:
                row = tables[i]
                if row is not None:
                    hits[f"{prefix}{i}"] = float(attribute_failure(row, rule) == first_error[i])
            out.attribution[f"{name} ({rule})"] = hits
    for name, picks in (blamed or {}).items():
        out.attribution[name] = {
            f"{prefix}{i}": float(picks[i] == first_error[i])
            for i in failed
            if picks[i] is not None
        }
    for prior in POSITIONAL_PRIORS:
        out.attribution[prior] = {
            f"{prefix}{i}": positional_hit(prior, int(n_steps[i]), int(first_error[i] or 0))
            for i in failed
        }
    return out


def mean_of(values: Mapping[str, float] | float | None) -> float:
    """The mean of per-item values (or the number itself); NaN when there is none."""
    if values is None:
        return float("nan")
    if isinstance(values, Mapping):
        return float(np.mean(list(values.values()))) if values else float("nan")
    return float(values)


def choose_best(validation: Mapping[str, float], candidates: Sequence[str]) -> str:
    """The candidate with the highest validation value (the first on ties; NaN never wins)."""
    scored = [(c, validation.get(c, float("nan"))) for c in candidates]
    finite = [(c, v) for c, v in scored if np.isfinite(v)]
    if not finite:
        return candidates[0]
    return max(finite, key=lambda cv: cv[1])[0]
