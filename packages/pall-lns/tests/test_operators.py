import numpy as np
import pytest
from pall_lns.errors import PallError
from pall_lns.instance import read_instance
from pall_lns.operators import FAMILIES, OperatorSpec, State, default_pool, neighbourhood


@pytest.mark.parametrize("family", FAMILIES)
def test_every_operator_frees_distinct_integer_variables(smoke_dir, family):
    inst = read_instance(smoke_dir / "facility-smoke-s7.lp")
    rng = np.random.default_rng(0)
    state = State(np.zeros(inst.n), rng.random(inst.n))
    nb = neighbourhood(OperatorSpec(family), inst, state, rng, 6)
    assert nb.free.size == np.unique(nb.free).size > 0
    assert inst.is_int[nb.free].all()  # continuous variables are never fixed anyway
    if family == "localbranch":
        assert nb.hamming is not None
        assert nb.free.size > nb.hamming
    elif family == "rens":  # the most fractional LP values, at most k
        assert 0 < nb.free.size <= 6
        assert nb.fix_to is not None
    else:
        assert nb.hamming is None
        assert nb.free.size == 6
    assert (nb.proximity is not None) == (family == "proximity")


def test_rins_frees_where_lp_and_incumbent_disagree(smoke_dir):
    inst = read_instance(smoke_dir / "setcover-smoke-s7.lp")
    x = np.ones(inst.n)
    x_lp = np.ones(inst.n)
    x_lp[[3, 5, 8]] = 0.0
    nb = neighbourhood(OperatorSpec("rins"), inst, State(x, x_lp), np.random.default_rng(0), 3)
    assert set(nb.free.tolist()) == {3, 5, 8}


def test_scored_family_follows_its_weights(smoke_dir):
    inst = read_instance(smoke_dir / "setcover-smoke-s7.lp")
    spec = OperatorSpec("scored", {"w1": 0.0, "w2": 1.0, "w3": 0.0, "w4": 0.0})
    nb = neighbourhood(spec, inst, State(np.ones(inst.n)), np.random.default_rng(0), 10)
    assert np.sort(inst.c[nb.free]).tolist() == np.sort(inst.c)[-10:].tolist()


def test_bfs_neighbourhood_is_connected_through_constraints(smoke_dir):
    inst = read_instance(smoke_dir / "indset-smoke-s7.lp")
    nb = neighbourhood(
        OperatorSpec("bfs"), inst, State(np.zeros(inst.n)), np.random.default_rng(1), 5
    )
    free = set(nb.free.tolist())
    rows = [set(inst.indices[inst.indptr[r] : inst.indptr[r + 1]].tolist()) for r in range(inst.m)]
    touched = [r for r in rows if r & free]
    assert all(any(v in r and (r & free) - {v} for r in touched) for v in free)


def test_rejects_unknown_family_and_parameter():
    with pytest.raises(PallError, match="operator family"):
        OperatorSpec("magic")
    with pytest.raises(PallError, match="unknown parameter"):
        OperatorSpec("random", {"w9": 1.0})
    assert [o.family for o in default_pool()] == list(FAMILIES)


def test_rens_fixes_to_the_rounded_lp_point_and_frees_the_fractional(smoke_dir):
    inst = read_instance(smoke_dir / "setcover-smoke-s7.lp")
    x = np.ones(inst.n)
    x_lp = np.zeros(inst.n)
    x_lp[[2, 4]] = [0.5, 0.3]
    nb = neighbourhood(OperatorSpec("rens"), inst, State(x, x_lp), np.random.default_rng(0), 10)
    assert nb.free.tolist() == [2, 4]
    assert nb.fix_to is not None
    assert nb.fix_to[0] == 0.0  # the LP's value, not the incumbent's 1


def test_crossover_frees_where_two_incumbents_disagree(smoke_dir):
    inst = read_instance(smoke_dir / "setcover-smoke-s7.lp")
    x = np.ones(inst.n)
    old = x.copy()
    old[[1, 7, 9]] = 0.0
    nb = neighbourhood(
        OperatorSpec("crossover"), inst, State(x, None, (old,)), np.random.default_rng(0), 3
    )
    assert nb.free.tolist() == [1, 7, 9]


def test_new_operators_improve_through_the_lns(smoke_dir):
    """RENS, crossover, DINS and proximity each drive a short LNS run to a checked solution."""
    from pall_lns.lns import LnsConfig, run_lns
    from pall_lns.selectors import RandomSelector

    path = smoke_dir / "setcover-smoke-s7.lp"
    ops = [OperatorSpec(f) for f in ("rens", "crossover", "dins", "proximity")]
    res = run_lns(path, ops, RandomSelector(0), LnsConfig(2.0, init_frac=0.05, seed=1))
    assert read_instance(path).is_feasible(res.x)
    assert all(c > 0 for c in res.op_counts)


def test_proximity_sub_mip_only_returns_improving_points(smoke_dir):
    from pall_lns.submip import SubMipSolver

    solver = SubMipSolver(smoke_dir / "auction-smoke-s7.lp")
    inst = solver.inst
    x = solver.initial(0.05).x
    free = np.sort(np.random.default_rng(0).choice(inst.int_idx, 40, replace=False))
    res = solver.solve(free, x, 3.0, proximity=0.001)
    if res.x is not None:
        assert inst.is_feasible(res.x)
        assert res.obj < inst.objective(x)
