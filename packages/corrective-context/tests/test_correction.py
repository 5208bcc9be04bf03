import numpy as np
import pytest
from corrective_context import CorrectiveContextError, classify, decompose


def test_error_after_follows_the_decomposition():
    rng = np.random.default_rng(0)
    for _ in range(20):
        base, corrected, y = rng.standard_normal((3, 5))
        c = decompose(base, corrected, y)
        assert c.error_after**2 == pytest.approx(
            ((1 - c.ratio) ** 2 + c.off_axis**2) * c.error_norm**2
        )
        assert c.error_norm == pytest.approx(np.linalg.norm(base - y))


@pytest.mark.parametrize(
    ("scale", "regime"),
    [
        (0.2, "under"),
        (1.0, "proper"),
        (1.4, "proper"),
        (1.6, "over"),
        (3.0, "over"),
        (-1.0, "under"),
    ],
)
def test_magnitude_regimes_along_the_error_axis(scale, regime):
    base, y = np.array([2.0, 0.0]), np.array([0.0, 0.0])  # e = (2, 0)
    corrected = base + scale * (y - base)
    assert classify(base, corrected, y) == regime


def test_an_off_axis_correction_is_over_in_direction():
    base, y = np.array([1.0, 0.0]), np.zeros(2)
    c = decompose(base, np.array([0.0, 0.8]), y)  # rho = 1, omega = 0.8
    assert c.magnitude == "proper"
    assert c.direction == "over"
    assert c.regime == "over"
    away = decompose(base, np.array([1.5, 0.0]), y)
    assert away.direction == "under"
    assert not away.helps


def test_overcorrection_beyond_twice_the_error_raises_it():
    base, y = np.array([1.0]), np.array([0.0])
    c = decompose(base, np.array([-1.5]), y)  # rho = 2.5
    assert c.regime == "over"
    assert c.error_after > c.error_norm


def test_rejects_zero_error_and_mismatched_shapes():
    with pytest.raises(CorrectiveContextError, match="no error to correct"):
        decompose([1.0, 2.0], [0.0, 0.0], [1.0, 2.0])
    with pytest.raises(CorrectiveContextError, match="differ in shape"):
        decompose([1.0, 2.0], [0.0], [1.0, 2.0])
    with pytest.raises(CorrectiveContextError, match="NaN"):
        decompose([np.nan], [0.0], [1.0])
