import os
import time

import numpy as np
import pytest
from pall_lns.errors import PallError
from pall_lns.instance import read_instance
from pall_lns.lns import LnsConfig, oracle_reward, run_lns
from pall_lns.operators import default_pool
from pall_lns.selectors import FixedSelector, RandomSelector, UCBSelector


def test_lns_returns_a_checked_solution_and_improving_timeline(smoke_dir, tmp_path):
    path = smoke_dir / "setcover-smoke-s7.lp"
    traj = tmp_path / "t.jsonl"
    res = run_lns(
        path, default_pool(), UCBSelector(6), LnsConfig(1.5, init_frac=0.05), trajectory=traj
    )
    inst = read_instance(path)
    assert res.x is not None
    assert inst.is_feasible(res.x)
    assert res.objective == pytest.approx(inst.user_objective(res.x))
    values = [v for _, v in res.timeline]
    assert values == sorted(values, reverse=True)  # minimisation: only improvements logged
    assert res.iterations >= 1
    assert res.wall_s < 1.5 + 3.0  # generous: CI machines are shared
    lines = traj.read_text().splitlines()
    assert '"event":"initial"' in lines[0]
    assert '"event":"final"' in lines[-1]


@pytest.mark.parametrize("reduced", [False, True], ids=["kept", "reduced"])
def test_trajectory_splits_each_iterations_time_outside_optimize(smoke_dir, tmp_path, reduced):
    """Every iteration line carries ``split_s``: its phases outside ``optimize()`` add up to
    the iteration's time outside it (up to the untimed glue between them), and the sub-MIP's
    own building phases appear once a sub-MIP reached SCIP."""
    import json

    traj = tmp_path / "t.jsonl"
    cfg = LnsConfig(1.5, init_frac=0.05, reduced=reduced)
    run_lns(smoke_dir / "setcover-smoke-s7.lp", default_pool(), UCBSelector(6), cfg,
            trajectory=traj)  # fmt: skip
    its = [json.loads(line) for line in traj.read_text().splitlines()]
    its = [d for d in its if d["event"] == "iteration"]
    assert its
    built = {"reduce", "scip_read"} if reduced else {"bounds", "warm_start"}
    timed = total = 0.0
    for d in its:
        split = {k: v for k, v in d["split_s"].items() if k != "scip_presolve"}
        outside = d["iter_s"] - d["solve_s"]
        assert all(v > 0 for v in split.values())
        assert sum(split.values()) <= outside + 1e-5
        timed, total = timed + sum(split.values()), total + outside
        if d["solve_s"] > 0:
            assert built <= set(split)
            assert "select" in split
    assert timed >= 0.7 * total - 0.01  # the untimed glue between phases is small


def test_lns_handles_maximisation_models(smoke_dir):
    path = smoke_dir / "indset-smoke-s7.lp"
    res = run_lns(path, default_pool(), RandomSelector(0), LnsConfig(1.0, init_frac=0.05))
    inst = read_instance(path)
    assert inst.sense == -1.0
    assert res.objective == inst.user_objective(res.x) > 0


class SlowSelector:
    """Answers after 5 s: every request misses the deadline. Rebuilt in the worker by import
    (this test folder is put on the worker's PYTHONPATH)."""

    name = "slow"

    def select(self, ctx):
        time.sleep(5.0)
        return 0

    def update(self, ctx, op, reward):
        return None

    def to_spec(self):
        return {"kind": "import", "target": "test_lns:SlowSelector"}


class BrokenSelector(SlowSelector):
    name = "broken"

    def select(self, ctx):
        raise RuntimeError("the model server is gone")

    def to_spec(self):
        return {"kind": "import", "target": "test_lns:BrokenSelector"}


@pytest.fixture
def tests_on_worker_path(monkeypatch):
    from pathlib import Path

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))


def test_async_selector_misses_its_deadline_counts_and_says_so(smoke_dir, tests_on_worker_path):
    with pytest.warns(UserWarning, match="missed its deadline"):
        res = run_lns(
            smoke_dir / "auction-smoke-s7.lp",
            default_pool(),
            SlowSelector(),
            LnsConfig(1.5, init_frac=0.05, async_select=True, deadline=0.01),
        )
    assert res.x is not None
    assert res.iterations >= 1
    assert res.fallbacks == res.iterations
    assert res.stats["worker_startup_s"] > 0  # measured, and kept outside the budget
    assert res.wall_s < 1.5 + 3.0  # generous: CI machines are shared


