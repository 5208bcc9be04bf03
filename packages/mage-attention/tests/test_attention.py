import pytest
import torch
from mage_attention import MageError
from mage_attention.attention import (
    Budget,
    block_attention,
    gather_rows,
    mass_recall,
    select_top_k,
    top_k_overlap,
)


def _naive(q, k, v, scaling):
    """Every query head over its KV head's keys, the cache expanded (the textbook form)."""
    g = q.shape[1] // k.shape[1]
    ke, ve = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    p = torch.softmax(q @ ke.transpose(-1, -2) * scaling, -1)
    return p @ ve, p


def test_block_attention_equals_attention_over_prefix_and_block():
    q = torch.randn(2, 8, 4, 16)
    kp, vp = torch.randn(2, 2, 30, 16), torch.randn(2, 2, 30, 16)
    kb, vb = torch.randn(2, 2, 4, 16), torch.randn(2, 2, 4, 16)
    out, mass = block_attention(q, kp, vp, kb, vb, 0.25, with_mass=True)
    ref, p = _naive(q, torch.cat([kp, kb], 2), torch.cat([vp, vb], 2), 0.25)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    # a_j: prefix mass summed over the 4 block queries and the 4 query heads of each KV head
    ref_mass = p[..., :30].reshape(2, 2, 4, 4, 30).sum((2, 3))
    torch.testing.assert_close(mass, ref_mass, atol=1e-5, rtol=1e-5)


def test_select_top_k_keeps_sinks_window_and_the_best_of_the_rest():
    scores = torch.zeros(1, 1, 40)
    scores[0, 0, [10, 20, 25]] = torch.tensor([3.0, 2.0, 1.0])
    scores[0, 0, 0] = -5.0  # a sink is kept whatever its score
    idx = select_top_k(scores, Budget(k=8, sinks=2, window=4))
    assert idx[0, 0].tolist() == [0, 1, 10, 20, 36, 37, 38, 39]


def test_mass_recall_and_overlap():
    mass = torch.tensor([[[0.5, 0.25, 0.125, 0.125]]])
    assert mass_recall(mass, torch.tensor([[[0, 2]]])).item() == pytest.approx(0.625)
    a, b = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[4, 3, 9, 8]])
    assert top_k_overlap(a, b).item() == 0.5


def test_gather_rows_picks_positions_per_head():
    cache = torch.arange(2 * 3 * 5.0).view(1, 2, 5, 3)
    out = gather_rows(cache, torch.tensor([[[4, 0], [1, 1]]]))
    assert out[0, 0].tolist() == [cache[0, 0, 4].tolist(), cache[0, 0, 0].tolist()]
    assert out[0, 1].tolist() == [cache[0, 1, 1].tolist()] * 2


def test_k_larger_than_the_prefix_is_one_clear_error():
    with pytest.raises(MageError, match=r"k=64 is larger than the prefix \(40 tokens\)"):
        select_top_k(torch.zeros(1, 1, 40), Budget(k=64))


def test_budget_smaller_than_sinks_and_window_is_refused():
    with pytest.raises(MageError, match="smaller than sinks"):
        Budget(k=10, sinks=4, window=16)
