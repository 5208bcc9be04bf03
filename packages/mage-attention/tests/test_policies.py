import torch
from mage_attention.attention import Budget, block_attention
from mage_attention.baselines import Exact, Quest, RandomK, SparseD, make_policy
from mage_attention.decoding import sparse_step
from mage_attention.mage import Mage


def _cache(length=64, hkv=2, d=8):
    return torch.randn(1, hkv, length, d), torch.randn(1, hkv, length, d)


def test_mage_uses_step_one_exact_top_k_for_every_later_step():
    k, v = _cache()
    kb, vb = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    budget = Budget(k=16, sinks=2, window=4)
    mage = Mage(budget)
    mage.start_block(0)
    q1 = torch.randn(1, 4, 4, 8)
    out, mass, chosen = sparse_step(mage, 0, 0, q1, k, v, kb, vb, 8**-0.5)
    assert chosen is None  # step 1 is exact
    torch.testing.assert_close(out, block_attention(q1, k, v, kb, vb, 8**-0.5)[0])
    assert mass is not None
    first = mage.select(0, 1, q1, k, v)
    assert first is not None
    assert first.idx.shape == (1, 2, 16)
    expected = torch.topk(mass[..., 2:60], 10).indices + 2
    for h in range(2):
        kept = set(first.idx[0, h].tolist())
        assert {0, 1, 60, 61, 62, 63} <= kept
        assert set(expected[0, h].tolist()) <= kept
    for step in (2, 3):  # later steps reuse the same gathered rows, whatever their queries
        again = mage.select(0, step, torch.randn(1, 4, 4, 8), k, v)
        assert again is first
    mage.start_block(1)
    assert mage.select(0, 0, q1, k, v) is None  # a new block starts with an exact pass again


def test_with_the_whole_prefix_as_budget_every_policy_is_exact():
    k, v = _cache(32)
    kb, vb = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    budget = Budget(k=32, sinks=4, window=4)
    for name in ("mage", "quest", "sparsed", "random"):
        policy = make_policy(name, budget)
        policy.start_block(0)
        for step in range(3):
            q = torch.randn(1, 4, 4, 8)
            out = sparse_step(policy, 0, step, q, k, v, kb, vb, 0.3)[0]
            torch.testing.assert_close(out, block_attention(q, k, v, kb, vb, 0.3)[0])


def test_quest_page_bound_is_an_upper_bound_of_every_logit():
    k, _v = _cache(64)
    quest = Quest(Budget(k=16, sinks=0, window=0), page=8)
    kmax, kmin = quest._page_bounds(0, k)
    q = torch.randn(1, 2, 3, 8)  # one query head per KV head
    logits = q @ k.transpose(-1, -2)  # [1, 2, 3, 64]
    bound = q.clamp(min=0) @ kmax.transpose(-1, -2) + q.clamp(max=0) @ kmin.transpose(-1, -2)
    per_page = logits.view(1, 2, 3, 8, 8).amax(-1)
    assert (bound >= per_page - 1e-5).all()


def test_quest_re_selects_every_step_and_sparsed_keeps_its_first_pattern():
    k, v = _cache(128)
    budget = Budget(k=16, sinks=0, window=0)
    quest, sparsed = Quest(budget, page=16), SparseD(budget, page=16)
    picks_q, picks_s = [], []
    for block in range(2):
        quest.start_block(block)
        sparsed.start_block(block)
        for step in range(3):
            q = torch.randn(1, 4, 4, 8) * 3
            sel = quest.select(0, step, q, k, v)
            picks_q.append(sel.idx)
            _out_s, _mass, sel_s = sparse_step(
                sparsed, 0, step, q, k, v, k[:, :, :4], v[:, :, :4], 1.0
            )
            picks_s.append(None if sel_s is None else sel_s.idx)
    assert picks_s[0] is None  # the generation's first step is exact and sets the pattern
    assert all(torch.equal(p, picks_s[1]) for p in picks_s[1:])  # reused across steps and blocks
    assert any(not torch.equal(p, picks_q[0]) for p in picks_q[1:])  # queries move Quest's pages


def test_random_k_differs_by_seed_and_block():
    k, v = _cache(256)
    budget = Budget(k=16, sinks=0, window=0)
    a, b = RandomK(budget, seed=0), RandomK(budget, seed=1)
    a.start_block(0)
    b.start_block(0)
    q = torch.randn(1, 4, 4, 8)
    first = a.select(0, 0, q, k, v).idx
    assert not torch.equal(first, b.select(0, 0, q, k, v).idx)
    a.start_block(1)
    assert not torch.equal(first, a.select(0, 0, q, k, v).idx)


def test_exact_never_selects():
    k, v = _cache()
    assert Exact(Budget(8, 0, 0)).select(0, 0, torch.randn(1, 4, 4, 8), k, v) is None
