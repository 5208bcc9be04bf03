import pytest
from pace_scheduler import PaceSchedulerError
from pace_scheduler.profile import ProfileConfig, fit_profile, read_profile


def test_fit_profile_rejects_too_few_steps():
    rows = [
        {"n_decode": b, "sum_ctx": 10 * b, "prefill_tokens": 0, "prefill_attn": 0, "seconds": 0.01}
        for b in (1, 2, 3)
    ]
    with pytest.raises(PaceSchedulerError, match="too few"):
        fit_profile(rows, source="p.jsonl")


@pytest.mark.parametrize("bad", ["fast", -1.0, 0, float("nan"), float("inf"), True])
def test_fit_profile_names_a_bad_record(bad):
    rows = [{"n_decode": 1, "sum_ctx": 1, "seconds": bad}]
    with pytest.raises(PaceSchedulerError, match="record 1: field 'seconds'"):
        fit_profile(rows, source="p.jsonl")


def test_read_profile_rejects_a_truncated_file(tmp_path):
    p = tmp_path / "profile.jsonl"
    p.write_text('{"n_decode": 1, "seconds": 0.1}\n{"n_dec')
    with pytest.raises(PaceSchedulerError, match="truncated"):
        read_profile(p)


def test_read_profile_rejects_a_directory(tmp_path):
    with pytest.raises(PaceSchedulerError, match="is a directory"):
        read_profile(tmp_path)


def test_profile_grid_rejects_impossible_sizes():
    with pytest.raises(PaceSchedulerError, match="new_tokens"):
        ProfileConfig(new_tokens=1)
    with pytest.raises(PaceSchedulerError, match="batch sizes"):
        ProfileConfig(batch_sizes=(0, 2))