def test_a_broken_worker_is_one_error_not_a_silent_fallback(smoke_dir, tests_on_worker_path):
    with pytest.raises(PallError, match="selector worker failed: RuntimeError: the model server"):
        run_lns(
            smoke_dir / "auction-smoke-s7.lp",
            default_pool(),
            BrokenSelector(),
            LnsConfig(3.0, init_frac=0.05, async_select=True, deadline=1.0),
        )


def test_a_selector_defined_in_main_is_refused_with_advice():
    from pall_lns.specs import selector_spec

    cls = type("Mine", (), {"name": "mine", "__module__": "__main__"})
    with pytest.raises(PallError, match="defined in the script being run"):
        selector_spec(cls())


def test_async_bandit_learns_from_every_update(smoke_dir):
    """The worker's UCB receives every reward: after the run its choices are not the
    round-robin of an untrained bandit (0.1: updates reached only the main-process fallback)."""
    res = run_lns(
        smoke_dir / "setcover-smoke-s7.lp",
        default_pool(),
        UCBSelector(6),
        LnsConfig(2.0, init_frac=0.05, async_select=True, deadline=1.0),
    )
    assert res.fallbacks == 0
    assert res.iterations >= 6
    assert sum(res.op_counts) == res.iterations


def test_ctrl_c_keeps_the_best_checked_solution(smoke_dir):
    calls = []

    def interrupt(progress):
        calls.append(progress)
        raise KeyboardInterrupt

    path = smoke_dir / "setcover-smoke-s7.lp"
    res = run_lns(
        path, default_pool(), FixedSelector(0), LnsConfig(5.0, init_frac=0.05), on_improve=interrupt
    )
    assert res.interrupted
    assert len(calls) == 1
    assert read_instance(path).is_feasible(res.x)
    assert res.wall_s < 4.5  # stopped well before the 5 s budget


def test_rejects_nonpositive_time_limit():
    with pytest.raises(PallError, match="--time-limit 0"):
        LnsConfig(0)


def test_infeasible_and_unbounded_models_are_one_line_errors(write_lp):
    infeasible = write_lp(
        "inf.lp",
        "Minimize\n obj: x\nSubject To\n c1: x >= 2\nBounds\n 0 <= x <= 1\nGenerals\n x\nEnd\n",
    )
    with pytest.raises(PallError, match="infeasible"):
        run_lns(infeasible, default_pool(), RandomSelector(0), LnsConfig(2.0))
    unbounded = write_lp(
        "unb.lp",
        "Minimize\n obj: - x - y\nSubject To\n c1: x - y <= 1\n"
        "Bounds\n x >= 0\n y >= 0\nGenerals\n x y\nEnd\n",
    )
    with pytest.raises(PallError, match="unbounded"):
        run_lns(unbounded, default_pool(), RandomSelector(0), LnsConfig(2.0))


def test_oracle_reward_is_relative_improvement_per_second():
    assert oracle_reward(100.0, 90.0, 2.0) == pytest.approx(0.05)
    assert oracle_reward(100.0, 100.0, 2.0) == 0.0
    assert np.isfinite(oracle_reward(0.0, -1.0, 0.0))


def test_async_selector_answers_from_its_own_process():
    from pall_lns.async_select import AsyncSelector
    from pall_lns.context import Context

    ctx = Context(
        n_ops=3,
        op_labels=("a", "b", "c"),
        n_vars=10,
        n_rows=5,
        density=0.1,
        int_frac=1.0,
        progress=0.1,
        iteration=0,
        stagnation=0,
        k_frac=0.2,
        gap=1.0,
    )
    asel = AsyncSelector(FixedSelector(2), 3, deadline=30.0)
    try:
        assert asel.startup_s > 0
        assert asel.collect() is None  # nothing submitted yet: the caller falls back
        asel.submit(ctx)
        assert asel.collect() == 2
        assert asel.answered == 1
        assert asel.proc.pid != os.getpid()
    finally:
        asel.close()
    again = AsyncSelector(FixedSelector(2), 3, deadline=30.0)  # the idle worker, reset
    try:
        assert again.proc.pid == asel.proc.pid
        again.submit(ctx)
        assert again.collect() == 2
    finally:
        again.close(keep=False)
    assert again.proc.poll() == 0  # stopped cleanly


