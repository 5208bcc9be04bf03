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

import numpy as np

from debate_ledger.schemas import LETTERS, LedgerError, LedgerRow

__all__ = [
    "DebateArrays",
    "Transitions",
    "from_rows",
    "majorities",
    "reference_transitions",
    "transitions",
]


@dataclass(frozen=True)
class DebateArrays:
    """A ledger as arrays. ``answers[d, a, r]`` is an option index or -1 (parse failure);
    ``resamples[d, a, s]`` the round-0 resample answers (-1 = failure; shape (D, A, 0) when
    the run drew none). Debates are sorted by id, so the arrays do not depend on row order."""

    debate_ids: np.ndarray  # (D,) str
    question_ids: np.ndarray  # (D,) str
    family: np.ndarray  # (D,) int index into families
    families: tuple[str, ...]
    models: tuple[str, ...]  # per family
    gold: np.ndarray  # (D,) int
    n_options: np.ndarray  # (D,) int
    answers: np.ndarray  # (D, A, R+1) int8
    resamples: np.ndarray  # (D, A, S) int8
    tokens_in: np.ndarray  # (D, A, R+1) int64
    tokens_out: np.ndarray  # (D, A, R+1) int64
    latency: np.ndarray  # (D, A, R+1) float64
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


def from_rows(rows: Sequence[LedgerRow], *, source: str = "ledger") -> DebateArrays:
    """Dense arrays from validated rows; a missing (agent, round) or inconsistent debate is an
    error naming the debate. All debates must share the number of agents and rounds."""
    if not rows:
        raise LedgerError(f"{source}: no rows")
    debate_ids = sorted({r.debate_id for r in rows})
    d_index = {d: i for i, d in enumerate(debate_ids)}
    main = [r for r in rows if r.sample == 0]
    agents = 1 + max(r.agent for r in main)
    rounds = max(r.round for r in main)
    n_samples = max((r.sample for r in rows), default=0)
    D = len(debate_ids)
    di = np.fromiter((d_index[r.debate_id] for r in main), np.int64, len(main))
    ai = np.fromiter((r.agent for r in main), np.int64, len(main))
    ri = np.fromiter((r.round for r in main), np.int64, len(main))
    filled = np.zeros((D, agents, rounds + 1), dtype=bool)
    filled[di, ai, ri] = True
    if not filled.all():
        d, a, rr = (int(x[0]) for x in np.nonzero(~filled))
        raise LedgerError(
            f"{source}: debate {debate_ids[d]} has no row for agent {a} round {rr} (missing "
            f"round; every debate needs {agents} agents x rounds 0..{rounds})"
        )
    ans = np.fromiter(
        (LETTERS.index(r.answer) if r.answer is not None else -1 for r in main), np.int64, len(main)
    )
    answers = np.full((D, agents, rounds + 1), -1, dtype=np.int8)
    answers[di, ai, ri] = ans
    tokens_in = np.zeros((D, agents, rounds + 1), dtype=np.int64)
    tokens_out = np.zeros_like(tokens_in)
    latency = np.zeros((D, agents, rounds + 1), dtype=np.float64)
    tokens_in[di, ai, ri] = [r.tokens_in for r in main]
    tokens_out[di, ai, ri] = [r.tokens_out for r in main]
    latency[di, ai, ri] = [r.latency_s for r in main]

    # per-debate constants must agree across the debate's rows
    first: dict[str, LedgerRow] = {}
    for r in rows:
        f = first.setdefault(r.debate_id, r)
        for field in ("question_id", "family", "model", "gold", "n_options"):
            if getattr(r, field) != getattr(f, field):
                raise LedgerError(
                    f"{source}: debate {r.debate_id}: rows disagree on {field} "
                    f"({getattr(f, field)!r} vs {getattr(r, field)!r})"
                )
    families = tuple(sorted({r.family for r in first.values()}))
    f_index = {f: i for i, f in enumerate(families)}
    model_of: dict[str, str] = {}
    for r in first.values():
        if model_of.setdefault(r.family, r.model) != r.model:
            raise LedgerError(
                f"{source}: family {r.family} mixes models {model_of[r.family]!r} and "
                f"{r.model!r} (a debate family is homogeneous)"
            )
    ordered = [first[d] for d in debate_ids]
    resamples = np.full((D, agents, n_samples), -1, dtype=np.int8)
    extra = [r for r in rows if r.sample > 0]
    if extra:
        resamples[
            [d_index[r.debate_id] for r in extra],
            [r.agent for r in extra],
            [r.sample - 1 for r in extra],
        ] = [LETTERS.index(r.answer) if r.answer is not None else -1 for r in extra]
    return DebateArrays(
        debate_ids=np.array(debate_ids),
        question_ids=np.array([r.question_id for r in ordered]),
        family=np.array([f_index[r.family] for r in ordered], dtype=np.int64),
        families=families,
        models=tuple(model_of[f] for f in families),
        gold=np.array([LETTERS.index(r.gold) for r in ordered], dtype=np.int64),
        n_options=np.array([r.n_options for r in ordered], dtype=np.int64),
        answers=answers,
        resamples=resamples,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        latency=latency,
        tokens_estimated=any(r.tokens_estimated for r in rows),
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
