import numpy as np
import pytest
from pcbinnobench import PcbinnobenchError, median_of_means, sample_mean
from pcbinnobench.estimators import contaminated_sample


def test_median_of_means_is_the_median_of_block_means():
    x = [1.0, 3.0, 10.0, 20.0, 100.0, 300.0]  # block means 2, 15, 200
    assert median_of_means(x, blocks=3) == 15.0
    assert sample_mean(x) == pytest.approx(434.0 / 6)


def test_median_of_means_ignores_a_few_gross_outliers():
    rng = np.random.default_rng(0)
    x = contaminated_sample(rng, 400, fraction=0.05, outlier=1000.0)
    assert abs(median_of_means(x, blocks=50)) < 1.0
    assert abs(sample_mean(x)) > 10.0


@pytest.mark.parametrize("blocks", [0, 7])
def test_rejects_impossible_block_count(blocks):
    with pytest.raises(PcbinnobenchError, match="blocks"):
        median_of_means([1.0] * 6, blocks=blocks)


def test_rejects_non_finite_samples():
    with pytest.raises(PcbinnobenchError, match="NaN"):
        sample_mean([1.0, float("nan")])
