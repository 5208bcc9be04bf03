import json

import pytest
from conftest import request
from pace_scheduler import PaceSchedulerError, WorkloadConfig, generate, read_trace, write_trace


def test_critical_path_takes_the_longest_branch_of_each_fork():
    r = request(serial=(5, 7), forks=((3, 9, 4),))
    assert r.critical_path == 5 + 9 + 7
    assert r.total_tokens == 5 + 16 + 7


def test_generation_is_deterministic_by_seed():
    cfg = WorkloadConfig(n_requests=50)
    assert generate(cfg, 3) == generate(cfg, 3)
    assert generate(cfg, 3) != generate(cfg, 4)


def test_generated_workload_mixes_plain_and_forking_requests():
    reqs = generate(WorkloadConfig(n_requests=400, fork_fraction=0.7), 0)
    forking = [r for r in reqs if r.forks]
    assert 0.6 < len(forking) / len(reqs) < 0.8
    assert all(2 <= len(r.forks[0]) <= 8 for r in forking)


def test_bursty_arrivals_are_burstier_than_poisson():
    import numpy as np

    def cv(kind: str) -> float:
        reqs = generate(WorkloadConfig(n_requests=2000, arrival=kind), 0)
        gaps = np.diff([r.arrival for r in reqs])
        return float(gaps.std() / gaps.mean())

    assert cv("poisson") == pytest.approx(1.0, abs=0.1)
    assert cv("bursty") > 2.0


def test_trace_roundtrip(tmp_path):
    reqs = generate(WorkloadConfig(n_requests=20), 1)
    path = write_trace(tmp_path / "t.jsonl", reqs)
    assert read_trace(path) == sorted(reqs, key=lambda r: r.arrival)


def _write(tmp_path, records, raw=None):
    p = tmp_path / "trace.jsonl"
    p.write_text(raw if raw is not None else "".join(json.dumps(r) + "\n" for r in records))
    return p


GOOD = {
    "kind": "request",
    "id": "a",
    "arrival": 0.0,
    "prompt_tokens": 10,
    "serial_tokens": [3, 3],
    "ttft_slo": 1.0,
    "tpot_slo": 0.05,
}


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (
            [GOOD, {"kind": "branch", "parent": "zz", "fork": 0, "tokens": 4}],
            "unknown request 'zz'",
        ),
        ([GOOD, {"kind": "branch", "parent": "a", "fork": 3, "tokens": 4}], "field 'fork'"),
        ([{**GOOD, "tpot_slo": 0}], "field 'tpot_slo' must be > 0"),
        ([{**GOOD, "ttft_slo": -1.0}], "field 'ttft_slo' must be > 0"),
        ([GOOD, GOOD], "duplicate request 'a'"),
        ([{**GOOD, "kind": "other"}], "field 'kind'"),
        ([{**GOOD, "serial_tokens": "3"}], "serial_tokens"),
        ([{k: v for k, v in GOOD.items() if k != "arrival"}], "missing field 'arrival'"),
        ([], "no requests"),
    ],
)
def test_rejects_malformed_traces_in_one_line(tmp_path, records, message):
    path = _write(tmp_path, records)
    with pytest.raises(PaceSchedulerError, match=message) as exc:
        read_trace(path)
    assert str(path) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_rejects_invalid_json_naming_the_line(tmp_path):
    path = _write(tmp_path, [], raw=json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(PaceSchedulerError, match="line 2"):
        read_trace(path)


def test_rejects_slo_le_zero_in_the_config():
    with pytest.raises(PaceSchedulerError, match="tpot_slo"):
        WorkloadConfig(tpot_slo=0.0)
