import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from pace_scheduler import PaceSchedulerError
from pace_scheduler.profile import (
    ProfileConfig,
    fit_profile,
    profile_model,
    read_profile,
    tiny_qwen,
)

MICRO = ProfileConfig(
    batch_sizes=(1, 2, 4),
    contexts=(8, 32, 64),
    repeats=1,
    hidden_size=32,
    layers=1,
    heads=2,
    kv_heads=1,
    intermediate=64,
    vocab=64,
)


def test_profiles_decode_and_prefill_steps_of_a_tiny_qwen3():
    model = tiny_qwen(MICRO)
    assert model.config.model_type == "qwen3"
    records = profile_model(model, MICRO)
    kinds = [r["kind"] for r in records]
    assert kinds.count("decode") == 9
    assert kinds.count("prefill") >= 3
    decode = next(r for r in records if r["kind"] == "decode" and r["batch"] == 4)
    assert decode["n_decode"] == 4
    assert decode["sum_ctx"] == 4 * decode["context"]
    fitted, r2, n = fit_profile(records)
    assert n == len(records)
    assert -1.0 <= r2 <= 1.0
    assert fitted.noise_cv >= 0


def test_fit_profile_rejects_too_few_steps():
    rows = [
        {"n_decode": b, "sum_ctx": 10 * b, "prefill_tokens": 0, "prefill_attn": 0, "seconds": 0.01}
        for b in (1, 2, 3)
    ]
    with pytest.raises(PaceSchedulerError, match="too few"):
        fit_profile(rows, source="p.jsonl")


def test_fit_profile_names_a_bad_record(tmp_path):
    rows = [{"n_decode": 1, "sum_ctx": 1, "seconds": "fast"}]
    with pytest.raises(PaceSchedulerError, match="record 1: field 'seconds'"):
        fit_profile(rows, source="p.jsonl")


def test_read_profile_rejects_a_truncated_file(tmp_path):
    p = tmp_path / "profile.jsonl"
    p.write_text('{"n_decode": 1, "seconds": 0.1}\n{"n_dec')
    with pytest.raises(PaceSchedulerError, match="truncated"):
        read_profile(p)
