"""The transition ledger: from per-(debate, agent, round) rows to majorities and transitions.

For debate d with A agents and rounds r = 0..R, the round-r majority is the plurality of the
parsed answers,

    m_r = argmax_o #{a : answer[d, a, r] = o}        (parse failures do not vote)

with the tie rule: **a tie for the most votes (or no parsed answer at all) is no majority**, and
no majority counts as incorrect. We pick this rule over "first letter wins" or "random" because it
is deterministic, has no option-position bias, and never credits a debate with a correct answer it
did not commit to; the audits report the tie rate so its effect is visible. Then

    c_r = 1[m_r = gold]
    collapse    = c_0 = 1 and c_R = 0       (debate destroyed a right initial majority)
    correction  = c_0 = 0 and c_R = 1       (debate rescued a wrong one)
    onset       = min{r >= 1 : c_r != c_0}  (-1 when c never changes)
    first flip  = the earliest (round, then lowest agent index) at or before the onset where an
                  agent's answer differs from its previous-round answer.

Everything is computed on dense arrays (debates x agents x rounds), so 100k debates take well
under a second; :func:`reference_transitions` is a plain-Python loop kept as the oracle the tests
and the benchmark compare against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from debate_ledger.schemas import LETTERS, LedgerError, LedgerRow

__all__ = [
    "DebateArrays",
    "Transitions",
    "from_rows",
    "majorities",
    "majority_vote",
    "reference_transitions",
    "transitions",
]


@dataclass(frozen=True)
class DebateArrays:
    """A ledger as arrays. ``answers[d, a, r]`` is a canonical option index or -1 (parse
    failure), ``shown[d, a, r]`` the index of the letter as the agents saw it; ``resamples``
    and ``resamples_shown`` (D, A, S) the round-0 resamples (S = 0 when the run drew none).
    Debates are sorted by id, so the arrays do not depend on row order. Models and families
    are separate axes: ``model[d]`` indexes ``models``, ``family[d]`` indexes ``families``, and
    ``model_family[m]`` is the family of model ``m``. ``cost`` holds per-model call counts and
    token sums over every row (debate calls and resamples)."""

    debate_ids: np.ndarray  # (D,) str
    question_ids: np.ndarray  # (D,) str
    model: np.ndarray  # (D,) int index into models
    models: tuple[str, ...]
    model_family: tuple[str, ...]  # per model
    family: np.ndarray  # (D,) int index into families
    families: tuple[str, ...]
    gold: np.ndarray  # (D,) int, canonical
    gold_shown: np.ndarray  # (D,) int, where the gold option was shown
    n_options: np.ndarray  # (D,) int
    answers: np.ndarray  # (D, A, R+1) int8, canonical
    shown: np.ndarray  # (D, A, R+1) int8, as shown
    resamples: np.ndarray  # (D, A, S) int8, canonical
    resamples_shown: np.ndarray  # (D, A, S) int8
    tokens_in: np.ndarray  # (D, A, R+1) int64
    tokens_out: np.ndarray  # (D, A, R+1) int64
    resample_tokens_in: np.ndarray  # (D, A, S) int64
    resample_tokens_out: np.ndarray  # (D, A, S) int64
    cost: dict[str, dict[str, Any]]  # per model
    tokens_estimated: bool

    @property
    def n_debates(self) -> int:
        return int(self.answers.shape[0])

    @property
    def n_agents(self) -> int:
        return int(self.answers.shape[1])

    @property
    def n_rounds(self) -> int:
        """R: rounds after round 0."""
        return int(self.answers.shape[2]) - 1

    @property
    def n_resamples(self) -> int:
        return int(self.resamples.shape[2])


def _index(letter: str | None) -> int:
    return LETTERS.index(letter) if letter is not None else -1


def from_rows(rows: Sequence[LedgerRow], *, source: str = "ledger") -> DebateArrays:
    """Dense arrays from validated rows. Refused, with the debate or model named: a debate
    missing an (agent, round); debates of different shapes (agents, rounds, resamples) in one
    ledger; one model in two families; one population under two run configurations; rows of
    one debate that disagree on its question, gold, options or option order."""
    if not rows:
        raise LedgerError(f"{source}: no rows")
    first: dict[str, LedgerRow] = {}
    runs: dict[tuple[str, str], str] = {}
    family_of: dict[str, str] = {}
    for r in rows:
        f = first.setdefault(r.debate_id, r)
        for name in ("question_id", "family", "model", "gold", "n_options", "order", "run"):
            if getattr(r, name) != getattr(f, name):
                raise LedgerError(
                    f"{source}: debate {r.debate_id}: rows disagree on {name} "
                    f"({getattr(f, name)!r} vs {getattr(r, name)!r})"
                )
        if family_of.setdefault(r.model, r.family) != r.family:
            raise LedgerError(
                f"{source}: model {r.model!r} appears in families {family_of[r.model]!r} and "
                f"{r.family!r} (a model belongs to one family)"
            )
        if runs.setdefault(r.population, r.run) != r.run:
            raise LedgerError(
                f"{source}: family {r.family} model {r.model} mixes run configurations "
                f"{runs[r.population]} and {r.run} (rows of two different runs; split the ledger)"
            )
    debate_ids = sorted(first)
    d_index = {d: i for i, d in enumerate(debate_ids)}
    main = [r for r in rows if r.sample == 0]
    extra = [r for r in rows if r.sample > 0]
    shapes: dict[str, list[int]] = {d: [0, 0, 0] for d in debate_ids}
    for r in main:
        sh = shapes[r.debate_id]
        sh[0], sh[1] = max(sh[0], r.agent + 1), max(sh[1], r.round)
    for r in extra:
        sh = shapes[r.debate_id]
        sh[2] = max(sh[2], r.sample)
    distinct = sorted({tuple(v) for v in shapes.values()})
    if len(distinct) > 1:
        examples = []
        for shape in distinct[:2]:
            example = next(k for k, v in shapes.items() if tuple(v) == shape)
            examples.append(
                f"{shape[0]} agents x rounds 0..{shape[1]} + {shape[2]} resamples ({example})"
            )
        raise LedgerError(
            f"{source}: mixed debate shapes in one ledger: "
            + " vs ".join(examples)
            + "; a ledger holds debates of one shape (run other shapes into another ledger)"
        )
    agents, rounds, n_samples = distinct[0]
    D = len(debate_ids)
    di = np.fromiter((d_index[r.debate_id] for r in main), np.int64, len(main))
    ai = np.fromiter((r.agent for r in main), np.int64, len(main))
    ri = np.fromiter((r.round for r in main), np.int64, len(main))
    filled = np.zeros((D, agents, rounds + 1), dtype=bool)
    filled[di, ai, ri] = True
    if not filled.all():
        hole, a, rr = (int(x[0]) for x in np.nonzero(~filled))
        raise LedgerError(
            f"{source}: debate {debate_ids[hole]} has no row for agent {a} round {rr} (missing "
            f"round; every debate needs {agents} agents x rounds 0..{rounds})"
        )

    def grid(selected: list[LedgerRow], depth: int, value: Any, dtype: Any, fill: Any) -> Any:
        out = np.full((D, agents, depth), fill, dtype=dtype)
        if selected:
            idx = (
                [d_index[r.debate_id] for r in selected],
                [r.agent for r in selected],
                [r.round if r.sample == 0 else r.sample - 1 for r in selected],
            )
            out[idx] = [value(r) for r in selected]
        return out

    if extra:
        sfilled = grid(extra, n_samples, lambda r: True, bool, False)
        if not sfilled.all():
            hole, a, s = (int(x[0]) for x in np.nonzero(~sfilled))
            raise LedgerError(
                f"{source}: debate {debate_ids[hole]} has no resample {s + 1} for agent {a}"
            )
    ordered = [first[d] for d in debate_ids]
    families = tuple(sorted({r.family for r in ordered}))
    models = tuple(sorted({r.model for r in ordered}))
    cost: dict[str, dict[str, Any]] = {
        m: {"calls": 0, "resample_calls": 0, "tokens_in": 0, "tokens_out": 0,
            "resample_tokens_in": 0, "resample_tokens_out": 0, "latency_s": 0.0,
            "finish_reasons": {}, "tokens_source": set()}
        for m in models
    }  # fmt: skip
    for r in rows:
        c = cost[r.model]
        c["calls"] += 1
        c["tokens_in"] += r.tokens_in
        c["tokens_out"] += r.tokens_out
        c["latency_s"] += r.latency_s
        if r.sample:
            c["resample_calls"] += 1
            c["resample_tokens_in"] += r.tokens_in
            c["resample_tokens_out"] += r.tokens_out
        reason = r.finish_reason or "unknown"
        c["finish_reasons"][reason] = c["finish_reasons"].get(reason, 0) + 1
        c["tokens_source"].add(r.tokens_source)
    for c in cost.values():
        c["tokens_source"] = ",".join(sorted(c["tokens_source"]))
        c["finish_reasons"] = dict(sorted(c["finish_reasons"].items()))
    return DebateArrays(
        debate_ids=np.array(debate_ids),
        question_ids=np.array([r.question_id for r in ordered]),
        model=np.array([models.index(r.model) for r in ordered], dtype=np.int64),
        models=models,
        model_family=tuple(family_of[m] for m in models),
        family=np.array([families.index(r.family) for r in ordered], dtype=np.int64),
        families=families,
        gold=np.array([LETTERS.index(r.gold) for r in ordered], dtype=np.int64),
        gold_shown=np.array([r.order.index(r.gold) for r in ordered], dtype=np.int64),
        n_options=np.array([r.n_options for r in ordered], dtype=np.int64),
        answers=grid(main, rounds + 1, lambda r: _index(r.answer), np.int8, -1),
        shown=grid(main, rounds + 1, lambda r: _index(r.shown), np.int8, -1),
        resamples=grid(extra, n_samples, lambda r: _index(r.answer), np.int8, -1),
        resamples_shown=grid(extra, n_samples, lambda r: _index(r.shown), np.int8, -1),
        tokens_in=grid(main, rounds + 1, lambda r: r.tokens_in, np.int64, 0),
        tokens_out=grid(main, rounds + 1, lambda r: r.tokens_out, np.int64, 0),
        resample_tokens_in=grid(extra, n_samples, lambda r: r.tokens_in, np.int64, 0),
        resample_tokens_out=grid(extra, n_samples, lambda r: r.tokens_out, np.int64, 0),
        cost=cost,
        tokens_estimated=any(r.tokens_source == "words" for r in rows),
    )


def vote_counts(answers: np.ndarray, n_options: int = len(LETTERS)) -> np.ndarray:
    """counts[d, r, o] = agents answering option o in round r (parse failures do not vote)."""
    a = answers.astype(np.int64)
    return (a[..., None] == np.arange(n_options)).sum(axis=1)


def majorities(answers: np.ndarray, n_options: int = len(LETTERS)) -> tuple[np.ndarray, np.ndarray]:
    """(m, tie): m[d, r] the plurality option or -1 (tie or no parsed vote), tie[d, r] true
    when two or more options share the most votes."""
    counts = vote_counts(answers, n_options)
    top = counts.max(axis=2)
    n_top = (counts == top[..., None]).sum(axis=2)
    tie = (n_top > 1) & (top > 0)
    m = np.where((n_top == 1) & (top > 0), counts.argmax(axis=2), -1)
    return m, tie


def majority_vote(arr: DebateArrays) -> tuple[np.ndarray, np.ndarray, int]:
    """The majority-vote baseline: the plurality of all independent round-0 answers of each
    debate (its A agents' answers and their A x S resamples), with the debate's tie rule.
    Returns (majority, correct, calls per debate). With S = R it makes exactly as many calls as
    the debate (A x (R + 1)): the compute-matched comparison of debate-or-vote."""
    votes = np.concatenate([arr.answers[:, :, :1], arr.resamples], axis=2)
    flat = votes.reshape(votes.shape[0], -1, 1)
    m, _ = majorities(flat, max(int(flat.max(initial=0)) + 1, 2))
    return m[:, 0], m[:, 0] == arr.gold, int(flat.shape[1])


@dataclass(frozen=True)
class Transitions:
    majority: np.ndarray  # (D, R+1) option or -1
    tie: np.ndarray  # (D, R+1) bool
    correct: np.ndarray  # (D, R+1) bool: c_r
    collapse: np.ndarray  # (D,) bool
    correction: np.ndarray  # (D,) bool
    onset: np.ndarray  # (D,) int, -1 if c never changes
    flip_round: np.ndarray  # (D,) int, -1 if no flip at or before the onset
    flip_agent: np.ndarray  # (D,) int


def transitions(answers: np.ndarray, gold: np.ndarray) -> Transitions:
    """Vectorised transition analysis of ``answers`` (D, A, R+1) against ``gold`` (D,)."""
    m, tie = majorities(answers, max(int(answers.max(initial=0)) + 1, 2))
    c = m == gold[:, None]
    collapse = c[:, 0] & ~c[:, -1]
    correction = ~c[:, 0] & c[:, -1]
    changed = c[:, 1:] != c[:, :1]  # (D, R)
    has_onset = changed.any(axis=1)
    onset = np.where(has_onset, changed.argmax(axis=1) + 1, -1)
    # agent flips: flips[d, a, r-1] for r >= 1
    flips = answers[:, :, 1:] != answers[:, :, :-1]
    rounds = np.arange(1, answers.shape[2])
    allowed = rounds[None, :] <= np.where(has_onset, onset, answers.shape[2] - 1)[:, None]
    flips &= allowed[:, None, :]
    by_round = flips.any(axis=1)  # (D, R)
    any_flip = by_round.any(axis=1) & has_onset
    fr = by_round.argmax(axis=1)  # index of first round with a flip
    fa = flips[np.arange(len(fr)), :, fr].argmax(axis=1)
    return Transitions(
        majority=m,
        tie=tie,
        correct=c,
        collapse=collapse,
        correction=correction,
        onset=onset,
        flip_round=np.where(any_flip, fr + 1, -1),
        flip_agent=np.where(any_flip, fa, -1),
    )


def reference_transitions(answers: np.ndarray, gold: np.ndarray) -> dict[str, np.ndarray]:
    """The same analysis, one debate at a time in plain Python (the oracle; slow)."""
    D, A, R1 = answers.shape
    out: dict[str, list[int]] = {
        k: [] for k in ("collapse", "correction", "onset", "flip_round", "flip_agent")
    }
    for d in range(D):
        cs = []
        for r in range(R1):
            votes: dict[int, int] = {}
            for a in range(A):
                x = int(answers[d, a, r])
                if x >= 0:
                    votes[x] = votes.get(x, 0) + 1
            if not votes:
                cs.append(False)
                continue
            best = max(votes.values())
            winners = [o for o, v in votes.items() if v == best]
            cs.append(len(winners) == 1 and winners[0] == int(gold[d]))
        out["collapse"].append(int(cs[0] and not cs[-1]))
        out["correction"].append(int(not cs[0] and cs[-1]))
        onset = next((r for r in range(1, R1) if cs[r] != cs[0]), -1)
        out["onset"].append(onset)
        fr, fa = -1, -1
        if onset > 0:
            for r in range(1, onset + 1):
                hit = [a for a in range(A) if answers[d, a, r] != answers[d, a, r - 1]]
                if hit:
                    fr, fa = r, hit[0]
                    break
        out["flip_round"].append(fr)
        out["flip_agent"].append(fa)
    return {k: np.array(v) for k, v in out.items()}
