import numpy as np
import pytest
from conftest import request
from pace_scheduler import EngineConfig, WorkloadConfig, generate, make_policy, simulate
from pace_scheduler.sweep import capacity, slos_for

ENGINE = EngineConfig(kv_blocks=4000, max_num_seqs=64)


def test_a_lone_forking_request_decodes_its_critical_path_with_eager(h200):
    r = request(serial=(4, 4), forks=((6, 9, 6),), tpot=1.0)
    res = simulate([r], h200, make_policy("irp-eager"), ENGINE, seed=0)
    assert res.finished.all()
    # prefill step + critical path decode steps (branches concurrent)
    assert res.steps == 1 + r.critical_path
    assert res.mean_width == pytest.approx((3 * 6 + 3) / 9, rel=0.01)


def test_irp_off_runs_branches_serially(h200):
    r = request(serial=(4, 4), forks=((6, 9, 6),), tpot=1.0)
    res = simulate([r], h200, make_policy("irp-off"), ENGINE, seed=0)
    assert res.steps == 1 + r.total_tokens
    assert res.mean_width == 1.0


def test_all_requests_finish_at_low_load_under_every_policy(h200):
    reqs = generate(
        WorkloadConfig(n_requests=30, rate=1.0, prompt_mean=64, serial_mean=16, branch_mean=32), 0
    )
    for name in ("irp-off", "irp-eager", "cap-2", "global-8", "pace"):
        res = simulate(reqs, h200, make_policy(name, h200), ENGINE, seed=0)
        assert res.finished.all(), name


def test_tiny_kv_cache_preempts_instead_of_deadlocking(h200):
    reqs = generate(
        WorkloadConfig(n_requests=20, rate=50.0, prompt_mean=64, serial_mean=32, branch_mean=48), 0
    )
    eng = EngineConfig(kv_blocks=120, max_num_seqs=32)
    res = simulate(reqs, h200, make_policy("irp-eager"), eng, seed=0)
    assert res.preemptions > 0
    assert res.finished.mean() > 0.5


def test_simulation_is_deterministic_by_seed(h200):
    reqs = generate(
        WorkloadConfig(n_requests=25, rate=8.0, prompt_mean=64, serial_mean=16, branch_mean=32), 0
    )
    a = simulate(reqs, h200, make_policy("pace", h200), ENGINE, seed=1)
    b = simulate(reqs, h200, make_policy("pace", h200), ENGINE, seed=1)
    assert np.array_equal(a.per_token, b.per_token, equal_nan=True)


def test_pace_beats_serial_branches_near_capacity(h200):
    wl = WorkloadConfig(n_requests=60, prompt_mean=128, serial_mean=32, branch_mean=64)
    eng = EngineConfig(kv_blocks=13_000, branch_len_hint=64)
    ttft, tpot = slos_for(h200, wl, 3.0, 20.0)
    rate = capacity(h200, wl, eng, tpot)
    reqs = generate(
        WorkloadConfig(**{**wl.__dict__, "rate": rate, "ttft_slo": ttft, "tpot_slo": tpot}), 0
    )
    off = simulate(reqs, h200, make_policy("irp-off"), eng, seed=0)
    pace = simulate(reqs, h200, make_policy("pace", h200), eng, seed=0)
    assert pace.goodput > off.goodput
    assert pace.mean_width > 1.5


def test_unmeetable_slo_gives_zero_goodput(h200):
    r = request(tpot=1e-4)
    res = simulate(
        [r, request("r1", 0.1, tpot=1e-4)], h200, make_policy("irp-eager"), EngineConfig(warmup=0.0)
    )
    assert res.goodput == 0.0


def test_a_prompt_larger_than_the_kv_cache_is_rejected_not_blocking(h200):
    eng = EngineConfig(kv_blocks=64, max_num_seqs=16, warmup=0.0)
    huge = request("huge", 0.0, serial=(2,), forks=(), tpot=1.0, prompt=64 * 16 + 1)
    rest = [request(f"r{i}", 0.01 * (i + 1), tpot=1.0, prompt=16) for i in range(4)]
    res = simulate([huge, *rest], h200, make_policy("irp-eager"), eng, seed=0)
    assert [rid for rid, _ in res.rejected] == ["huge"]
    assert "KV blocks" in res.rejected[0][1]
    assert not res.finished[0]
    assert res.finished[1:].all()
