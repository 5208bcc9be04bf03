"""The starter method: the median-of-means estimator against the sample mean.

A scaffolded package replaces this module with its own idea (one module per idea, named for it).
It is a real, tiny method so that the demo, the claims and the tests work from the first commit.

Median of means (Nemirovsky and Yudin, 1983): split the ``n`` samples into ``k`` blocks of
equal size, average each block, and return the median of the ``k`` block means,

    MoM_k(x) = median(mean(B_1), ..., mean(B_k)).

A fraction of gross outliers smaller than about 1/(2b) (``b`` = block size) leaves most blocks
clean, so the median ignores them, while the sample mean moves with every outlier.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from paperstack.errors import PaperstackError


class PcbinnobenchError(PaperstackError):
    """Bad input to pcbinnobench; the message names the value at fault."""


def _as_samples(x: ArrayLike) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64).ravel()
    if arr.size == 0:
        raise PcbinnobenchError("samples: got an empty array")
    if not np.all(np.isfinite(arr)):
        raise PcbinnobenchError("samples: contain NaN or infinity")
    return arr


def sample_mean(x: ArrayLike) -> float:
    """The baseline: the arithmetic mean of the samples."""
    return float(_as_samples(x).mean())


def median_of_means(x: ArrayLike, blocks: int = 25) -> float:
    """``MoM_k(x)`` with ``k = blocks``: the median of the means of ``k`` equal blocks.

    Samples beyond the last full block are dropped (at most ``k - 1`` of them), so every block
    mean has the same variance.
    """
    arr = _as_samples(x)
    if not 1 <= blocks <= arr.size:
        raise PcbinnobenchError(f"blocks: must be between 1 and {arr.size} samples, got {blocks}")
    size = arr.size // blocks
    means = arr[: size * blocks].reshape(blocks, size).mean(axis=1)
    return float(np.median(means))


def contaminated_sample(
    rng: np.random.Generator, n: int, fraction: float, outlier: float = 20.0
) -> np.ndarray:
    """``n`` draws of N(0, 1) in which a ``fraction`` is replaced by N(outlier, 1), shuffled."""
    x = rng.standard_normal(n)
    bad = rng.random(n) < fraction
    x[bad] += outlier
    return x
