import numpy as np
import pytest
from pall_lns.instance import read_instance
from pall_lns.reduced import LpText, reduce
from pall_lns.submip import SubMipSolver


def _incumbent(solver: SubMipSolver) -> np.ndarray:
    x = solver.initial(0.02).x
    if x is None:  # no incumbent that fast: start from SCIP's solution of a longer run
        x = solver.initial(2.0).x
    assert x is not None
    return x


@pytest.fixture(params=[True, False], ids=["c-api", "lp-text"])
def c_api(request) -> bool:
    """Reduced sub-MIPs' rows through SCIP's C API, or as LP text (the fallback)."""
    return bool(request.param)


def _agree(path, n_trials: int, hamming: int | None = None, c_api: bool | None = None) -> None:
    """The reduced sub-MIP (variables as LP text, rows through the C API or as LP text,
    solution files) and the bound-fixed one on the full model reach the same optimum for the
    same neighbourhoods; both answers pass the model check."""
    fixed = SubMipSolver(path, reduced=False)
    small = SubMipSolver(path, reduced=True, c_api=c_api)
    assert (small.builder is not None) == bool(c_api)
    inst = fixed.inst
    x = _incumbent(fixed)
    rng = np.random.default_rng(0)
    for _ in range(n_trials):
        k = min(15, inst.int_idx.size // 2)
        free = np.sort(rng.choice(inst.int_idx, k, replace=False))
        a = fixed.solve(free, x, 5.0, hamming)
        b = small.solve(free, x, 5.0, hamming, inst.activity(x))
        assert a.status in ("optimal", "infeasible")
        assert b.status in ("optimal", "infeasible")
        for res in (a, b):
            assert res.x is None or inst.is_feasible(res.x)
            if res.x is not None and hamming is not None:
                moved = np.abs(res.x[free] - x[free]).sum()
                assert moved <= hamming + 1e-9
        assert (a.x is None) == (b.x is None)
        assert a.obj == pytest.approx(b.obj, rel=1e-6)
        if b.x is not None:
            assert np.all(
                b.x[np.setdiff1d(inst.int_idx, free)] == x[np.setdiff1d(inst.int_idx, free)]
            )
            x = b.x  # walk: the next neighbourhood starts from the improved point


@pytest.mark.parametrize("family", ["setcover", "auction", "facility", "indset"])
def test_reduced_and_fixed_sub_mips_agree(smoke_dir, family, c_api):
    _agree(smoke_dir / f"{family}-smoke-s7.lp", n_trials=4, c_api=c_api)


@pytest.mark.parametrize("family", ["setcover", "indset"])
def test_reduced_local_branching_agrees(smoke_dir, family, c_api):
    _agree(smoke_dir / f"{family}-smoke-s7.lp", n_trials=3, hamming=3, c_api=c_api)


def _mixed_model(path) -> None:
    """General integers with negative bounds, continuous variables, ranged, equality and
    one-sided rows with fractional and negative coefficients (what the generators lack)."""
    import pyscipopt

    rng = np.random.default_rng(3)
    m = pyscipopt.Model()
    n_int, n_cont = 24, 6
    xs = [
        m.addVar(f"i{j}", vtype="I", lb=-3, ub=6, obj=float(rng.integers(-5, 6)))
        for j in range(n_int)
    ]
    xs += [m.addVar(f"b{j}", vtype="B", obj=float(rng.normal())) for j in range(8)]
    xs += [
        m.addVar(f"y{j}", vtype="C", lb=0, ub=10, obj=float(rng.uniform(0.1, 2)))
        for j in range(n_cont)
    ]
    for r in range(18):
        cols = rng.choice(len(xs), size=6, replace=False)
        coefs = np.round(rng.normal(size=6) * 3, 2)
        expr = pyscipopt.quicksum(float(a) * xs[j] for a, j in zip(coefs, cols, strict=True))
        kind = r % 3
        if kind == 0:
            m.addCons((expr <= 7.25) >= -8.5, name=f"range{r}")  # -8.5 <= expr <= 7.25
        elif kind == 1:
            m.addCons(expr <= 4.5, name=f"le{r}")
        else:
            m.addCons(expr >= -6.0, name=f"ge{r}")
    m.addCons(xs[0] + xs[1] - xs[2] == 1, name="eq")
    m.writeProblem(str(path), verbose=False)


def test_reduced_sub_mips_on_a_mixed_model(tmp_path, c_api):
    path = tmp_path / "mixed.mps"
    _mixed_model(path)
    _agree(path, n_trials=5, c_api=c_api)


def test_lp_text_round_trip_matches_the_reduction(tmp_path, smoke_dir):
    """The written sub-MIP, read back by SCIP, has exactly the reduced rows and columns."""
    inst = read_instance(smoke_dir / "facility-smoke-s7.lp")
    rng = np.random.default_rng(2)
    solver = SubMipSolver(smoke_dir / "facility-smoke-s7.lp", reduced=True)
    x = _incumbent(solver)
    mask = ~inst.is_int
    mask[rng.choice(inst.int_idx, 5, replace=False)] = True
    red = reduce(inst, mask, x)
    lp = LpText(inst)
    path = tmp_path / "sub.lp"
    path.write_text(lp.model(red))
    sub = read_instance(path)
    assert sub.names == [f"x{j}" for j in red.cols]
    np.testing.assert_array_equal(sub.c, inst.c[red.cols])
    np.testing.assert_array_equal(sub.lb, inst.lb[red.cols])
    np.testing.assert_array_equal(sub.ub, inst.ub[red.cols])
    np.testing.assert_array_equal(sub.is_int, inst.is_int[red.cols])
    # Rows as (sorted coefficient tuple, side) multisets: ranged rows appear once per side.
    pos = {j: i for i, j in enumerate(red.cols.tolist())}

    def row_set(ptr, idx, data, lo, hi):
        out = []
        for r in range(len(lo)):
            key = tuple(
                sorted(
                    zip(
                        idx[ptr[r] : ptr[r + 1]].tolist(),
                        data[ptr[r] : ptr[r + 1]].tolist(),
                        strict=True,
                    )
                )
            )
            if np.isfinite(lo[r]) and np.isfinite(hi[r]) and lo[r] != hi[r]:
                out += [(key, lo[r], np.inf), (key, -np.inf, hi[r])]
            else:
                out.append((key, lo[r], hi[r]))
        return sorted(out, key=repr)

    want = row_set(
        red.row_ptr,
        np.array([pos[j] for j in inst.indices[red.nz].tolist()]),
        inst.data[red.nz],
        red.lo,
        red.hi,
    )
    got = row_set(sub.indptr, sub.indices, sub.data, sub.row_lo, sub.row_hi)
    assert len(got) == len(want)
    for (ka, la, ha), (kb, lb, hb) in zip(got, want, strict=True):
        assert ka == kb
        assert la == pytest.approx(lb)
        assert ha == pytest.approx(hb)


def test_solution_file_round_trip(tmp_path):
    base = np.arange(6, dtype=float)
    path = tmp_path / "best.sol"
    path.write_text(
        "objective value:                  -7.5\n"
        "x1                                 2.5 \t(obj:3)\n"
        "x4                                  -1 \t(obj:0.5)\n"
    )
    x = LpText.read_solution(str(path), np.array([1, 3, 4]), base)
    # cols absent from the file are zero; others keep base values
    np.testing.assert_array_equal(x, [0.0, 2.5, 2.0, 0.0, -1.0, 5.0])


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
    for f in ("cols", "rows", "lo", "hi", "nz", "row_ptr", "x_base"):
        assert np.allclose(getattr(a, f), getattr(b, f))


@pytest.mark.parametrize("family", ["setcover", "facility"])
def test_kept_model_rens_agrees_with_the_reduced_one(smoke_dir, family, c_api):
    """RENS fixes to other values than the incumbent's: on the kept model by bound changes
    (undone at the next sub-MIP), in the reduced one by the shifted rows; same optimum."""
    path = smoke_dir / f"{family}-smoke-s7.lp"
    kept = SubMipSolver(path, reduced=False)
    small = SubMipSolver(path, reduced=True, c_api=c_api)
    inst = kept.inst
    x = _incumbent(kept)
    init = kept.initial(0.5)
    lp_point = init.x_lp if init.x_lp is not None else x
    fix_to = np.clip(np.round(lp_point), inst.lb, inst.ub)
    rng = np.random.default_rng(4)
    for _ in range(3):
        free = np.sort(rng.choice(inst.int_idx, min(20, inst.int_idx.size // 2), replace=False))
        a = kept.solve(free, x, 5.0, fix_to=fix_to)
        b = small.solve(free, x, 5.0, None, inst.activity(x), fix_to=fix_to)
        assert (a.x is None) == (b.x is None)
        assert a.obj == pytest.approx(b.obj, rel=1e-6)
        for res in (a, b):
            if res.x is not None:
                assert inst.is_feasible(res.x)
                fixed = np.setdiff1d(inst.int_idx, free)
                assert np.all(res.x[fixed] == fix_to[fixed])
        # a plain sub-MIP afterwards sees the original bounds again outside its fixings
        c = kept.solve(free, x, 5.0)
        d = small.solve(free, x, 5.0, None, inst.activity(x))
        assert c.obj == pytest.approx(d.obj, rel=1e-6)


@pytest.mark.parametrize("family", ["setcover", "indset"])
def test_kept_model_proximity_finds_an_improving_point_as_near_as_the_reduced_one(
    smoke_dir, family, c_api
):
    path = smoke_dir / f"{family}-smoke-s7.lp"
    kept = SubMipSolver(path, reduced=False)
    small = SubMipSolver(path, reduced=True, c_api=c_api)
    inst = kept.inst
    x = _incumbent(kept)
    f0 = inst.objective(x)
    rng = np.random.default_rng(5)
    free = np.sort(rng.choice(inst.int_idx, min(40, inst.int_idx.size // 2), replace=False))
    a = kept.solve(free, x, 5.0, proximity=0.001)
    b = small.solve(free, x, 5.0, None, inst.activity(x), proximity=0.001)
    assert a.status == b.status
    assert (a.x is None) == (b.x is None)
    if a.x is not None and b.x is not None:
        for res in (a, b):
            assert inst.is_feasible(res.x)
            assert res.obj <= f0 - 0.001 * max(abs(f0), 1.0) + 1e-9
        assert np.abs(a.x - x).sum() == pytest.approx(np.abs(b.x - x).sum())
    # the objective is restored: a plain sub-MIP afterwards agrees with the reduced one
    c = kept.solve(free, x, 5.0)
    d = small.solve(free, x, 5.0, None, inst.activity(x))
    assert c.obj == pytest.approx(d.obj, rel=1e-6)


def _random_sub_mips(solver: SubMipSolver, seed: int, n: int = 4) -> list[tuple[float, int]]:
    """``n`` reduced sub-MIPs over 30 random free columns each, from a feasible incumbent that
    every improvement replaces; returns (objective, sub-SCIP used) per sub-MIP."""
    inst = solver.inst
    x = _incumbent(solver)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        free = np.sort(rng.choice(inst.int_idx, min(30, inst.int_idx.size), replace=False))
        res = solver.solve(free, x, 5.0, None, inst.activity(x))
        assert res.status in ("optimal", "infeasible")
        assert res.x is None or inst.is_feasible(res.x)
        out.append((res.obj, 1 - solver._turn))  # the turn flips before each solve
        if res.x is not None:
            x = res.x
    return out


def test_reduced_sub_mips_alternate_two_scips_and_free_the_idle_one(smoke_dir):
    """Consecutive reduced sub-MIPs go to the two sub-SCIPs in turn; the one that solved the
    previous sub-MIP is freed by the background thread, and close() stops that thread."""
    import threading

    solver = SubMipSolver(smoke_dir / "setcover-smoke-s7.lp", reduced=True)
    used = [sub for _, sub in _random_sub_mips(solver, 1)]
    assert set(used) == {0, 1}
    assert len(solver._subs) == 2
    solver._join_free()
    # the idle sub-SCIP holds no problem once its background free is done
    idle = solver._subs[solver._turn]
    assert idle.getStage() == 0 or idle.getNVars() == 0
    thread = solver._freer_thread
    assert thread is not None
    assert thread.is_alive()
    assert thread in threading.enumerate()
    solver.close()
    assert not thread.is_alive()
    assert solver._freer_thread is None


def test_without_background_free_no_thread_runs_and_answers_are_the_same(smoke_dir):
    """``background_free=False`` (the equal-cores rows): no freeing thread is ever started, the
    idle problem is freed on the caller's thread (timed as ``scip_free``), and the sub-MIPs give
    the same answers as with the thread."""
    runs = []
    for background in (True, False):
        solver = SubMipSolver(
            smoke_dir / "setcover-smoke-s7.lp", reduced=True, background_free=background
        )
        objs = [obj for obj, _ in _random_sub_mips(solver, 3)]
        assert (solver._freer_thread is None) == (not background)
        solver._join_free()
        # the idle sub-SCIP (it solved the previous sub-MIP) is freed by the thread, or keeps
        # its problem until the caller frees it before its next read
        idle = solver._subs[solver._turn]
        assert (idle.getStage() != 0 and idle.getNVars() > 0) == (not background)
        solver.close()
        runs.append(objs)
    assert runs[0] == pytest.approx(runs[1], rel=1e-9)


def test_lp_text_leaves_out_unit_coefficients():
    from pall_lns.reduced import _term

    assert _term(1.0) == " + "
    assert _term(-1.0) == " - "
    assert _term(2.5) == " + 2.5 "
    assert _term(-3.0) == " - 3 "


def test_amortisation_rule_known_answers():
    """The loop's rule: the median fixed cost of the last three iterations over the share,
    at least the base limit T/20, at most max(T/20, T/6); off with a share of 0 or an explicit
    sub-MIP limit."""
    from pall_lns.lns import LnsConfig

    cfg = LnsConfig(60.0, overhead_share=0.03)
    assert cfg.tau == 3.0
    assert cfg.amortised_tau([]) == 3.0
    assert cfg.amortised_tau([0.01, 0.02]) == 3.0  # cheap iterations: the base limit
    assert cfg.amortised_tau([0.9, 0.15, 0.21]) == pytest.approx(0.21 / 0.03)
    assert cfg.amortised_tau([5.0, 0.15, 9.0, 0.21]) == pytest.approx(0.21 / 0.03)  # median
    assert cfg.amortised_tau([2.0, 2.0, 2.0]) == 10.0  # the cap T/6
    assert LnsConfig(60.0, overhead_share=0.0).amortised_tau([2.0] * 3) == 3.0
    assert LnsConfig(60.0, submip_time=1.5).amortised_tau([2.0] * 3) == 1.5


@pytest.mark.parametrize("reduced", [True, False])
def test_sub_mip_limit_stretched_by_its_own_cost(smoke_dir, reduced):
    """``stretch = (share, most)``: a sub-MIP's limit is at least its own building and reading
    cost over the share, never above ``most``; without it, the limit is the one given."""
    solver = SubMipSolver(smoke_dir / "setcover-smoke-s7.lp", reduced=reduced)
    inst = solver.inst
    x = _incumbent(solver)
    free = inst.int_idx[: min(30, inst.int_idx.size)]
    solver.solve(free, x, 0.5, None, inst.activity(x))
    assert solver.last_limit == 0.5
    solver.solve(free, x, 0.5, None, inst.activity(x), stretch=(0.999, 9.0))
    assert solver.last_limit == 0.5  # building costs far less than 0.999 * 0.5 s
    solver.solve(free, x, 0.5, None, inst.activity(x), stretch=(1e-9, 0.8))
    assert solver.last_limit == 0.8  # any cost over a tiny share: capped at most
    solver.close()


def test_c_api_builder_can_be_turned_off_and_required(monkeypatch, smoke_dir):
    """``PALL_SUBMIP_BUILDER=lp`` gives the LP-text rows (with the reason recorded); asking for
    the C API where it is off is one clear error, not a silent fallback."""
    from pall_lns import capi
    from pall_lns.errors import PallError

    monkeypatch.setattr(capi, "_state", {})
    monkeypatch.setenv("PALL_SUBMIP_BUILDER", "lp")
    assert capi.load() is None
    assert capi.reason() == "PALL_SUBMIP_BUILDER=lp"
    path = smoke_dir / "setcover-smoke-s7.lp"
    solver = SubMipSolver(path, reduced=True)
    assert solver.builder is None
    assert solver.builder_reason == "PALL_SUBMIP_BUILDER=lp"
    with pytest.raises(PallError, match="C API is not reachable: PALL_SUBMIP_BUILDER=lp"):
        SubMipSolver(path, reduced=True, c_api=True)
    monkeypatch.setattr(capi, "_state", {})
    monkeypatch.delenv("PALL_SUBMIP_BUILDER")
    assert capi.load() is not None, capi.reason()  # PySCIPOpt's libscip is found here


_V_LP = (
    "Maximize\n obj: + 3 x0 + 2 x1 + 4 x2\nSubject To\nBounds\n"
    " 0 <= x0 <= 5\n -2 <= x1 <= 4\n 0 <= x2 <= 3\nGenerals\nx0\nx1\nEnd\n"
)


def _v_model(builder, path, rows: bool = True):
    """``_V_LP`` read from ``path`` into a fresh SCIP; with ``rows``, its rows
    ``1 <= x0 + x1 <= 6``, ``x1 - x2 = -1``, ``2 x0 + x2 <= 7.5`` added through ``builder``
    (optimum 22 at x = (2, 2, 3): x2 = x1 + 1, so max 3 x0 + 6 x1 + 4 with x1 <= 2)."""
    import pyscipopt

    if not path.exists():
        path.write_text(_V_LP)
    m = pyscipopt.Model()
    m.hideOutput()
    m.readProblem(str(path))
    ptrs = builder.var_pointers(m)
    if rows:
        builder.add_rows(m, ptrs[[0, 1, 1, 2, 0, 2]], np.array([1, 1, 1, -1, 2, 1.0]),
                         np.array([0, 2, 4, 6]), np.array([1, -1, -np.inf]),
                         np.array([6, -1, 7.5]))  # fmt: skip
    return m, ptrs


def test_c_api_rows_known_answer_and_bad_arrays(tmp_path):
    """Rows from arrays: ranged, equality and one-sided rows give the optimum of the same model
    written as LP text; arrays that do not line up are refused before SCIP sees them."""
    from pall_lns import capi
    from pall_lns.errors import PallError

    builder = capi.load()
    assert builder is not None, capi.reason()
    m, ptrs = _v_model(builder, tmp_path / "v.lp")
    assert [builder.var_name(int(p)) for p in ptrs] == ["x0", "x1", "x2"]
    assert m.getNConss() == 3
    m.optimize()
    assert m.getStatus() == "optimal"
    assert m.getObjVal() == pytest.approx(3 * 2 + 6 * 2 + 4)
    m, ptrs = _v_model(builder, tmp_path / "v.lp", rows=False)
    with pytest.raises(PallError, match="different lengths"):
        builder.add_rows(m, ptrs[[0, 1]], np.ones(3), np.array([0, 2]), np.ones(1), np.ones(1))
    assert m.getNConss() == 0


def test_c_api_start_and_answer_known_values(tmp_path):
    """The warm start goes in and the best solution comes out as arrays (no solution files):
    stopped at its first solution SCIP hands back the start itself, solved it hands back the
    known optimum of a model with general, negative and continuous variables; no solution is
    ``None`` and misaligned arrays are refused."""
    from pall_lns import capi
    from pall_lns.errors import PallError

    builder = capi.load()
    assert builder is not None, capi.reason()
    m, ptrs = _v_model(builder, tmp_path / "v.lp")
    assert builder.best_values(m, ptrs) is None  # nothing found yet
    with pytest.raises(PallError, match="different lengths"):
        builder.add_start(m, ptrs, np.ones(2))
    start = np.array([1.0, 0.0, 1.0])  # value 7, feasible
    assert builder.add_start(m, ptrs, start)
    m.setIntParam("limits/solutions", 1)
    m.optimize()
    assert builder.best_values(m, ptrs).tolist() == start.tolist()
    m.freeTransform()
    m.setIntParam("limits/solutions", -1)
    m.optimize()
    assert m.getStatus() == "optimal"
    assert builder.best_values(m, ptrs) == pytest.approx([2.0, 2.0, 3.0])
    x = builder.best_values(m, ptrs)
    assert 3 * x[0] + 2 * x[1] + 4 * x[2] == pytest.approx(m.getObjVal())
