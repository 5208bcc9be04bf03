from __future__ import annotations

import numpy as np
import pytest
from debate_ledger.families import Profile, simulate
from debate_ledger.ledger import (
    from_rows,
    majorities,
    majority_vote,
    reference_transitions,
    transitions,
)
from debate_ledger.schemas import LedgerError, read_ledger


def test_tie_is_no_majority():
    # 3 agents, 4 options: (A, B, C) is a three-way tie; (A, A, B) has majority A
    answers = np.array([[[0], [1], [2]], [[0], [0], [1]], [[-1], [-1], [-1]]], dtype=np.int8)
    m, tie = majorities(answers)
    assert m[:, 0].tolist() == [-1, 0, -1]
    assert tie[:, 0].tolist() == [True, False, False]


def test_hand_computed_collapse_and_correction():
    gold = np.array([0, 0])
    # debate 0: right majority (A,A,B) -> agent 0 flips in round 1 -> wrong majority: collapse
    # debate 1: wrong (B,B,A) -> round 2 all A: correction with onset 2, first flip agent 0 in r2
    answers = np.array(
        [
            [[0, 1, 1], [0, 1, 1], [1, 1, 1]],
            [[1, 1, 0], [1, 1, 0], [0, 0, 0]],
        ],
        dtype=np.int8,
    )
    tr = transitions(answers, gold)
    assert tr.collapse.tolist() == [True, False]
    assert tr.correction.tolist() == [False, True]
    assert tr.onset.tolist() == [1, 2]
    assert tr.flip_round.tolist() == [1, 2]
    assert tr.flip_agent.tolist() == [0, 0]


def test_vectorised_analysis_equals_the_reference_loop(rng):
    fam = Profile("x", accuracy=0.5, conformity=0.5, parse_fail=0.1, position_bias=0.2)
    answers = simulate(fam, 3000, 4, 3, 5, rng)
    gold = np.zeros(3000, dtype=np.int64)
    tr = transitions(answers, gold)
    ref = reference_transitions(answers, gold)
    for key in ("collapse", "correction", "onset", "flip_round", "flip_agent"):
        assert np.array_equal(np.asarray(getattr(tr, key)).astype(int), ref[key]), key


def test_simulator_limits(rng):
    never = simulate(Profile("n", accuracy=1.0, conformity=0.0), 200, 3, 2, 4, rng)
    assert (never == 0).all()
    herd = simulate(Profile("h", accuracy=0.5, conformity=1.0), 500, 3, 2, 4, rng)
    # with full conformity and no parse failures, round 2 agrees with round 1's plurality
    tr = transitions(herd, np.zeros(500, dtype=np.int64))
    decided = tr.majority[:, 1] >= 0
    assert (herd[decided, :, 2] == tr.majority[decided, 1][:, None]).all()
    # a fully position-biased model answers the debate's first-shown option everywhere
    biased = simulate(Profile("b", accuracy=0.0, conformity=0.0, position_bias=1.0), 400, 3, 1,
                      4, rng)  # fmt: skip
    assert (biased == biased[:, :1, :1]).all()
    assert 0.15 < (biased[:, 0, 0] == 0).mean() < 0.35  # the gold is first a quarter of the time


def test_majority_vote_is_the_plurality_of_all_round0_answers(small_ledger):
    arr = from_rows(read_ledger(small_ledger))
    m, ok, calls = majority_vote(arr)
    assert calls == arr.n_agents * (1 + arr.n_resamples) == 9
    votes = np.concatenate([arr.answers[:, :, 0], arr.resamples.reshape(arr.n_debates, -1)], 1)
    for d in range(arr.n_debates):
        counts = np.bincount(votes[d][votes[d] >= 0], minlength=4)
        top = counts.max() if counts.size else 0
        unique = top > 0 and (counts == top).sum() == 1
        assert m[d] == (int(counts.argmax()) if unique else -1)
    assert (ok == (m == arr.gold)).all()


def test_model_and_family_are_separate_axes(small_ledger):
    arr = from_rows(read_ledger(small_ledger))
    assert arr.models == ("scripted/a", "scripted/b", "scripted/c")
    assert arr.model_family == ("fa", "fb", "fc")
    assert arr.cost["scripted/a"]["calls"] == 40 * 3 * 5  # every row is a call, resamples too
    assert arr.cost["scripted/a"]["resample_calls"] == 40 * 3 * 2


def test_mixed_shapes_are_refused(small_ledger, tmp_path):
    from debate_ledger.families import ScriptedDebater
    from debate_ledger.questions import shipped_mcq
    from debate_ledger.runner import DebateConfig, run_debates

    path = tmp_path / "mixed.jsonl"
    path.write_text(small_ledger.read_text())
    qs = shipped_mcq()[:3]
    four = DebateConfig(agents=4, rounds=2, resamples=2)
    run_debates(ScriptedDebater.for_questions(Profile("d", 0.5, 0.5), qs), qs, path,
                family="fd", config=four)  # fmt: skip
    with pytest.raises(LedgerError, match="mixed debate shapes in one ledger: 3 agents"):
        from_rows(read_ledger(path))
