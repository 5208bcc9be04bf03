import numpy as np
import pytest
from pall_lns.instance import read_instance
from pall_lns.reduced import reduce
from pall_lns.submip import SubMipSolver


@pytest.mark.parametrize("family", ["setcover", "facility", "indset"])
def test_reduced_and_fixed_sub_mips_agree(smoke_dir, family):
    path = smoke_dir / f"{family}-smoke-s7.lp"
    fixed = SubMipSolver(path, reduced=False)
    small = SubMipSolver(path, reduced=True)
    x = fixed.initial(0.02).x
    if x is None:  # no incumbent that fast: start from SCIP's solution of a longer run
        x = fixed.initial(2.0).x
    k = min(15, fixed.inst.int_idx.size // 2)
    free = np.random.default_rng(0).choice(fixed.inst.int_idx, k, replace=False)
    a = fixed.solve(free, x, 5.0)
    b = small.solve(free, x, 5.0)
    inst = fixed.inst
    for res in (a, b):
        assert res.x is None or inst.is_feasible(res.x)
    assert (a.x is None) == (b.x is None)
    assert a.obj == pytest.approx(b.obj, rel=1e-6)


def test_reduce_drops_rows_that_cannot_be_violated(smoke_dir):
    inst = read_instance(smoke_dir / "setcover-smoke-s7.lp")
    ones = np.ones(inst.n)
    mask = np.zeros(inst.n, dtype=bool)
    mask[:20] = True
    red = reduce(inst, mask, ones)
    # every row keeps >= 2 covering columns fixed at 1 ... unless all its columns are free
    assert red.rows.size <= inst.m
    zero_cover = reduce(inst, mask, np.where(mask, 1.0, 0.0))
    assert zero_cover.rows.size > 0
    assert zero_cover.cols.size > 0
    # loose free columns (in no kept row) go to their cheaper bound: 0 for positive costs
    loose = np.setdiff1d(np.flatnonzero(mask), red.cols)
    assert np.all(red.x_base[loose] == 0.0)


def test_reduce_with_the_incumbent_activity_matches_the_full_pass(smoke_dir):
    inst = read_instance(smoke_dir / "setcover-smoke-s7.lp")
    rng = np.random.default_rng(1)
    x = (rng.random(inst.n) < 0.5).astype(float)
    mask = rng.random(inst.n) < 0.2
    a = reduce(inst, mask, x)
    b = reduce(inst, mask, x, inst.activity(x))
    for f in ("cols", "rows", "lo", "hi", "sub_indptr", "sub_indices", "sub_data", "x_base"):
        assert np.allclose(getattr(a, f), getattr(b, f))
