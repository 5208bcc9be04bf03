"""The KV-cache capacity argument (the paper's 4.5x on Qwen3-32B), computed from shapes."""

import pytest
from nf12.capacity import GB, QWEN3_32B, kv_capacity
from nf12.errors import Nf12Error


def test_qwen3_32b_has_its_published_parameter_count():
    total = QWEN3_32B.linear_params + QWEN3_32B.other_params
    assert total == pytest.approx(32.76e9, rel=2e-3)  # Qwen3-32B: 32.8B parameters
    assert QWEN3_32B.kv_bytes_per_token() == 2 * 64 * 8 * 128 * 2  # 256 KiB per token


def test_capacity_ratio_by_hand_and_its_dependence_on_the_reserve():
    r = kv_capacity(QWEN3_32B, bits_per_weight=12.0, utilization=0.9, card_bytes=80 * GB)
    linear, other = QWEN3_32B.linear_params, QWEN3_32B.other_params
    bf16_kv = 72 * GB - 2 * (linear + other)
    nf12_kv = 72 * GB - 1.5 * linear - 2 * other
    per_token = QWEN3_32B.kv_bytes_per_token()
    assert r["bf16_kv_tokens"] == bf16_kv // per_token
    assert r["nf12_kv_tokens"] == nf12_kv // per_token
    assert r["capacity_ratio"] == pytest.approx(nf12_kv / bf16_kv, rel=1e-4)
    # 4.5x needs ~2 GB of activations reserved at vLLM's default 0.9; with none it is ~3.5x
    assert 3.3 < r["capacity_ratio"] < 3.6
    reserved = kv_capacity(QWEN3_32B, bits_per_weight=12.0, activation_bytes=2 * GB)
    assert reserved["capacity_ratio"] > 4.5
    assert kv_capacity(QWEN3_32B, bits_per_weight=12.0, utilization=0.8)["capacity_ratio"] == (
        float("inf")
    )  # BF16 does not fit in 64 GB: NF12 serves where BF16 cannot


def test_capacity_refuses_impossible_inputs():
    with pytest.raises(Nf12Error, match=r"utilization 1\.5"):
        kv_capacity(QWEN3_32B, bits_per_weight=12.0, utilization=1.5)
    with pytest.raises(Nf12Error, match="bits_per_weight 4"):
        kv_capacity(QWEN3_32B, bits_per_weight=4)
