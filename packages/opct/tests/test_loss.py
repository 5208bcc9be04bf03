"""The OPCT loss on hand-computed cases."""

import math

import pytest
import torch
from opct import OPCTError
from opct.loss import consistency_divergence, token_divergence


def logits(*probs: float) -> torch.Tensor:
    return torch.tensor([math.log(p) for p in probs])


def test_identical_distributions_have_zero_divergence():
    x = torch.randn(3, 5, 11)
    for divergence in ("reverse", "forward", "jsd"):
        d = token_divergence(x, x.clone(), divergence=divergence)
        assert torch.allclose(d, torch.zeros(3, 5), atol=1e-6)


def test_reverse_and_forward_kl_on_a_two_token_case():
    p, q = (0.5, 0.5), (0.9, 0.1)  # student p, teacher q
    reverse = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    forward = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)
    got_r = token_divergence(logits(*p), logits(*q), divergence="reverse")
    got_f = token_divergence(logits(*p), logits(*q), divergence="forward")
    assert got_r.item() == pytest.approx(reverse, abs=1e-6)  # 0.5108
    assert got_f.item() == pytest.approx(forward, abs=1e-6)  # 0.3681
    assert reverse != pytest.approx(forward, abs=1e-2)  # the direction matters


def test_top1_with_tail_bucket_is_the_two_bucket_kl_and_a_lower_bound():
    p, q = (0.7, 0.2, 0.1), (0.4, 0.5, 0.1)
    full = sum(a * math.log(a / b) for a, b in zip(p, q, strict=True))
    buckets = 0.7 * math.log(0.7 / 0.4) + 0.3 * math.log(0.3 / 0.6)  # {top-1, tail}
    got = token_divergence(logits(*p), logits(*q), top_k=1, tail=True).item()
    assert got == pytest.approx(buckets, abs=1e-6)
    assert got < full
    exact = token_divergence(logits(*p), logits(*q), top_k=3).item()
    assert exact == pytest.approx(full, abs=1e-6)  # K = V is the full divergence


def test_top2_without_tail_renormalises_the_slice():
    p, q = (0.7, 0.2, 0.1), (0.4, 0.5, 0.1)
    ps = (0.7 / 0.9, 0.2 / 0.9)
    qs = (0.4 / 0.9, 0.5 / 0.9)
    want = sum(a * math.log(a / b) for a, b in zip(ps, qs, strict=True))
    got = token_divergence(logits(*p), logits(*q), top_k=2, tail=False).item()
    assert got == pytest.approx(want, abs=1e-6)


def test_forward_kl_takes_the_teachers_top_k():
    p, q = (0.1, 0.2, 0.7), (0.7, 0.2, 0.1)
    # top-1 of the teacher is token 0: buckets q = (0.7, 0.3), p = (0.1, 0.9)
    want = 0.7 * math.log(0.7 / 0.1) + 0.3 * math.log(0.3 / 0.9)
    got = token_divergence(logits(*p), logits(*q), divergence="forward", top_k=1).item()
    assert got == pytest.approx(want, abs=1e-6)


def test_jsd_is_symmetric_and_log2_for_disjoint_supports():
    a, b = torch.tensor([30.0, -30.0]), torch.tensor([-30.0, 30.0])
    assert token_divergence(a, b, divergence="jsd").item() == pytest.approx(math.log(2), abs=1e-6)
    p, q = logits(0.6, 0.3, 0.1), logits(0.2, 0.2, 0.6)
    m = [(x + y) / 2 for x, y in zip((0.6, 0.3, 0.1), (0.2, 0.2, 0.6), strict=True)]
    want = 0.5 * sum(x * math.log(x / y) for x, y in zip((0.2, 0.2, 0.6), m, strict=True))
    want += 0.5 * sum(x * math.log(x / y) for x, y in zip((0.6, 0.3, 0.1), m, strict=True))
    pq = token_divergence(p, q, divergence="jsd").item()
    assert pq == pytest.approx(want, abs=1e-6)
    assert pq == pytest.approx(token_divergence(q, p, divergence="jsd").item(), abs=1e-6)


def test_temperature_divides_both_logits():
    s, t = torch.tensor([2.0, 0.0]), torch.tensor([0.0, 2.0])
    hot = token_divergence(s, t, temperature=2.0).item()
    assert hot == pytest.approx(token_divergence(s / 2, t / 2).item(), abs=1e-7)


def test_mask_keeps_only_response_tokens_and_means_over_them():
    student = torch.zeros(2, 3, 4)
    teacher = torch.zeros(2, 3, 4)
    teacher[0, 0] = torch.tensor([5.0, 0, 0, 0])  # a real response token
    teacher[1, 2] = torch.tensor([0, 0, 0, 50.0])  # padding: must not count
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    one = token_divergence(student[0, 0], teacher[0, 0]).item()
    loss = consistency_divergence(student, teacher, mask)
    assert loss.item() == pytest.approx(one / 3, abs=1e-6)  # 3 response tokens, one differs
    total = consistency_divergence(student, teacher, mask, reduction="sum").item()
    assert total == pytest.approx(one, abs=1e-6)
    assert consistency_divergence(student, teacher, mask, num_tokens=6).item() == pytest.approx(
        one / 6, abs=1e-6
    )
    per = consistency_divergence(student, teacher, mask, reduction="none")
    assert per[1, 2].item() == 0.0


def test_empty_mask_is_zero_not_nan():
    x, y = torch.randn(2, 3, 5), torch.randn(2, 3, 5)
    loss = consistency_divergence(x, y, torch.zeros(2, 3))
    assert loss.item() == 0.0


def test_only_the_student_gets_a_gradient():
    student = torch.randn(4, 7, requires_grad=True)
    teacher = torch.randn(4, 7, requires_grad=True)
    consistency_divergence(student, teacher).backward()
    assert student.grad is not None
    assert student.grad.abs().sum() > 0
    assert teacher.grad is None


def test_reverse_kl_gradient_pushes_the_student_towards_the_teacher():
    student = torch.tensor([0.0, 0.0], requires_grad=True)
    teacher = torch.tensor([3.0, 0.0])
    consistency_divergence(student, teacher).backward()
    assert student.grad[0] < 0 < student.grad[1]  # gradient descent raises token 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"divergence": "both"}, "divergence='both'"),
        ({"top_k": 0}, "top_k=0"),
        ({"top_k": 9}, "top_k=9: must be in 1..5"),
        ({"temperature": 0.0}, "temperature"),
        ({"divergence": "jsd", "jsd_mix": 1.0}, "jsd_mix"),
    ],
)
def test_bad_arguments_are_one_line_errors(kwargs, message):
    with pytest.raises(OPCTError, match=message):
        token_divergence(torch.zeros(2, 5), torch.zeros(2, 5), **kwargs)


def test_vocabulary_mismatch_is_named():
    with pytest.raises(OPCTError, match="one vocabulary"):
        token_divergence(torch.zeros(2, 5), torch.zeros(2, 6))
