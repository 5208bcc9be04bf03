import numpy as np
from debate_ledger.families import Family, simulate
from debate_ledger.ledger import majorities, reference_transitions, transitions


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
    fam = Family("x", accuracy=0.5, conformity=0.5, parse_fail=0.1)
    answers = simulate(fam, 3000, 4, 3, 5, rng)
    gold = np.zeros(3000, dtype=np.int64)
    tr = transitions(answers, gold)
    ref = reference_transitions(answers, gold)
    for key in ("collapse", "correction", "onset", "flip_round", "flip_agent"):
        assert np.array_equal(np.asarray(getattr(tr, key)).astype(int), ref[key]), key


def test_simulator_limits(rng):
    never = simulate(Family("n", accuracy=1.0, conformity=0.0), 200, 3, 2, 4, rng)
    assert (never == 0).all()
    herd = simulate(Family("h", accuracy=0.5, conformity=1.0), 500, 3, 2, 4, rng)
    # with full conformity and no parse failures, round 2 agrees with round 1's plurality
    tr = transitions(herd, np.zeros(500, dtype=np.int64))
    decided = tr.majority[:, 1] >= 0
    assert (herd[decided, :, 2] == tr.majority[decided, 1][:, None]).all()