def test_worker_bandit_state_follows_the_updates():
    """Updates are applied in order before the next request: a bandit told that op 1 pays
    picks op 1 once every arm has been tried."""
    from pall_lns.async_select import AsyncSelector
    from pall_lns.context import Context

    ctx = Context(3, ("a", "b", "c"), 10, 5, 0.1, 1.0, 0.1, 0, 0, 0.2, 1.0)
    asel = AsyncSelector(UCBSelector(3, c=0.0), 3, deadline=30.0)
    try:
        for op in (0, 1, 2, 0, 2):
            asel.update(ctx, op, 1.0 if op == 1 else 0.0)
        asel.submit(ctx)
        assert asel.collect() == 1
    finally:
        asel.close()


@pytest.mark.slow
def test_100k_variable_set_cover_solves_to_a_checked_solution(tmp_path):
    from pall_lns.generators import generate

    path = generate("setcover", "xl", 0, tmp_path).path
    inst = read_instance(path)
    assert inst.n >= 100_000
    res = run_lns(path, default_pool(), UCBSelector(6), LnsConfig(30.0))
    assert res.x is not None
    assert inst.is_feasible(res.x)


def test_a_model_scip_solves_at_once_returns_at_once(knapsack_lp):
    """Issue #53: SCIP proved a model optimal in its first 0.09 s and the search still ran
    to its time limit. Its proof (status or dual bound) now ends the run."""
    path = knapsack_lp
    t = time.perf_counter()
    res = run_lns(path, default_pool(), UCBSelector(6), LnsConfig(30.0))
    assert time.perf_counter() - t < 10.0  # not 30 s: generous for a loaded CI machine
    assert res.stats["stop"] == "optimal"
    assert res.iterations == 0
    assert res.objective == pytest.approx(9.0)  # x + y
    assert res.stats["gap"] == pytest.approx(0.0, abs=1e-9)


def test_gap_tolerance_stops_the_search(smoke_dir):
    """``gap``: the run ends once the incumbent is within it of SCIP's dual bound; with a
    tolerance of 0.99 that is the first incumbent SCIP's root gives (dual bound > 0)."""
    path = smoke_dir / "setcover-smoke-s7.lp"
    res = run_lns(path, default_pool(), UCBSelector(6), LnsConfig(30.0, gap=0.99))
    assert res.stats["stop"] in ("gap", "optimal")
    assert res.stats["gap"] <= 0.99
    assert res.wall_s < 10.0
    # without a tolerance the same model is searched until the limit (SCIP has not proved it)
    res = run_lns(path, default_pool(), UCBSelector(6), LnsConfig(1.0, init_frac=0.05))
    assert res.stats["stop"] in ("time_limit", "optimal")
    if res.stats["stop"] == "time_limit":
        assert res.stats["gap"] > 0


@pytest.mark.parametrize(("field", "value"), [("gap", -0.1), ("gap", 1.0), ("first_grace", -1)])
def test_config_refuses_bad_gap_and_grace(field, value):
    with pytest.raises(PallError, match=field.replace("_", "-")):
        LnsConfig(1.0, **{field: value})


def test_first_grace_is_not_charged_and_is_reported(monkeypatch, smoke_dir):
    """``first_grace``: when SCIP's first incumbent comes after the initial share, the time
    past it is not charged (the loop still gets its share) and the result says how much."""
    from pall_lns import submip

    real = submip.SubMipSolver.initial

    def slow(self, *args, **kwargs):
        time.sleep(1.5)  # a loaded machine: the first solution comes late
        out = real(self, *args, **kwargs)
        out.timeline = [(t + 1.5, v) for t, v in out.timeline]
        return out

    monkeypatch.setattr(submip.SubMipSolver, "initial", slow)
    path = smoke_dir / "indset-smoke-s7.lp"
    res = run_lns(path, default_pool(), UCBSelector(6), LnsConfig(1.0, first_grace=5.0))
    assert res.stats["first_solution_extra_s"] > 1.0
    assert res.x is not None
    if res.stats["stop"] == "time_limit":
        assert res.iterations >= 1  # the loop kept its share of the budget


def test_gap_none_searches_to_the_limit_after_a_proof(knapsack_lp):
    """``gap=None`` (``pall bench``): the loop is what is measured, so it runs to the limit
    even on a model SCIP proved optimal."""
    res = run_lns(knapsack_lp, default_pool(), UCBSelector(6), LnsConfig(0.5, gap=None))
    assert res.stats["stop"] == "time_limit"
    assert res.iterations >= 1
    assert res.objective == pytest.approx(9.0)
