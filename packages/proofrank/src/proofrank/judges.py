"""Judges: what decides, for one proof, whether it is correct, which steps are unnecessary or
calculation, which techniques it uses, and whether it uses a requested technique.

Two kinds behind one interface (:class:`Judge`, ``assess(requests, aspects)``):

- :class:`RuleJudge`: deterministic approximations with no model, for tests, the demo and a
  baseline. Its correctness verdict is three-valued, because a rubric can certify but can
  rarely refute: a proof that contains every step of some reference, in order, with identical
  mathematics, is ``correct``; a proof it can soundly refute (an empty proof, or nothing but
  an admission that no proof was found) is ``incorrect``; everything else (a new argument, a
  reference with a step missing, a paraphrase) is ``unverified``: its correctness is unknown,
  so it gets no quality score and is counted as unverified, never as incorrect. Unnecessary
  steps are restatements of the problem, repetitions of an earlier step and mathematics-free
  commentary; calculation steps are equations dense in mathematics; techniques are found by
  the cues of the taxonomy. Use an LLM judge for models that write their own arguments.
- :class:`LLMJudge`: any :class:`~paperstack.llm.ChatModel` asked the prompts of
  :mod:`proofrank.prompts` (wrap it in :class:`paperstack.llm.Recorder` to record and replay
  its answers), ``samples`` answers per question and a majority verdict, as in the paper. An
  answer that does not parse is a :class:`JudgeFailure`, recorded and counted, never a score.

The correctness gate: quality aspects are asked only about proofs the judge found correct (the
paper scores quality on correct proofs); an incorrect or unverified proof, and a proof whose
gate verdict failed, gets nothing.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from paperstack.llm import ChatModel, CostLedger
from proofrank.errors import ProofRankError
from proofrank.problems import Problem
from proofrank.prompts import (
    JudgeParseError,
    cluster_prompt,
    core_idea_prompt,
    judge_prompt,
    pairwise_prompt,
    parse_clusters,
    parse_pairwise,
    parse_step_set,
    parse_techniques,
    parse_verdict,
    parse_yes_no,
    rewrite_check_prompt,
    rewrite_prompt,
)
from proofrank.taxonomy import DEFAULT_TAXONOMY, Taxonomy
from proofrank.text import (
    containment,
    content_tokens,
    jaccard,
    math_atoms,
    math_segments,
    normalize_math,
    prose,
    prose_tokens,
    split_steps,
    word_count,
)

__all__ = [
    "ASPECTS",
    "CORRECT",
    "INCORRECT",
    "UNVERIFIED",
    "Assessment",
    "Judge",
    "JudgeFailure",
    "JudgeRequest",
    "LLMJudge",
    "RuleConfig",
    "RuleJudge",
]

#: What a judge can be asked about a proof.
ASPECTS = ("correct", "unnecessary", "calculation", "techniques", "uses_technique")
_QUALITY = ("unnecessary", "calculation", "techniques")
#: The three correctness verdicts (``Assessment.verdict``).
CORRECT, INCORRECT, UNVERIFIED = "correct", "incorrect", "unverified"


@dataclasses.dataclass(frozen=True)
class JudgeRequest:
    """One proof of ``problem`` to judge; ``technique``: the technique it was asked to use."""

    problem: Problem
    proof: str
    technique: str | None = None

    @property
    def steps(self) -> tuple[str, ...]:
        return tuple(split_steps(self.proof))


@dataclasses.dataclass(frozen=True)
class JudgeFailure:
    """A judge answer that gave no verdict: which aspect of which proof, why, what it said."""

    aspect: str
    problem_id: str
    reason: str
    answer: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "aspect": self.aspect,
            "problem_id": self.problem_id,
            "reason": self.reason,
            "answer": self.answer[:500],
        }


@dataclasses.dataclass
class Assessment:
    """A judge's findings about one proof; ``None`` means not asked (or failed: see
    ``failures``). Step sets hold 0-based indices into ``steps``.

    ``correct`` is True (certified), False (refuted) or None; ``unverified`` is True when the
    judge was asked and could not decide (``correct`` is None then): the proof's correctness is
    unknown, which is neither incorrect nor a judge failure. ``reason`` says why a verdict was
    ``incorrect`` or ``unverified`` (one line)."""

    steps: tuple[str, ...]
    correct: bool | None = None
    unverified: bool = False
    reason: str | None = None
    unnecessary: frozenset[int] | None = None
    calculation: frozenset[int] | None = None
    techniques: frozenset[str] | None = None
    uses_technique: bool | None = None
    failures: list[JudgeFailure] = dataclasses.field(default_factory=list)

    def failed(self, aspect: str) -> bool:
        return any(f.aspect == aspect for f in self.failures)

    @property
    def verdict(self) -> str | None:
        """``"correct"``, ``"incorrect"``, ``"unverified"``, or None (not asked, or the judge
        failed on correctness: see ``failures``)."""
        if self.correct is True:
            return CORRECT
        if self.correct is False:
            return INCORRECT
        return UNVERIFIED if self.unverified else None


@runtime_checkable
class Judge(Protocol):
    """Anything that assesses proofs: :class:`RuleJudge`, :class:`LLMJudge`, your own."""

    name: str

    def assess(
        self,
        requests: Sequence[JudgeRequest],
        aspects: Sequence[str] = ASPECTS,
        *,
        gate: bool = True,
    ) -> list[Assessment]:
        """One :class:`Assessment` per request. With ``gate``, quality aspects and
        ``uses_technique`` are asked only about proofs judged correct."""
        ...


def _check_aspects(aspects: Sequence[str]) -> list[str]:
    bad = [a for a in aspects if a not in ASPECTS]
    if bad:
        raise ProofRankError(f"unknown judge aspect(s) {bad}; known: {', '.join(ASPECTS)}")
    return [a for a in ASPECTS if a in aspects]  # gate first, fixed order


def _empty_steps(assessment: Assessment, request: JudgeRequest) -> bool:
    """A proof with no steps (the prover wrote nothing, or only "QED") is incorrect without
    asking a judge; it is the prover's failure, not the judge's, so no JudgeFailure."""
    if assessment.steps:
        return False
    assessment.correct = False
    assessment.reason = "the proof has no steps"
    return True


# --------------------------------------------------------------------------- the rule judge

_ADMISSION = re.compile(
    r"\b(i|we) (cannot|can't|could not|couldn't|am unable to|are unable to|do not know how to|"
    r"don't know how to) (prove|show|solve|find a proof)",
    re.IGNORECASE,
)


def _segments(text: str) -> set[str]:
    return {normalize_math(m) for m in math_segments(text)} - {""}


@dataclasses.dataclass(frozen=True)
class RuleConfig:
    """Thresholds of the deterministic judge. The defaults were chosen on the ``dev`` split of
    the shipped set (``proofrank tune``), never on the reported ``test`` split."""

    #: prose Jaccard two steps need to match (their mathematics must be identical)
    match_prose: float = 0.5
    #: share of a step's tokens found in the problem statement that makes it a restatement
    restate: float = 0.8
    #: share of a step's tokens found in one earlier step that makes it a repetition
    repeat: float = 0.8
    #: tokens a step needs before it can be a restatement or a repetition
    min_tokens: int = 4
    #: a step with no mathematics sharing fewer content words than this with the problem and
    #: the other steps is commentary
    vacuous_overlap: int = 2
    #: share of mathematics atoms among a step's tokens above which an equation is calculation
    calc_density: float = 0.6


class RuleJudge:
    """The deterministic judge (see the module docstring); ``config`` holds its thresholds."""

    def __init__(self, config: RuleConfig | None = None, taxonomy: Taxonomy = DEFAULT_TAXONOMY):
        self.config = config or RuleConfig()
        self.taxonomy = taxonomy
        self.name = "rule"

    # -- the five findings ---------------------------------------------------------------

    def _match(self, ref: str, step: str) -> bool:
        ref_math = [normalize_math(m) for m in math_segments(ref)]
        step_math = [normalize_math(m) for m in math_segments(step)]
        if ref_math != step_math:
            return False
        return jaccard(set(prose_tokens(ref)), set(prose_tokens(step))) >= self.config.match_prose

    def follows_reference(self, problem: Problem, steps: Sequence[str]) -> bool:
        """True when, for some reference, every step appears in ``steps`` in order."""
        for ref in problem.references:
            pos = 0
            for ref_step in ref.steps:
                while pos < len(steps) and not self._match(ref_step, steps[pos]):
                    pos += 1
                if pos == len(steps):
                    break
                pos += 1
            else:
                return True
        return False

    def refute(self, steps: Sequence[str]) -> str | None:
        """Why the proof is certainly incorrect, or None when nothing here refutes it.

        Only sound refutations: every step is a short admission that no proof was found
        ("I cannot prove this."). Nothing about the mathematics is refuted: a false-looking
        identity may sit inside a proof by contradiction or a conditional ("only if
        $(-1)^{(3-1)/2} = 1$", from a shipped reference), and a proof that merely differs from
        the references is unverified, not incorrect. (An empty proof is refuted before any
        judge is asked.)
        """
        if steps and all(_ADMISSION.search(s) and word_count(s) <= 20 for s in steps):
            return "the prover says it found no proof"
        return None

    def correct(self, problem: Problem, steps: Sequence[str]) -> bool | None:
        """True when the proof follows a reference (:meth:`follows_reference`), False when it
        is refuted (:meth:`refute`), None (unverified) otherwise."""
        if self.refute(steps) is not None:
            return False
        return True if self.follows_reference(problem, steps) else None

    def unnecessary(self, problem: Problem, steps: Sequence[str]) -> frozenset[int]:
        """Restatements of the problem (except as the last step), repetitions of an earlier
        step, and commentary.

        A step restates (repeats) when its mathematics segments all occur whole in the problem
        (in one earlier step) and at least ``restate`` (``repeat``) of its content tokens do;
        a step with no mathematics, no number and no technique that shares fewer than
        ``vacuous_overlap`` content words with the problem and the other steps is commentary.
        """
        cfg = self.config
        statement = content_tokens(problem.statement)
        statement_math = _segments(problem.statement)
        tokens = [content_tokens(s) for s in steps]
        maths = [_segments(s) for s in steps]
        words = [set(prose_tokens(s)) for s in steps]
        problem_words = set(prose_tokens(problem.statement))
        out = set()
        for i, toks in enumerate(tokens):
            big = len(toks) >= cfg.min_tokens
            if (
                big
                and i < len(steps) - 1
                and maths[i] <= statement_math
                and containment(toks, statement) >= cfg.restate
            ) or (
                big
                and any(
                    maths[i] <= maths[j] and containment(toks, tokens[j]) >= cfg.repeat
                    for j in range(i)
                )
            ):
                out.add(i)
            elif not maths[i] and not any(c.isdigit() for c in steps[i]):
                if self.taxonomy.detect(steps[i]):
                    continue
                others = set().union(problem_words, *(w for j, w in enumerate(words) if j != i))
                if len(words[i] & others) < cfg.vacuous_overlap:
                    out.add(i)
        return frozenset(out)

    def calculation(self, steps: Sequence[str]) -> frozenset[int]:
        """Equations (``=`` or ``\\equiv``) whose tokens are mostly mathematics."""
        out = set()
        for i, step in enumerate(steps):
            atoms = math_atoms(step)
            if not any(a in ("=", "\\equiv") for a in atoms):
                continue
            density = len(atoms) / (len(atoms) + word_count(prose(step)))
            if density >= self.config.calc_density:
                out.add(i)
        return frozenset(out)

    def techniques(self, steps: Sequence[str]) -> frozenset[str]:
        return self.taxonomy.detect("\n".join(steps))

    def uses_technique(self, steps: Sequence[str], technique: str) -> bool:
        return self.taxonomy.uses("\n".join(steps), technique)

    # -- the Judge interface -------------------------------------------------------------

    def assess(
        self,
        requests: Sequence[JudgeRequest],
        aspects: Sequence[str] = ASPECTS,
        *,
        gate: bool = True,
    ) -> list[Assessment]:
        chosen = _check_aspects(aspects)
        out = []
        for req in requests:
            a = Assessment(steps=req.steps)
            out.append(a)
            if _empty_steps(a, req):
                continue
            if "correct" in chosen:
                a.reason = self.refute(a.steps)
                if a.reason is not None:
                    a.correct = False
                elif self.follows_reference(req.problem, a.steps):
                    a.correct = True
                else:
                    a.unverified = True
                    a.reason = "follows no reference proof: correctness unknown to the rule judge"
            open_ = not gate or "correct" not in chosen or a.correct is True
            if open_ and "unnecessary" in chosen:
                a.unnecessary = self.unnecessary(req.problem, a.steps)
            if open_ and "calculation" in chosen:
                a.calculation = self.calculation(a.steps)
            if open_ and "techniques" in chosen:
                a.techniques = self.techniques(a.steps)
            if open_ and "uses_technique" in chosen and req.technique is not None:
                a.uses_technique = self.uses_technique(a.steps, req.technique)
        return out


# --------------------------------------------------------------------------- the LLM judge


class LLMJudge:
    """A judge that asks a :class:`~paperstack.llm.ChatModel` (served, local or recorded).

    ``samples`` answers per question (the paper uses several) are combined by majority: a
    verdict holds when at least half of the answers that parsed say so (the paper's 50% rule),
    a step is in a set when at least half list it. Answers that do not parse are dropped; when
    none parses the aspect is a :class:`JudgeFailure`. Requests go to the model in one batch per
    aspect. ``ledger`` counts calls and the tokens the backend reported (the cost card).
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        taxonomy: Taxonomy = DEFAULT_TAXONOMY,
        samples: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 512,
        seed: int | None = 0,
        name: str | None = None,
    ) -> None:
        if samples < 1:
            raise ProofRankError(f"judge samples must be >= 1, got {samples}")
        if samples > 1 and temperature == 0.0:
            raise ProofRankError("several judge samples need a temperature > 0 (greedy repeats)")
        self.model = model
        self.taxonomy = taxonomy
        self.samples = samples
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.name = name or f"llm:{model.name}"
        self.ledger = CostLedger()
        self.failures: list[JudgeFailure] = []

    def _ask(self, prompts: list[Any]) -> list[list[str]]:
        if not prompts:
            return []
        started = time.monotonic()
        answers = self.model.generate(
            prompts,
            n=self.samples,
            temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed,
        )
        seconds = (time.monotonic() - started) / max(1, len(prompts) * self.samples)
        for group in answers:
            for answer in group:
                self.ledger.record(
                    model=self.model.name,
                    prompt_tokens=getattr(answer, "prompt_tokens", None),
                    completion_tokens=getattr(answer, "completion_tokens", None),
                    retries=0,
                    seconds=seconds,
                )
        if len(answers) != len(prompts) or any(len(g) != self.samples for g in answers):
            raise ProofRankError(
                f"judge model {self.model.name!r} returned {len(answers)} answer groups for "
                f"{len(prompts)} prompts"
            )
        return answers

    def _combine(self, aspect: str, answers: Sequence[str], n_steps: int) -> Any:
        parsed: list[Any] = []
        reasons: list[str] = []
        for answer in answers:
            try:
                if aspect == "correct":
                    parsed.append(parse_verdict(answer))
                elif aspect == "uses_technique":
                    parsed.append(parse_yes_no(answer))
                elif aspect == "techniques":
                    parsed.append(parse_techniques(answer, self.taxonomy))
                else:
                    parsed.append(parse_step_set(answer, n_steps))
            except JudgeParseError as exc:
                reasons.append(str(exc))
        if not parsed:
            raise JudgeParseError("; ".join(dict.fromkeys(reasons)))
        half = len(parsed) / 2
        if isinstance(parsed[0], bool):
            return sum(parsed) >= half
        counts: dict[Any, int] = {}
        for found in parsed:
            for item in found:
                counts[item] = counts.get(item, 0) + 1
        return frozenset(k for k, c in counts.items() if c >= half)

    def assess(
        self,
        requests: Sequence[JudgeRequest],
        aspects: Sequence[str] = ASPECTS,
        *,
        gate: bool = True,
    ) -> list[Assessment]:
        chosen = _check_aspects(aspects)
        out = [Assessment(steps=req.steps) for req in requests]
        live = [
            i for i, (a, r) in enumerate(zip(out, requests, strict=True)) if not _empty_steps(a, r)
        ]
        for aspect in chosen:
            todo = []
            for i in live:
                a, req = out[i], requests[i]
                if aspect != "correct" and a.failed("correct"):
                    continue
                if aspect != "correct" and gate and "correct" in chosen and a.correct is not True:
                    continue
                if aspect == "uses_technique" and req.technique is None:
                    continue
                todo.append(i)
            prompts = [
                judge_prompt(aspect, requests[i].problem, out[i].steps, self.taxonomy,
                             requests[i].technique)
                for i in todo
            ]  # fmt: skip
            for i, answers in zip(todo, self._ask(prompts), strict=True):
                try:
                    value = self._combine(aspect, answers, len(out[i].steps))
                except JudgeParseError as exc:
                    failure = JudgeFailure(aspect, requests[i].problem.id, str(exc), answers[0])
                    out[i].failures.append(failure)
                    self.failures.append(failure)
                    continue
                setattr(out[i], aspect, value)
        return out

    # -- the authors' measures (see proofrank.scoring) -----------------------------------

    def _fail(self, aspect: str, problem: Problem, reason: str, answer: str = "") -> None:
        self.failures.append(JudgeFailure(aspect, problem.id, reason, answer))

    def rewrite_ratios(self, items: Sequence[tuple[Problem, str]]) -> list[float | None]:
        """The authors' conciseness of each ``(problem, proof)``: ``samples`` concise rewrites
        by the judge model, each checked by the judge's verifier (majority of ``samples``
        answers), and :func:`~proofrank.scoring.rewrite_ratio` over the accepted ones. None
        (and a recorded :class:`JudgeFailure` ``rewrite``) when no rewrite was accepted."""
        from proofrank.scoring import rewrite_ratio

        rewrites = self._ask([rewrite_prompt(p, proof) for p, proof in items])
        flat = [(i, str(r).strip()) for i, group in enumerate(rewrites) for r in group]
        checks = self._ask([rewrite_check_prompt(items[i][0], items[i][1], r) for i, r in flat])
        valid: list[list[str]] = [[] for _ in items]
        for (i, r), answers in zip(flat, checks, strict=True):
            votes = []
            for answer in answers:
                try:
                    votes.append(parse_yes_no(answer))
                except JudgeParseError:
                    continue
            if r and votes and sum(votes) >= len(votes) / 2:
                valid[i].append(r)
        out = []
        for (p, proof), good in zip(items, valid, strict=True):
            ratio = rewrite_ratio(proof, good)
            if ratio is None:
                self._fail("rewrite", p, "no concise rewrite passed the verifier")
            out.append(ratio)
        return out

    def compare(self, kind: str, items: Sequence[tuple[Problem, str, str]]) -> list[float | None]:
        """The authors' pairwise comparison with ties (``kind``: ``computation`` or
        ``complexity``) of each ``(problem, proof_a, proof_b)``, asked in both orders,
        ``samples`` answers each: the mean vote from ``proof_a``'s side (+1: a imposes more
        load, -1: b does, 0: tie). None (and a :class:`JudgeFailure`) when no answer parsed."""
        prompts = []
        for p, a, b in items:
            prompts += [pairwise_prompt(kind, p, a, b), pairwise_prompt(kind, p, b, a)]
        answers = self._ask(prompts)
        sign = {0: 0.0, 1: 1.0, 2: -1.0}
        out: list[float | None] = []
        for k, (p, _, _) in enumerate(items):
            votes = []
            for order, group in enumerate(answers[2 * k : 2 * k + 2]):
                for answer in group:
                    try:
                        v = sign[parse_pairwise(answer)]
                    except JudgeParseError:
                        continue
                    votes.append(v if order == 0 else -v)
            if not votes:
                self._fail(f"pairwise_{kind}", p, "no pairwise verdict parsed",
                           str(answers[2 * k][0]))  # fmt: skip
                out.append(None)
            else:
                out.append(sum(votes) / len(votes))
        return out

    def idea_entropy(self, items: Sequence[tuple[Problem, Sequence[str]]]) -> list[float | None]:
        """The authors' diversity of each ``(problem, proofs)``: the core idea of every proof
        (the judge's first answer), one clustering of the ideas (the first of ``samples``
        answers that parses into a partition), and
        :func:`~proofrank.scoring.cluster_entropy` of it. None (and a :class:`JudgeFailure`)
        when no clustering parsed."""
        from proofrank.scoring import cluster_entropy

        flat = [(i, proof) for i, (_, proofs) in enumerate(items) for proof in proofs]
        ideas = self._ask([core_idea_prompt(items[i][0], proof) for i, proof in flat])
        summaries: list[list[str]] = [[] for _ in items]
        for (i, _), group in zip(flat, ideas, strict=True):
            summaries[i].append(str(group[0]).strip() or "(no summary)")
        answers = self._ask([cluster_prompt(p, s) for (p, _), s in zip(items, summaries,
                                                                         strict=True)])  # fmt: skip
        out: list[float | None] = []
        for (p, proofs), group in zip(items, answers, strict=True):
            labels, reasons = None, []
            for answer in group:
                try:
                    labels = parse_clusters(answer, len(proofs))
                    break
                except JudgeParseError as exc:
                    reasons.append(str(exc))
            if labels is None:
                self._fail("clusters", p, "; ".join(dict.fromkeys(reasons)), str(group[0]))
                out.append(None)
            else:
                out.append(cluster_entropy(labels))
        return out
