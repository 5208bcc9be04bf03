"""The five ProofRank proxies of proof quality, and the correctness gate they sit behind.

For a proof :math:`P` of problem :math:`q` with steps :math:`s_1 \\dots s_n`, judged by a
:class:`~proofrank.judges.Judge`, and :math:`R^*` the shortest reference proof of :math:`q`
(in words):

- **correctness** (the gate): the judge's verdict, ``correct``, ``incorrect`` or
  ``unverified`` (the judge could not decide: the rule judge on a proof that follows no
  reference). The quality proxies below are computed only for ``correct`` proofs (the paper
  scores quality on correct proofs); an incorrect or unverified proof has no quality score,
  not a bad one, and an unverified proof is counted as unverified, never as incorrect.
- **conciseness** (lower is better):
  :math:`\\mathrm{verbosity}(P) = \\mathrm{words}(P) / \\mathrm{words}(R^*)`, the paper's
  original-to-concise word ratio with the shortest reference as the concise version; also the
  step ratio :math:`n / |R^*|` and the unnecessary-step share :math:`|U| / n`, with :math:`U` the
  steps the judge finds deletable (restatements, repetitions, commentary).
- **computational ease** (lower calculation share is easier):
  :math:`\\mathrm{calc}(P) = |C| / n`, with :math:`C` the steps the judge finds routine
  calculation.
- **cognitive simplicity** (lower is simpler): :math:`\\mathrm{tier}(P) = \\max_{t \\in T(P)}
  \\mathrm{tier}(t)`, the hardest technique of the taxonomy the judge finds in the proof (a
  proof that uses no listed technique is tier 1: school mathematics).
- **diversity** of :math:`k \\ge 2` correct proofs :math:`P_1 \\dots P_k` of one problem (higher
  is more diverse): the mean pairwise distance
  :math:`\\frac{2}{k(k-1)} \\sum_{i<j} d(P_i, P_j)`, with :math:`d` the Jaccard distance of
  their technique sets (:func:`label_diversity`) or one minus the cosine similarity of their
  MiniLM embeddings (:func:`embedding_diversity`).
- **adaptivity** (higher is better): over the requests "prove :math:`q` using technique
  :math:`t`", the share whose proof the judge finds correct **and** using :math:`t`.

The authors' definitions (their public code; asked of an LLM judge by
:class:`~proofrank.judges.LLMJudge`, the default of ``proofrank leaderboard --judge-model``; the
proxies above are the named cheap alternatives, ``--measures proxies``):

- **conciseness**: :func:`rewrite_ratio`, ``words(P) / mean words(R)`` over the judge's concise
  rewrites :math:`R` of :math:`P` that its verifier accepts (lower is more concise; about 1:
  already concise);
- **computational ease** and **cognitive simplicity**: pairwise comparisons with ties between
  two provers' correct proofs of one problem, asked in both orders (position bias); each vote
  is +1 (this proof imposes more load), -1 (the other does) or 0 (tie), and a prover's
  per-problem load is :func:`preference` (the mean vote against every other prover: lower is
  easier / simpler);
- **diversity**: :func:`cluster_entropy`, the Shannon entropy (bits) of the cluster sizes when
  the judge clusters the core ideas of a prover's correct proofs of one problem (higher is more
  diverse; 0 for one cluster).

Everything here is a pure function of judge findings, so it is exact and testable; the judges
(rule-based or LLM) are in :mod:`proofrank.judges`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

import numpy as np

from proofrank.judges import Assessment
from proofrank.problems import Problem
from proofrank.taxonomy import DEFAULT_TAXONOMY, Taxonomy
from proofrank.text import jaccard, word_count

__all__ = [
    "ProofScore",
    "adaptivity",
    "cluster_entropy",
    "embedding_diversity",
    "label_diversity",
    "max_tier",
    "preference",
    "rewrite_ratio",
    "score_proof",
]


@dataclasses.dataclass(frozen=True)
class ProofScore:
    """The proxies of one proof. ``verdict`` is ``correct``, ``incorrect``, ``unverified`` or
    ``None`` (the judge failed on it); ``correct`` is True/False for the first two and
    ``None`` otherwise. The quality fields are ``None`` behind the gate (a proof not certified
    correct) or when the judge failed on that aspect (see the assessment's ``failures``)."""

    problem_id: str
    correct: bool | None
    verdict: str | None = None
    verbosity: float | None = None
    step_ratio: float | None = None
    unnecessary_share: float | None = None
    calc_share: float | None = None
    tier: int | None = None
    techniques: frozenset[str] | None = None
    #: the authors' conciseness (:func:`rewrite_ratio`), with an LLM judge only
    rewrite_ratio: float | None = None


def max_tier(techniques: frozenset[str], taxonomy: Taxonomy = DEFAULT_TAXONOMY) -> int:
    """The hardest tier among ``techniques`` (1 when there are none)."""
    return max((taxonomy.tier(t) for t in techniques), default=1)


def score_proof(
    problem: Problem,
    proof: str,
    assessment: Assessment,
    taxonomy: Taxonomy = DEFAULT_TAXONOMY,
) -> ProofScore:
    """The proxies of one judged proof (see the module docstring for the formulas)."""
    if assessment.correct is not True:
        return ProofScore(problem.id, assessment.correct, assessment.verdict)
    ref = problem.shortest_reference()
    n = len(assessment.steps)
    return ProofScore(
        problem_id=problem.id,
        correct=True,
        verdict=assessment.verdict,
        verbosity=word_count(proof) / max(1, word_count(ref.proof)),
        step_ratio=n / len(ref.steps),
        unnecessary_share=None
        if assessment.unnecessary is None
        else len(assessment.unnecessary) / n,
        calc_share=None if assessment.calculation is None else len(assessment.calculation) / n,
        tier=None if assessment.techniques is None else max_tier(assessment.techniques, taxonomy),
        techniques=assessment.techniques,
    )


def _mean_pairwise(distances: Sequence[float]) -> float:
    return math.fsum(distances) / len(distances)


def label_diversity(technique_sets: Sequence[frozenset[str]]) -> float | None:
    """Mean pairwise Jaccard distance of the technique sets of ``k`` proofs of one problem;
    ``None`` for fewer than two proofs (diversity is undefined)."""
    if len(technique_sets) < 2:
        return None
    return _mean_pairwise(
        [1.0 - jaccard(set(a), set(b)) for a, b in itertools.combinations(technique_sets, 2)]
    )


def embedding_diversity(embeddings: np.ndarray) -> float | None:
    """Mean pairwise cosine distance of ``k`` proof embeddings (rows; normalised here);
    ``None`` for fewer than two."""
    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        return None
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    sims = x @ x.T
    iu = np.triu_indices(x.shape[0], k=1)
    # Identical texts give 1 - cos = +-1e-16 of rounding: clip and round it away.
    return round(float(np.clip(np.mean(1.0 - sims[iu]), 0.0, 2.0)), 12)


def adaptivity(assessments: Sequence[Assessment]) -> float | None:
    """Share of technique requests whose proof is correct and uses the requested technique.

    A request the judge failed on (``correct`` or ``uses_technique`` is ``None`` after a
    judge failure) and a request whose proof is unverified (correctness unknown) are left
    out, not counted as misses; ``None`` when none is left.
    """
    judged = []
    for a in assessments:
        if a.correct is None:
            continue
        if a.correct is False:
            judged.append(0.0)
        elif a.uses_technique is not None:
            judged.append(1.0 if a.uses_technique else 0.0)
    return math.fsum(judged) / len(judged) if judged else None


def rewrite_ratio(proof: str, valid_rewrites: Sequence[str]) -> float | None:
    """The authors' conciseness: ``words(proof) / mean words(valid rewrites)``; None when no
    rewrite passed the verifier (nothing to compare with, not a score of 1)."""
    lengths = [word_count(r) for r in valid_rewrites]
    if not lengths or not any(lengths):
        return None
    return word_count(proof) / (math.fsum(lengths) / len(lengths))


def cluster_entropy(labels: Sequence[int]) -> float | None:
    """Shannon entropy in bits of the cluster sizes of ``labels`` (one cluster id per proof),
    as the authors' ``entropy_from_counts``: 0 for one proof or one cluster, ``log2 k`` for
    ``k`` proofs in ``k`` clusters; None for no proof."""
    if not labels:
        return None
    counts: dict[int, int] = {}
    for c in labels:
        counts[c] = counts.get(c, 0) + 1
    n = len(labels)
    if n <= 1:
        return 0.0
    return max(0.0, -math.fsum(k / n * math.log2(k / n) for k in counts.values()))


def preference(votes: Sequence[float]) -> float | None:
    """The mean of pairwise votes (+1 this proof has more load, -1 the other, 0 tie); None
    for no vote."""
    return math.fsum(votes) / len(votes) if votes else None
