import pytest
import torch
from saga_attention import SagaError
from saga_attention.selection import AtopConfig, atop_n, exact_top_n, selection_recall


def _as_sets(idx, ok):
    return [
        set(i[o].tolist())
        for i, o in zip(idx.reshape(-1, idx.shape[-1]), ok.reshape(-1, ok.shape[-1]), strict=True)
    ]


def test_exact_top_n_is_torch_topk_ignoring_masked_positions():
    s = torch.randn(3, 50)
    valid = torch.ones(3, 50, dtype=torch.bool)
    valid[:, :10] = False
    idx, ok = exact_top_n(s, 5, valid)
    ref = s.masked_fill(~valid, float("-inf")).topk(5).indices
    assert _as_sets(idx, ok) == [set(r.tolist()) for r in ref]
    assert (idx >= 10).all()


def test_atop_n_recall_at_long_context_is_at_least_095():
    s = torch.randn(32, 8192)
    recall = selection_recall(*atop_n(s, 64), *exact_top_n(s, 64))
    assert recall.mean() >= 0.95


def test_atop_n_is_exact_when_the_whole_row_fits_the_buffer():
    s = torch.randn(4, 100)
    cfg = AtopConfig(cap_factor=4.0)  # cap = 128 > 100: no threshold needed
    assert _as_sets(*atop_n(s, 32, config=cfg)) == _as_sets(*exact_top_n(s, 32))


def test_atop_n_never_selects_masked_tokens():
    s = torch.randn(8, 1000)
    valid = torch.rand(8, 1000) > 0.5
    idx, ok = atop_n(s, 16, valid)
    assert valid.gather(-1, idx)[ok].all()


def test_rows_with_fewer_valid_tokens_than_n_select_them_all():
    s = torch.randn(1, 40)
    valid = torch.zeros(1, 40, dtype=torch.bool)
    valid[0, :3] = True
    idx, ok = atop_n(s, 8, valid)
    assert int(ok.sum()) == 3
    assert set(idx[ok].tolist()) == {0, 1, 2}


def test_rejects_n_larger_than_the_context():
    with pytest.raises(SagaError, match="top_n: 65 is larger than the context length 64"):
        atop_n(torch.randn(2, 64), 65)
    with pytest.raises(SagaError, match="larger than the context"):
        exact_top_n(torch.randn(2, 64), 65)


def test_rejects_mismatched_mask():
    with pytest.raises(SagaError, match="valid mask"):
        atop_n(torch.randn(2, 64), 8, torch.ones(3, 64, dtype=torch.bool))


def test_recall_counts_the_overlap():
    idx = torch.tensor([[0, 1, 2, 3]])
    ok = torch.tensor([[True, True, True, False]])
    ref = torch.tensor([[3, 2, 1, 0]])
    assert selection_recall(idx, ok, ref, torch.ones_like(ok)).item() == pytest.approx(0.75)


def test_nonzero_and_scatter_compaction_select_the_same_tokens():
    """The CPU path (nonzero) and the sync-free path (prefix sum + scatter) agree, with and
    without a mask, including rows whose survivors overflow the buffer."""
    s = torch.randn(4, 2, 3000)
    s[0, 0, -400:] += 3.0  # many large recent scores: more survivors than cap
    valid = torch.rand(4, 2, 3000) > 0.3
    for mask in (None, valid):
        a = atop_n(s, 32, mask, compaction="nonzero")
        b = atop_n(s, 32, mask, compaction="scatter")
        assert _as_sets(*a) == _as_sets(*b)


def test_atop_n_with_a_static_sample_size_matches_the_cpu_path(monkeypatch):
    """Off the CPU the sampled top-k takes ceil(oversample * N) scores instead of reading the
    largest k needed from the device; the threshold, and so the selection, is the same."""
    from saga_attention import selection

    s = torch.randn(3, 5000)
    valid = torch.ones(3, 5000, dtype=torch.bool)
    valid[1, :3000] = False
    ref = atop_n(s, 16, valid)
    monkeypatch.setattr(selection, "_host_sync_is_free", lambda t: False)
    assert _as_sets(*atop_n(s, 16, valid)) == _as_sets(*ref)


def test_rejects_an_unknown_compaction():
    with pytest.raises(SagaError, match="compaction"):
        atop_n(torch.randn(2, 64), 8, compaction="sort")
