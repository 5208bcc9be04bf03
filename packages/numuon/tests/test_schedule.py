import math

import pytest
from numuon import Constant, Cosine, NumuonError, Piecewise, rank_for


def test_cosine_goes_from_start_to_end_and_stays():
    s = Cosine(1.0, 0.25, 100)
    assert s(0) == 1.0
    assert s(50) == pytest.approx(0.625)
    assert s(100) == pytest.approx(0.25)
    assert s(1000) == pytest.approx(0.25)


def test_piecewise_switches_at_boundaries():
    s = Piecewise((10, 20), (1.0, 0.5, 0.125))
    assert [s(0), s(9), s(10), s(19), s(20), s(99)] == [1.0, 1.0, 0.5, 0.5, 0.125, 0.125]


def test_rank_is_the_ceiling_of_ratio_times_the_short_side():
    assert rank_for(0.25, (128, 384)) == 32
    assert rank_for(0.3, (10, 20)) == 3
    assert rank_for(1e-6, (64, 64)) == 1
    assert rank_for(1.0, (64, 48)) == 48
    assert rank_for(1 / 3, (96, 96)) == math.ceil(96 / 3)


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan")])
def test_ratios_outside_zero_one_are_refused(bad):
    with pytest.raises(NumuonError, match="outside"):
        Constant(bad)
    with pytest.raises(NumuonError, match=r"Cosine\.end"):
        Cosine(1.0, bad, 10)


def test_piecewise_needs_matching_lengths_and_increasing_boundaries():
    with pytest.raises(NumuonError, match="boundaries"):
        Piecewise((10,), (1.0,))
    with pytest.raises(NumuonError, match="increase"):
        Piecewise((10, 5), (1.0, 0.5, 0.25))
