import math

import numpy as np
import pytest
from corrective_context import CorrectiveContextError
from corrective_context.baselines import (
    BASELINES,
    all_items,
    bm25_scores,
    dpp_greedy,
    embed_texts,
    top_k,
    word_tokens,
)

RNG = np.random.default_rng(0)


def test_top_k_ranks_by_cosine():
    q = np.array([1.0, 0.0])
    keys = np.array([[0.0, 1.0], [2.0, 0.1], [1.0, 1.0], [-1.0, 0.0]])
    assert top_k(q, keys, 2, RNG) == [1, 2]
    assert all_items(q, keys, 2, RNG) == [0, 1, 2, 3]


def test_bm25_is_the_okapi_formula():
    docs = [["a", "b", "b"], ["c"], ["a", "c", "d", "e"]]
    scores = bm25_scores(["b"], docs)
    n, df, tf, dl, avgdl = 3, 1, 2, 3, 8 / 3
    idf = math.log((n - df + 0.5) / (df + 0.5) + 1)
    expected = idf * tf * 2.5 / (tf + 1.5 * (1 - 0.75 + 0.75 * dl / avgdl))
    assert scores[0] == pytest.approx(expected)
    assert scores[1] == scores[2] == 0.0
    assert word_tokens("Paris, the Capital!") == ["paris", "the", "capital"]


def test_dpp_prefers_diverse_items_to_duplicates():
    q = np.array([1.0, 0.2, 0.0])
    keys = np.array([[1.0, 0.2, 0.0], [1.0, 0.21, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    picked = dpp_greedy(q, keys, 2, RNG)
    assert picked[0] in (0, 1)
    assert set(picked) != {0, 1}  # the near-duplicate adds almost nothing to the determinant


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_every_baseline_refuses_an_empty_pool(name):
    with pytest.raises(CorrectiveContextError, match="candidate pool is empty"):
        BASELINES[name](np.zeros(3), np.zeros((0, 3)), 2, RNG)


def test_minilm_keys_put_the_paraphrase_first():
    texts = ["The capital of France is Paris.", "Bananas are rich in potassium.",
             "Gradient descent minimises a loss."]  # fmt: skip
    keys = embed_texts(texts)
    query = embed_texts(["Which city is the capital of France?"])[0]
    assert keys.shape == (3, 384)
    assert top_k(query, keys, 1, RNG) == [0]
