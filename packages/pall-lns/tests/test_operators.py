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
    else:
        assert nb.hamming is None
        assert nb.free.size == 6


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
