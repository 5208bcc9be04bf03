import numpy as np
import pytest
from corrective_context import CorrectiveContextError, decompose
from corrective_context.spaces import (
    centred_logits,
    expected_value,
    logit_target,
    probability_vector,
)

K = 5
RNG_PAIRS = 20_000


def _pairs(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    l0 = rng.normal(scale=3.0, size=(RNG_PAIRS, K))
    l1 = l0 + rng.normal(scale=3.0, size=(RNG_PAIRS, K))
    answer = rng.integers(0, K, RNG_PAIRS)
    return l0, l1, answer


def test_probability_space_never_admits_a_ratio_above_one():
    l0, l1, answer = _pairs()
    p0, p1 = probability_vector(l0), probability_vector(l1)
    ratios = [decompose(a, b, np.eye(K)[y]).ratio for a, b, y in zip(p0, p1, answer, strict=False)]
    assert max(ratios) <= 1 + 1e-12  # the docstring's proof, on 20,000 random pairs


def test_logit_space_admits_ratios_above_one_on_random_pairs():
    l0, l1, answer = _pairs()
    y0, y1 = centred_logits(l0), centred_logits(l1)
    ratios = np.array(
        [
            decompose(a, b, logit_target(K, y, 2.0)).ratio
            for a, b, y in zip(y0, y1, answer, strict=False)
        ]
    )
    assert (ratios > 1.5).mean() > 0.01
    assert ratios.max() > 3
    regimes = {decompose(a, b, logit_target(K, y, 2.0)).magnitude
               for a, b, y in zip(y0[:500], y1[:500], answer[:500], strict=False)}  # fmt: skip
    assert regimes == {"under", "proper", "over"}


def test_value_space_admits_ratios_above_one_on_random_pairs():
    l0, l1, answer = _pairs(1)
    interior = (answer > 0) & (answer < K - 1)
    v0, v1 = expected_value(l0), expected_value(l1)
    ratios = np.array([decompose(a, b, [y]).ratio for a, b, y in zip(v0, v1, answer, strict=False)])
    assert (ratios[interior] > 1.5).mean() > 0.05
    # at an extreme answer nothing lies beyond the target: rho <= 1, as in probability space
    assert ratios[~interior].max() <= 1 + 1e-9


@pytest.mark.parametrize(
    ("push", "regime"),
    [(0.3, "under"), (1.0, "proper"), (3.0, "over"), (-1.0, "under")],
)
def test_logit_space_classifies_known_answers(push, regime):
    y_star = logit_target(4, 2, 3.0)
    base = centred_logits([0.0, 1.0, 0.0, 2.0])
    corrected = base - push * (base - y_star)  # rho = push exactly, on the error axis
    c = decompose(base, corrected, y_star)
    assert c.ratio == pytest.approx(push)
    assert c.off_axis == pytest.approx(0.0, abs=1e-12)
    assert c.regime == regime


def test_value_space_classifies_known_answers():
    # labels 0..9, the truth is 5; the model expects 2 without context
    base = [2.0]
    assert decompose(base, [5.0], [5.0]).regime == "proper"
    assert decompose(base, [3.0], [5.0]).regime == "under"  # rho = 1/3
    c = decompose(base, [9.0], [5.0])  # copies a demonstration's 9: overshoots by 4
    assert c.ratio == pytest.approx(7 / 3)
    assert c.regime == "over"
    assert not c.helps
    assert decompose(base, [1.0], [5.0]).regime == "under"  # the wrong way


def test_expected_value_is_the_mean_answer():
    logits = np.log([[0.5, 0.0 + 1e-300, 0.5]])
    assert expected_value(logits)[0, 0] == pytest.approx(1.0)
    assert expected_value([0.0, 0.0], values=[3.0, 5.0])[0] == pytest.approx(4.0)
    with pytest.raises(CorrectiveContextError, match="values"):
        expected_value([0.0, 0.0], values=[1.0])


def test_centred_logits_ignore_a_common_shift_and_bad_targets_are_refused():
    np.testing.assert_allclose(centred_logits([1.0, 2.0, 3.0]), centred_logits([11.0, 12, 13]))
    assert logit_target(3, 0, 3.0)[0] - logit_target(3, 0, 3.0)[1] == pytest.approx(3.0)
    with pytest.raises(CorrectiveContextError, match="margin"):
        logit_target(3, 0, 0.0)
    with pytest.raises(CorrectiveContextError, match="answer"):
        logit_target(3, 3, 1.0)
    with pytest.raises(CorrectiveContextError, match="labels"):
        centred_logits([1.0])
