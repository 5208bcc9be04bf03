import pytest
from saga_attention import HeadLayout, SagaError


def test_mapping_sends_query_heads_to_their_key_and_value_groups():
    layout = HeadLayout(32, 2, 8, 128)
    assert [layout.key_head(h) for h in (0, 15, 16, 31)] == [0, 0, 1, 1]
    assert [layout.value_head(h) for h in (0, 3, 4, 31)] == [0, 0, 1, 7]


def test_kv_cache_holds_hk_plus_hv_heads_per_token():
    assert HeadLayout(32, 2, 8, 128).kv_cache_bytes_per_token(2) == (2 + 8) * 128 * 2
    assert HeadLayout(32, 8, 8, 128).kv_cache_bytes_per_token(2) == 2 * 8 * 128 * 2


def test_sparse_decode_bytes_are_dominated_by_key_scoring():
    saga, gqa = HeadLayout(32, 2, 8, 128), HeadLayout(32, 8, 8, 128)
    length, n = 16384, 64
    assert saga.decode_bytes(length, n) == 128 * (2 * length + 2 * n + 8 * n) * 2
    assert gqa.decode_bytes(length, None) == 128 * 16 * length * 2
    assert gqa.decode_bytes(length, n) / saga.decode_bytes(length, n) > 3.5


@pytest.mark.parametrize(("hk", "hv"), [(3, 8), (2, 5)])
def test_rejects_head_counts_that_do_not_divide(hk, hv):
    with pytest.raises(SagaError, match="does not divide num_query_heads=32"):
        HeadLayout(32, hk, hv, 64)


def test_rejects_non_positive_head_dim():
    with pytest.raises(SagaError, match="head_dim"):
        HeadLayout(8, 2, 4, 0)
