import math

import pytest
import torch
from mosa_rl import MosaError, mosa_loss, order_statistic_profile, profile_kl
from mosa_rl.loss import profile_sums, profile_sums_from_hidden, sorted_probs


def test_sorted_profile_is_topk_then_tail_by_hand():
    probs = torch.tensor([[0.2, 0.5, 0.3, 0.0]])
    assert torch.allclose(sorted_probs(probs, 2), torch.tensor([[0.5, 0.3, 0.2]]))
    assert torch.allclose(
        sorted_probs(probs, 4), torch.tensor([[0.5, 0.3, 0.2, 0.0, 0.0]]), atol=1e-7
    )


def test_profile_averages_ranks_over_masked_tokens_only():
    # token 1 sorts to (0.6, 0.3, 0.1), token 2 to (0.8, 0.2, 0.0); token 3 is padding
    probs = torch.tensor([[[0.1, 0.6, 0.3], [0.0, 0.2, 0.8], [1.0, 0.0, 0.0]]])
    mask = torch.tensor([[1, 1, 0]])
    sums = profile_sums(probs, mask, k=2)
    assert torch.allclose(sums, torch.tensor([[1.4, 0.5, 0.1]]))
    prof = order_statistic_profile(probs.log(), mask, k=2)
    assert torch.allclose(prof, torch.tensor([0.7, 0.25, 0.05]), atol=1e-6)


def test_kl_between_profiles_by_hand_in_both_directions():
    p, q = torch.tensor([0.5, 0.5]), torch.tensor([0.25, 0.75])
    reverse = 0.5 * math.log(2.0) + 0.5 * math.log(0.5 / 0.75)
    forward = 0.25 * math.log(0.5) + 0.75 * math.log(1.5)
    assert profile_kl(p, q, "reverse").item() == pytest.approx(reverse, rel=1e-6)
    assert profile_kl(p, q, "forward").item() == pytest.approx(forward, rel=1e-6)


