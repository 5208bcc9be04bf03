import pytest
import torch
import torch.nn.functional as F
from saga_attention import SagaError
from saga_attention.attention import (
    dense_attention,
    dense_decode,
    grouped_dense_decode,
    sparse_attention,
    sparse_decode,
)


def _qkv(b=2, hq=8, hk=2, hv=4, t=40, d=16):
    return torch.randn(b, hq, t, d), torch.randn(b, hk, t, d), torch.randn(b, hv, t, d)


def test_gqa_layout_equals_sdpa_with_grouped_heads():
    q, k, v = _qkv(hk=4, hv=4)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(dense_attention(q, k, v), ref)


@pytest.mark.parametrize("selection", ["exact", "atop"])
@pytest.mark.parametrize(("hk", "hv"), [(2, 4), (4, 2), (1, 8)])
def test_every_sparse_row_is_the_decode_step_at_that_position(selection, hk, hv):
    q, k, v = _qkv(hk=hk, hv=hv, t=48)
    full = sparse_attention(q, k, v, 6, selection=selection)
    for t in (5, 20, 47):  # 5: fewer tokens than N (dense); 20, 47: sparse
        step = sparse_decode(
            q[:, :, t], k[:, :, : t + 1], v[:, :, : t + 1], min(6, t + 1), selection=selection
        )
        torch.testing.assert_close(step, full[:, :, t], atol=1e-5, rtol=1e-5)


def test_sparse_with_n_equal_to_context_is_dense():
    q, k, v = _qkv()
    qd = q[:, :, -1]
    torch.testing.assert_close(
        sparse_decode(qd, k, v, 40, selection="exact"), dense_decode(qd, k, v)
    )


@pytest.mark.parametrize(("hk", "hv"), [(2, 8), (8, 8), (8, 2), (1, 4)])
def test_grouped_dense_decode_equals_the_reference(hk, hv):
    q, k, v = torch.randn(2, 8, 16), torch.randn(2, hk, 30, 16), torch.randn(2, hv, 30, 16)
    torch.testing.assert_close(grouped_dense_decode(q, k, v), dense_decode(q, k, v))


def test_padding_is_never_attended():
    q, k, v = torch.randn(1, 8, 16), torch.randn(1, 2, 30, 16), torch.randn(1, 4, 30, 16)
    valid = torch.ones(1, 30, dtype=torch.bool)
    valid[:, :10] = False
    out, idx, ok = sparse_decode(q, k, v, 8, valid, return_indices=True)
    assert (idx[ok] >= 10).all()
    v2 = v.clone()
    v2[:, :, :10] = 1e6  # changing padded values changes nothing
    torch.testing.assert_close(sparse_decode(q, k, v2, 8, valid), out)


def test_mismatched_cache_shapes_are_one_line_errors():
    q = torch.randn(1, 8, 16)
    with pytest.raises(SagaError, match="keys hold 30 tokens but values hold 29"):
        sparse_decode(q, torch.randn(1, 2, 30, 16), torch.randn(1, 4, 29, 16), 8)
    with pytest.raises(SagaError, match="head_dim differs"):
        sparse_decode(q, torch.randn(1, 2, 30, 8), torch.randn(1, 4, 30, 16), 8)
    with pytest.raises(SagaError, match="does not divide num_query_heads"):
        sparse_decode(q, torch.randn(1, 3, 30, 16), torch.randn(1, 4, 30, 16), 8)
    with pytest.raises(SagaError, match="top_n: 31 is larger than the context length 30"):
        sparse_decode(q, torch.randn(1, 2, 30, 16), torch.randn(1, 4, 30, 16), 31)
