import time

from pall_lns.baselines import run_highs, run_scip


def test_highs_and_scip_keep_to_their_budget(smoke_dir, tmp_path):
    from pall_lns.generators import generate

    path = generate("setcover", "medium", 5, tmp_path).path  # not solved in 0.4 s
    for run in (run_highs, run_scip):
        t = time.perf_counter()
        res = run(path, 0.4)
        assert time.perf_counter() - t < 0.4 + 2.0  # generous: CI machines are shared
        assert all(s <= 0.4 + 2.0 for s, _ in res.timeline)


def test_scip_aggressive_heuristics_is_a_different_setting(smoke_dir):
    res = run_scip(smoke_dir / "auction-smoke-s7.lp", 1.0, aggressive=True)
    assert res.objective is not None
    assert res.sense == -1.0