def test_identical_models_give_zero():
    logits = torch.randn(3, 5, 11, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(3, 5)
    assert mosa_loss(logits, logits.clone(), mask, k=4).item() == pytest.approx(0.0, abs=1e-7)


def test_profile_ignores_which_token_ranks_first():
    # MOSA's point: permuting the vocabulary (changing the argmax) leaves the profile alone.
    ref = torch.randn(2, 6, 13, generator=torch.Generator().manual_seed(1))
    policy = ref[..., torch.randperm(13, generator=torch.Generator().manual_seed(2))]
    assert mosa_loss(policy, ref, torch.ones(2, 6), k=5).item() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("direction", ["reverse", "forward"])
def test_sharpened_policy_gives_a_positive_value(direction):
    ref = torch.randn(2, 6, 13, generator=torch.Generator().manual_seed(3))
    loss = mosa_loss(3.0 * ref, ref, torch.ones(2, 6), k=4, direction=direction)
    assert loss.item() > 1e-3


def test_gradients_flow_only_through_selected_entries():
    probs = torch.tensor([[[0.05, 0.4, 0.1, 0.3, 0.15]]], requires_grad=True)
    q = torch.tensor([0.5, 0.2, 0.3])
    p = profile_sums(probs, torch.ones(1, 1), k=2)[0]
    profile_kl(p, q).backward()
    grad = probs.grad[0, 0]
    selected = torch.zeros(5, dtype=torch.bool)
    selected[[1, 3]] = True  # the two largest entries
    assert torch.all(grad[~selected] == 0)
    assert torch.all(grad[selected] != 0)


def test_reference_side_carries_no_gradient():
    policy = torch.randn(1, 4, 7, requires_grad=True)
    ref = torch.randn(1, 4, 7, requires_grad=True)
    mosa_loss(policy, ref, torch.ones(1, 4), k=3).backward()
    assert policy.grad is not None
    assert ref.grad is None


def test_chunked_hidden_path_equals_logits_path_with_gradients():
    g = torch.Generator().manual_seed(4)
    hidden = torch.randn(10, 8, generator=g, requires_grad=True)
    weight = torch.randn(17, 8, generator=g, requires_grad=True)
    seq = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    chunked = profile_sums_from_hidden(
        hidden, weight, None, seq, 3, k=4, temperature=0.7, chunk_size=3
    )
    logits = (hidden @ weight.T) / 0.7
    direct = torch.zeros(3, 5).index_add(0, seq, sorted_probs(logits.softmax(-1), 4))
    assert torch.allclose(chunked, direct, atol=1e-6)
    (g1,) = torch.autograd.grad(chunked[:, 0].sum(), hidden)
    (g2,) = torch.autograd.grad(direct[:, 0].sum(), hidden)
    assert torch.allclose(g1, g2, atol=1e-6)


def test_rejects_k_larger_than_the_vocabulary():
    with pytest.raises(MosaError, match=r"top_k=12: larger than the vocabulary \(11 tokens\)"):
        mosa_loss(torch.randn(1, 2, 11), torch.randn(1, 2, 11), torch.ones(1, 2), k=12)


def test_rejects_completions_with_no_valid_tokens():
    with pytest.raises(MosaError, match="no valid completion tokens"):
        mosa_loss(torch.randn(2, 3, 9), torch.randn(2, 3, 9), torch.zeros(2, 3), k=2)


def test_rejects_a_reference_with_a_different_vocabulary():
    with pytest.raises(MosaError, match="reference vocabulary: 12 tokens, but the policy has 9"):
        mosa_loss(torch.randn(1, 2, 9), torch.randn(1, 2, 12), torch.ones(1, 2), k=2)


def test_rejects_unknown_direction_and_bad_mask_shape():
    with pytest.raises(MosaError, match="direction"):
        profile_kl(torch.ones(2) / 2, torch.ones(2) / 2, "sideways")  # type: ignore[arg-type]
    with pytest.raises(MosaError, match="mask: shape"):
        mosa_loss(torch.randn(1, 2, 9), torch.randn(1, 2, 9), torch.ones(1, 3), k=2)


def test_errors_are_one_line():
    with pytest.raises(MosaError) as exc:
        mosa_loss(torch.randn(1, 2, 9), torch.randn(1, 2, 9), torch.zeros(1, 2), k=2)
    assert "\n" not in str(exc.value)


def test_bf16_hidden_states_meet_an_fp32_head():
    # trl's cast_lm_head_to_fp32: a bf16 body, an fp32 head. The profile is computed in fp32.
    g = torch.Generator().manual_seed(5)
    hidden = torch.randn(6, 8, generator=g).bfloat16()
    weight = torch.randn(11, 8, generator=g)
    seq = torch.tensor([0, 0, 0, 1, 1, 1])
    got = profile_sums_from_hidden(hidden, weight, None, seq, 2, k=3)
    want = profile_sums_from_hidden(hidden.float(), weight, None, seq, 2, k=3)
    assert got.dtype == torch.float32
    assert torch.allclose(got, want, atol=1e-6)


def test_pooled_profile_gradient_does_not_depend_on_world_size():
    """Two simulated data-parallel ranks share the head weight W and hold different tokens.
    Each differentiates world * KL(P̄_pooled ‖ Q̄) through its own tokens only; DDP averages the
    two gradients. The result is the gradient of the whole batch's KL(P̄ ‖ Q̄) in one process."""
    from mosa_rl.loss import pooled_profile

    g = torch.Generator().manual_seed(6)
    hidden = [torch.randn(3, 8, generator=g), torch.randn(7, 8, generator=g)]  # unequal shares
    weight = torch.randn(13, 8, generator=g)
    q = torch.softmax(torch.randn(5, generator=g), -1)
    tokens = torch.tensor(10.0)

    w_one = weight.clone().requires_grad_(True)
    every = torch.cat(hidden)
    sums = profile_sums_from_hidden(every, w_one, None, torch.zeros(10, dtype=torch.long), 1, k=4)
    profile_kl(sums.sum(0) / tokens, q).backward()

    world = 2
    w_ranks = [weight.clone().requires_grad_(True) for _ in range(world)]
    local = [
        profile_sums_from_hidden(h, w, None, torch.zeros(len(h), dtype=torch.long), 1, k=4).sum(0)
        for h, w in zip(hidden, w_ranks, strict=True)
    ]
    total = sum(s.detach() for s in local)  # what the all-reduce gives every rank
    for s in local:
        p = pooled_profile(s, total, tokens)
        assert torch.allclose(p.detach(), total / tokens)  # the value is the pooled profile
        (world * profile_kl(p, q)).backward()
    ddp = sum(w.grad for w in w_ranks) / world  # DDP's gradient average
    assert torch.allclose(ddp, w_one.grad, atol=1e-7)
    assert not torch.allclose(w_ranks[0].grad / world, w_one.grad, atol=1e-4)  # pooling matters
