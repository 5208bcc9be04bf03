import math

import numpy as np
import pytest
from mosa_rl import MosaError, pass_at_k
from mosa_rl.evaluation import distinct_correct


def brute(n, c, k):
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize("k", [1, 2, 4, 8, 16])
def test_pass_at_k_matches_the_combinatorial_formula(k):
    c = np.arange(0, 17)
    got = pass_at_k(16, c, k)
    want = [brute(16, int(ci), k) for ci in c]
    assert np.allclose(got, want, atol=1e-12)


def test_pass_at_1_is_the_fraction_correct():
    assert np.allclose(pass_at_k(10, [0, 3, 10], 1), [0.0, 0.3, 1.0])


def test_pass_at_k_rejects_k_above_n():
    with pytest.raises(MosaError, match="k=17"):
        pass_at_k(16, [1], 17)


def test_distinct_correct_counts_unique_correct_answers():
    correct = np.array([[True, True, False, True], [False, False, False, False]])
    answers = [["(7*4)+2", "(7*4)+2", "x", "2+(7*4)"], ["a", "b", "c", "d"]]
    assert distinct_correct(correct, answers).tolist() == [2.0, 0.0]
