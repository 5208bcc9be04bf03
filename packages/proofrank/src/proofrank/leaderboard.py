"""The ProofRank leaderboard: any ChatModel as a prover, scored on the five proxies.

:func:`evaluate` asks a prover (scripted, local transformers, or served through
:class:`paperstack.llm.OpenAIChat`) for

1. one greedy proof of each problem: correctness and, behind the gate, conciseness,
   computational ease and cognitive simplicity;
2. ``samples`` proofs of each problem at ``temperature``: diversity over the correct ones;
3. one greedy proof per requestable technique of each problem: adaptivity;

and has a :class:`~proofrank.judges.Judge` assess every proof. :meth:`ProverRun.rows` turns the
per-problem values into paperstack rows (``Row.from_items`` keyed by problem id: every
comparison between two provers is paired over the problems both have a value for, and the
bootstrap resamples problems, i.e. it is clustered by problem), correctness as ``k / n``.
:func:`proxy_correctness_correlation` gives the Spearman correlation between a proxy and
correctness across provers, with a bootstrap over problems. Judge failures are counted per
prover and never turned into scores.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from paperstack.llm import ChatModel
from paperstack.records import Row
from proofrank.errors import ProofRankError
from proofrank.judges import Assessment, Judge, JudgeFailure, JudgeRequest
from proofrank.problems import ProblemSet
from proofrank.prompts import prover_prompt
from proofrank.scoring import (
    ProofScore,
    adaptivity,
    embedding_diversity,
    label_diversity,
    score_proof,
)
from proofrank.taxonomy import DEFAULT_TAXONOMY, Taxonomy

__all__ = [
    "MEASURES",
    "METRICS",
    "ProverRun",
    "evaluate",
    "pairwise",
    "pairwise_load",
    "proxy_correctness_correlation",
]

#: Row metrics and whether higher is better.
METRICS: dict[str, bool] = {
    "correct": True,
    "certified": True,
    "unverified": False,
    "verbosity": False,
    "unnecessary_share": False,
    "calc_share": False,
    "tier": False,
    "label_diversity": True,
    "embedding_diversity": True,
    "adaptivity": True,
    # the authors' definitions (an LLM judge; see proofrank.scoring)
    "rewrite_ratio": False,
    "computation_load": False,
    "complexity_load": False,
    "idea_entropy": True,
}
#: The two ways of measuring quality: the authors' LLM-judged definitions, or the cheap proxies.
MEASURES = ("authors", "proxies")


@dataclasses.dataclass
class ProverRun:
    """What :func:`evaluate` measured for one prover; per-problem values keyed by problem id."""

    name: str
    problem_ids: list[str]
    scores: dict[str, ProofScore]
    diversity: dict[str, dict[str, float]]  # metric -> problem -> value
    adaptivity: dict[str, float]
    failures: list[JudgeFailure]
    proofs: int
    #: the greedy proof of each problem (what the pairwise comparisons read)
    texts: dict[str, str] = dataclasses.field(default_factory=dict)
    #: the authors' measures: metric -> problem -> value (``idea_entropy``, and
    #: ``computation_load`` / ``complexity_load`` once :func:`pairwise_load` ran)
    authors: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)

    def values(self, metric: str) -> dict[str, float]:
        """``{problem id: value}`` of one metric where it is defined."""
        if metric == "correct":  # over decided proofs: unverified ones are not incorrect
            return {
                pid: float(s.correct) for pid, s in self.scores.items() if s.correct is not None
            }
        if metric in ("certified", "unverified"):  # over every proof with a verdict
            want = "correct" if metric == "certified" else "unverified"
            return {
                pid: float(s.verdict == want)
                for pid, s in self.scores.items()
                if s.verdict is not None
            }
        if metric in ("label_diversity", "embedding_diversity"):
            return dict(self.diversity.get(metric, {}))
        if metric == "adaptivity":
            return dict(self.adaptivity)
        if metric in ("computation_load", "complexity_load", "idea_entropy"):
            return dict(self.authors.get(metric, {}))
        if metric not in METRICS:
            raise ProofRankError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
        out = {}
        for pid, s in self.scores.items():
            v = getattr(s, metric)
            if v is not None:
                out[pid] = float(v)
        return out

    def rows(self, system: str | None = None, split: str | None = None) -> list[Row]:
        """Rows of every metric with at least one value: correctness as ``k / n`` (Wilson) over
        the decided proofs (correct or incorrect), ``certified`` and ``unverified`` as ``k / n``
        over every proof with a verdict (an unverified proof is not counted as incorrect: it
        is in ``unverified``, and out of ``correct``'s ``n``), the rest per problem (paired
        bootstrap between provers), and the judge-failure count."""
        name = system or self.name
        out = []
        for metric in ("correct", "certified", "unverified"):
            vals = self.values(metric)
            if vals:
                k = int(sum(vals.values()))
                out.append(
                    Row.proportion(name, metric, k, len(vals), split=split, unit="proportion")
                )
        for metric in METRICS:
            if metric in ("correct", "certified", "unverified"):
                continue
            vals = self.values(metric)
            if vals:
                out.append(Row.from_items(name, metric, vals, split=split))
        out.append(
            Row.proportion(
                name, "judge_failures", len(self.failures), max(self.proofs, 1), split=split
            )
        )
        return out


def _judge(judge: Judge, requests: list[JudgeRequest], aspects: Sequence[str]) -> list[Assessment]:
    out = judge.assess(requests, aspects)
    if len(out) != len(requests):
        raise ProofRankError(
            f"judge {judge.name!r} returned {len(out)} assessments for {len(requests)} proofs"
        )
    return out


def evaluate(
    prover: ChatModel,
    problems: ProblemSet,
    judge: Judge,
    *,
    samples: int = 4,
    temperature: float = 0.8,
    seed: int = 0,
    max_new_tokens: int = 512,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    taxonomy: Taxonomy = DEFAULT_TAXONOMY,
    adaptive: bool = True,
    name: str | None = None,
    measures: str = "proxies",
) -> ProverRun:
    """Score ``prover`` on ``problems`` (see the module docstring).

    ``embed`` (texts -> an array of row embeddings, e.g. ``paperstack.embed.Embedder().encode``)
    adds embedding diversity; ``samples < 2`` skips diversity; ``adaptive=False`` skips the
    technique requests.

    ``measures="authors"`` (needs an :class:`~proofrank.judges.LLMJudge`) measures conciseness
    by the judge's verified rewrites (``rewrite_ratio``) and diversity by the entropy of the
    judge's clusters of core ideas (``idea_entropy``) instead of the proxies (the judge is then
    asked only for correctness of the greedy and sampled proofs); run :func:`pairwise_load`
    over several provers' runs for computational ease and cognitive simplicity. The word
    ratio to the shortest reference (``verbosity``) is kept: it costs nothing.
    """
    if measures not in MEASURES:
        raise ProofRankError(f"unknown measures {measures!r}; known: {', '.join(MEASURES)}")
    authors = measures == "authors"
    if authors and not hasattr(judge, "rewrite_ratios"):
        raise ProofRankError(
            f"the authors' measures need an LLM judge (judge {judge.name!r} has none of them); "
            "use measures='proxies'"
        )
    probs = list(problems)
    failures: list[JudgeFailure] = []
    proofs = 0

    # 1. one greedy proof per problem
    greedy = prover.generate(
        [prover_prompt(p, taxonomy=taxonomy) for p in probs],
        max_new_tokens=max_new_tokens,
        temperature=0.0,
        seed=seed,
    )
    texts = [str(g[0]) for g in greedy]
    requests = [JudgeRequest(p, t) for p, t in zip(probs, texts, strict=True)]
    aspects = ("correct",) if authors else ("correct", "unnecessary", "calculation", "techniques")
    found = _judge(judge, requests, aspects)
    proofs += len(requests)
    scores = {}
    for p, text, a in zip(probs, texts, found, strict=True):
        failures.extend(a.failures)
        scores[p.id] = score_proof(p, text, a, taxonomy)
    if authors:
        certified = [(p, t) for p, t in zip(probs, texts, strict=True) if scores[p.id].correct]
        before = len(judge.failures)  # type: ignore[attr-defined]
        ratios = judge.rewrite_ratios(certified)  # type: ignore[attr-defined]
        failures.extend(judge.failures[before:])  # type: ignore[attr-defined]
        for (p, _), ratio in zip(certified, ratios, strict=True):
            scores[p.id] = dataclasses.replace(scores[p.id], rewrite_ratio=ratio)

    # 2. diversity: k samples per problem, over the correct ones
    diversity: dict[str, dict[str, float]] = {}
    authors_values: dict[str, dict[str, float]] = {}
    if samples >= 2:
        sampled = prover.generate(
            [prover_prompt(p, taxonomy=taxonomy) for p in probs],
            n=samples,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed,
        )
        flat = [(p, str(t)) for p, group in zip(probs, sampled, strict=True) for t in group]
        sample_aspects = ("correct",) if authors else ("correct", "techniques")
        assessed = _judge(judge, [JudgeRequest(p, t) for p, t in flat], sample_aspects)
        proofs += len(flat)
        per_problem: dict[str, list[tuple[str, Assessment]]] = {}
        for (p, t), a in zip(flat, assessed, strict=True):
            failures.extend(a.failures)
            if a.correct and (authors or a.techniques is not None):
                per_problem.setdefault(p.id, []).append((t, a))
        if authors:
            many = [(pid, good) for pid, good in per_problem.items() if len(good) >= 2]
            by_id = {p.id: p for p in probs}
            before = len(judge.failures)  # type: ignore[attr-defined]
            entropies = judge.idea_entropy(  # type: ignore[attr-defined]
                [(by_id[pid], [t for t, _ in good]) for pid, good in many]
            )
            failures.extend(judge.failures[before:])  # type: ignore[attr-defined]
            authors_values["idea_entropy"] = {
                pid: e for (pid, _), e in zip(many, entropies, strict=True) if e is not None
            }
        else:
            labels: dict[str, float] = {}
            for pid, good in per_problem.items():
                d = label_diversity([a.techniques for _, a in good if a.techniques is not None])
                if d is not None:
                    labels[pid] = d
            diversity["label_diversity"] = labels
        if embed is not None:
            emb: dict[str, float] = {}
            for pid, good in per_problem.items():
                if len(good) >= 2:
                    d = embedding_diversity(np.asarray(embed([t for t, _ in good])))
                    if d is not None:
                        emb[pid] = d
            diversity["embedding_diversity"] = emb

    # 3. adaptivity: one greedy proof per requested technique
    adapt: dict[str, float] = {}
    if adaptive:
        asks = [(p, t) for p in probs for t in p.requestable]
        answers = prover.generate(
            [prover_prompt(p, t, taxonomy) for p, t in asks],
            max_new_tokens=max_new_tokens,
            temperature=0.0,
            seed=seed,
        )
        reqs = [JudgeRequest(p, str(a[0]), t) for (p, t), a in zip(asks, answers, strict=True)]
        assessed = _judge(judge, reqs, ("correct", "uses_technique"))
        proofs += len(reqs)
        by_problem: dict[str, list[Assessment]] = {}
        for r, a in zip(reqs, assessed, strict=True):
            failures.extend(a.failures)
            by_problem.setdefault(r.problem.id, []).append(a)
        for pid, group in by_problem.items():
            v = adaptivity(group)
            if v is not None:
                adapt[pid] = v

    return ProverRun(
        name=name or prover.name,
        problem_ids=[p.id for p in probs],
        scores=scores,
        diversity=diversity,
        adaptivity=adapt,
        failures=failures,
        proofs=proofs,
        texts=dict(zip([p.id for p in probs], texts, strict=True)),
        authors=authors_values,
    )


def pairwise_load(
    runs: Mapping[str, ProverRun], problems: ProblemSet, judge: Any, kind: str
) -> dict[str, Any]:
    """The authors' computational ease (``kind="computation"``) or cognitive simplicity
    (``"complexity"``): every pair of provers whose greedy proofs of a problem are both
    correct is compared by ``judge`` (an :class:`~proofrank.judges.LLMJudge`, both orders,
    ties allowed); each prover's per-problem ``<kind>_load`` (stored in its run's
    ``authors``) is :func:`~proofrank.scoring.preference`, its mean vote against the others
    (lower is easier / simpler). Returns the comparisons ``{"a", "b", "problem_id", "vote"}``
    (vote from ``a``'s side)."""
    from proofrank.scoring import preference

    names = list(runs)
    items, keys = [], []
    for p in problems:
        ok = [n for n in names if (s := runs[n].scores.get(p.id)) is not None and s.correct]
        for i, a in enumerate(ok):
            for b in ok[i + 1 :]:
                items.append((p, runs[a].texts[p.id], runs[b].texts[p.id]))
                keys.append((a, b, p.id))
    before = len(judge.failures)
    votes = judge.compare(kind, items) if items else []
    new_failures = judge.failures[before:]
    per: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    records = []
    for (a, b, pid), v in zip(keys, votes, strict=True):
        records.append({"a": a, "b": b, "problem_id": pid, "vote": v})
        if v is None:
            continue
        per[a].setdefault(pid, []).append(v)
        per[b].setdefault(pid, []).append(-v)
    for n in names:
        values = {pid: preference(vs) for pid, vs in per[n].items()}
        runs[n].authors[f"{kind}_load"] = {k: v for k, v in values.items() if v is not None}
        runs[n].failures.extend(f for f in new_failures if any(
            r["problem_id"] == f.problem_id and n in (r["a"], r["b"]) for r in records
        ))  # fmt: skip
    return {"kind": kind, "comparisons": records}


def pairwise(runs: Mapping[str, ProverRun], metric: str) -> list[dict[str, Any]]:
    """Every pair of provers compared on ``metric``, paired over the problems both have a
    value for: ``d = a - b`` with its 95% interval (paired bootstrap over problems, t below
    ten) and which prover is better by the interval (``None``: the interval straddles 0, or
    fewer than two shared problems)."""
    from paperstack import stats

    higher = METRICS.get(metric, True)
    out = []
    names = list(runs)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            va, vb = runs[a].values(metric), runs[b].values(metric)
            shared = set(va) & set(vb)
            if len(shared) < 2:
                out.append({"a": a, "b": b, "metric": metric, "n": len(shared), "d": None,
                            "ci95": None, "better": None})  # fmt: skip
                continue
            d, (lo, hi), n = stats.paired_diff_ci(va, vb, unit="item")
            better = None
            if lo > 0 or hi < 0:
                a_wins = (lo > 0) == higher
                better = a if a_wins else b
            out.append({"a": a, "b": b, "metric": metric, "n": n, "d": d, "ci95": [lo, hi],
                        "better": better})  # fmt: skip
    return out


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(spearmanr(x, y).statistic)


def proxy_correctness_correlation(
    runs: Mapping[str, ProverRun],
    metric: str,
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Spearman correlation, across provers, between a proxy's mean and correctness, with a
    percentile bootstrap over problems (both means recomputed on each resample).

    ``rho`` is None where it is undefined (every prover equally correct, or equal on the proxy);
    ``ci95`` is None then, or when fewer than three provers have values.
    """
    names = list(runs)
    problems = sorted(set().union(*(set(r.problem_ids) for r in runs.values())))
    if len(names) < 3:
        return {"metric": metric, "rho": None, "ci95": None, "provers": len(names)}
    idx = {pid: i for i, pid in enumerate(problems)}
    corr = np.full((len(names), len(problems)), np.nan)
    prox = np.full((len(names), len(problems)), np.nan)
    for i, n in enumerate(names):
        for pid, v in runs[n].values("correct").items():
            corr[i, idx[pid]] = v
        for pid, v in runs[n].values(metric).items():
            prox[i, idx[pid]] = v

    def stat(cols: np.ndarray) -> float:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a provers' row with no values: NaN mean
            c = np.nanmean(corr[:, cols], axis=1)
            q = np.nanmean(prox[:, cols], axis=1)
        ok = ~(np.isnan(c) | np.isnan(q))
        return _spearman(c[ok], q[ok]) if ok.sum() >= 3 else math.nan

    rho = stat(np.arange(len(problems)))
    ci = None
    if not math.isnan(rho):
        rng = np.random.default_rng(seed)
        boots = np.array(
            [stat(rng.integers(0, len(problems), len(problems))) for _ in range(resamples)]
        )
        boots = boots[~np.isnan(boots)]
        if boots.size:
            ci = (float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975)))
    return {
        "metric": metric,
        "rho": None if math.isnan(rho) else rho,
        "ci95": ci,
        "provers": len(names),
    }
