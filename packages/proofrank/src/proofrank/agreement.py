"""Judge-agreement statistics: a judge against the shipped labels, and two judges against
each other.

The shipped problems carry labels a judge can be checked against: every reference proof is
correct; a reference with its key step deleted is incomplete (label: not to be certified);
``calc_steps`` marks the routine-calculation steps; ``techniques`` lists the techniques a
reference uses. :func:`judge_agreement` scores any :class:`~proofrank.judges.Judge` on them
(accuracy of its certifications, references it wrongly refutes, per-step agreement and Cohen's
kappa of calculation detection, recall and precision of technique detection);
:func:`cohen_kappa` compares two judges' binary verdicts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from paperstack.records import Row
from proofrank.judges import Judge, JudgeRequest
from proofrank.problems import ProblemSet, Reference
from proofrank.provers import key_step

__all__ = ["Agreement", "cohen_kappa", "gapped", "judge_agreement"]


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two binary labelings, :math:`(p_o - p_e) / (1 - p_e)`; None when
    undefined (empty, or both constant and equal: :math:`p_e = 1`)."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} and {len(b)} labels")
    n = len(a)
    if n == 0:
        return None
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return None if math.isclose(pe, 1.0) else (po - pe) / (1 - pe)


def gapped(ref: Reference) -> list[str]:
    """The reference with its key step deleted (the first of a short proof, the middle one of
    a longer proof): an incomplete proof."""
    steps = list(ref.steps)
    del steps[key_step(ref)]
    return steps


@dataclasses.dataclass
class Agreement:
    rows: list[Row]
    kappa_calc: float | None
    summary: str


def judge_agreement(judge: Judge, problems: ProblemSet, system: str | None = None) -> Agreement:
    """How often ``judge`` agrees with the labels of ``problems`` (rows with split ``labels``)."""
    name = system or f"{judge.name}-judge"
    refs = [(p, r) for p in problems for r in p.references]
    requests = [JudgeRequest(p, r.proof) for p, r in refs]
    labels = [True] * len(requests)
    for p, r in refs:
        steps = gapped(r)
        if steps:
            requests.append(JudgeRequest(p, "\n".join(steps)))
            labels.append(False)
    verdicts = judge.assess(requests, ("correct",))
    # A judge that can say "unverified" is scored on what it certifies: a proof counts as
    # certified only on a ``correct`` verdict, so a gapped proof left unverified is a right
    # answer (not certified) and a reference left unverified a wrong one. Judge failures are
    # left out. ``refuted_references``: references the judge called incorrect (must be 0 for
    # a judge whose refutations are sound).
    judged = [
        (a.correct is True, y) for a, y in zip(verdicts, labels, strict=True)
        if a.verdict is not None
    ]  # fmt: skip
    agree = sum(v == y for v, y in judged)
    refuted = sum(1 for a, y in zip(verdicts, labels, strict=True) if y and a.correct is False)
    unverified = sum(1 for a in verdicts if a.verdict == "unverified")
    rows = [
        Row.proportion(name, "certify_accuracy", agree, max(1, len(judged)), split="labels"),
        Row.proportion(name, "refuted_references", refuted, max(1, len(refs)), split="labels"),
    ]

    found = judge.assess(
        [JudgeRequest(p, r.proof) for p, r in refs], ("calculation", "techniques"), gate=False
    )
    calc_pred: list[bool] = []
    calc_true: list[bool] = []
    hit = labelled = detected = right = 0
    for (_, r), a in zip(refs, found, strict=True):
        if r.calc_steps is not None and a.calculation is not None and len(a.steps) == len(r.steps):
            for i in range(len(r.steps)):
                calc_pred.append(i in a.calculation)
                calc_true.append(i in r.calc_steps)
        if a.techniques is not None:
            hit += len(set(r.techniques) & a.techniques)
            labelled += len(r.techniques)
            detected += len(a.techniques)
            right += len(a.techniques & set(r.techniques))
    if calc_true:
        same = sum(x == y for x, y in zip(calc_pred, calc_true, strict=True))
        rows.append(
            Row.proportion(name, "calc_step_accuracy", same, len(calc_true), split="labels")
        )
    if labelled:
        rows.append(Row.proportion(name, "technique_recall", hit, labelled, split="labels"))
    if detected:
        rows.append(Row.proportion(name, "technique_precision", right, detected, split="labels"))
    kappa = cohen_kappa(calc_pred, calc_true)
    parts = [
        f"certification accuracy {agree}/{len(judged)} ({unverified} unverified, "
        f"{refuted} references refuted)"
    ]
    if calc_true:
        k = "undefined" if kappa is None else f"{kappa:.2f}"
        parts.append(f"calculation steps {same}/{len(calc_true)} (Cohen's kappa {k})")
    if labelled:
        parts.append(f"technique recall {hit}/{labelled}, precision {right}/{detected}")
    return Agreement(rows, kappa, ", ".join(parts))
