import re

import numpy as np
import pytest
from pall_lns.errors import PallError
from pall_lns.generators import FAMILIES, SIZES, generate
from pall_lns.instance import import_scip, read_instance


@pytest.mark.parametrize("family", FAMILIES)
def test_generated_instance_reads_back_with_its_metadata(smoke_dir, family):
    inst = read_instance(smoke_dir / f"{family}-smoke-s7.lp")
    assert inst.meta["family"] == family
    assert inst.n == inst.meta["n_vars"]
    assert inst.int_idx.size > 0
    assert inst.sense == (-1.0 if inst.meta["sense"] == "maximize" else 1.0)


def test_generators_are_deterministic_by_seed(tmp_path):
    a = generate("setcover", "smoke", 3, tmp_path / "a").path.read_text()
    b = generate("setcover", "smoke", 3, tmp_path / "b").path.read_text()
    c = generate("setcover", "smoke", 4, tmp_path / "c").path.read_text()
    assert a.splitlines()[1:] == b.splitlines()[1:]
    assert a != c


def test_xl_sizes_have_100k_variables():
    assert SIZES["setcover"]["xl"]["cols"] >= 100_000
    assert SIZES["auction"]["xl"]["bids"] >= 100_000
    fac = SIZES["facility"]["xl"]
    assert fac["customers"] * fac["facilities"] >= 100_000
    assert SIZES["indset"]["xl"]["nodes"] >= 100_000


def test_feasibility_check_catches_each_kind_of_violation(smoke_dir):
    inst = read_instance(smoke_dir / "setcover-smoke-s7.lp")
    ones = np.ones(inst.n)
    assert inst.is_feasible(ones)  # every column: every row covered
    assert not inst.is_feasible(np.zeros(inst.n))  # rows uncovered
    frac = ones.copy()
    frac[0] = 0.5
    assert "integrality" in inst.violation(frac)[1]
    big = ones.copy()
    big[1] = 2.0
    assert "upper bound" in inst.violation(big)[1]
    assert not inst.is_feasible(np.ones(inst.n + 1))


def test_rejects_missing_file_and_wrong_suffix(tmp_path):
    with pytest.raises(PallError, match="no such file"):
        read_instance(tmp_path / "nope.lp")
    bad = tmp_path / "model.txt"
    bad.write_text("x")
    with pytest.raises(PallError, match="unsupported model format"):
        read_instance(bad)


def test_rejects_unparsable_model(write_lp):
    p = write_lp("broken.lp", "Minimize\n obj: x +\nSubject To\n c1: x >= \nEnd garbage ][\n")
    with pytest.raises(PallError, match=r"broken\.lp"):
        read_instance(p)


def test_missing_solver_is_one_line(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyscipopt", None)
    with pytest.raises(PallError, match=r"pip install pyscipopt"):
        import_scip()


def test_mps_output_holds_the_same_model(tmp_path):
    lp = read_instance(generate("auction", "smoke", 5, tmp_path / "lp").path)
    g = generate("auction", "smoke", 5, tmp_path / "mps", fmt="mps")
    assert g.path.suffix == ".mps"
    mps = read_instance(g.path)
    assert (mps.n, mps.m, mps.sense) == (lp.n, lp.m, lp.sense)
    x = np.zeros(lp.n)
    assert mps.is_feasible(x)
    assert sorted(mps.c.tolist()) == sorted(lp.c.tolist())


@pytest.mark.parametrize("family", FAMILIES)
def test_highs_matrix_extraction_matches_scip(smoke_dir, family, monkeypatch):
    import pall_lns.instance as mod

    path = smoke_dir / f"{family}-smoke-s7.lp"
    monkeypatch.setattr(mod, "HIGHS_FROM", 0)
    fast = read_instance(path)
    monkeypatch.setattr(mod, "_matrix_highs", lambda *a, **k: None)
    slow = read_instance(path)

    def rows(inst):
        out = []
        for r in range(inst.m):
            sl = slice(inst.indptr[r], inst.indptr[r + 1])
            terms = sorted(zip(inst.indices[sl].tolist(), inst.data[sl].tolist(), strict=True))
            out.append((tuple(terms), inst.row_lo[r], inst.row_hi[r]))
        return sorted(out)

    assert rows(fast) == rows(slow)
    assert np.array_equal(fast.c, slow.c)


def test_recheck_agrees_with_the_full_check(smoke_dir):
    inst = read_instance(smoke_dir / "setcover-smoke-s7.lp")
    rng = np.random.default_rng(0)
    x = np.ones(inst.n)
    act = inst.activity(x)
    for _ in range(20):
        y = x.copy()
        y[rng.choice(inst.n, 5, replace=False)] = rng.choice([0.0, 1.0, 0.5], 5)
        bad, act_y = inst.recheck(x, act, y)
        assert bad == pytest.approx(max(inst.violation(y)[0], 0.0))
        assert np.allclose(act_y, inst.activity(y))


def _lines(path):
    return path.read_text().splitlines(keepends=True)


def test_rejects_an_lp_cut_inside_the_objective(smoke_dir, write_lp):
    lines = _lines(smoke_dir / "setcover-smoke-s7.lp")
    p = write_lp("cut.lp", "".join(lines[:5]))  # comment, Minimize, obj:, two terms
    with pytest.raises(PallError, match=r"cut\.lp: (truncated|SCIP read no constraints)"):
        read_instance(p)


def test_rejects_an_lp_keeping_part_of_its_constraints(smoke_dir, write_lp):
    text = (smoke_dir / "auction-smoke-s7.lp").read_text()
    heads = [m.start() for m in re.finditer(r"\n r\d+:", text)]
    p = write_lp("part.lp", text[: heads[len(heads) // 2] + 1])  # half the rows, cut between two
    with pytest.raises(PallError, match=r"part\.lp: truncated model file"):
        read_instance(p)


def test_rejects_an_lp_without_bounds_binaries_and_end(smoke_dir, write_lp):
    text = (smoke_dir / "facility-smoke-s7.lp").read_text()
    p = write_lp("noend.lp", text[: text.index("Bounds")])
    with pytest.raises(PallError, match=r"noend\.lp: truncated model file.*End"):
        read_instance(p)


def test_rejects_an_lp_without_constraints(write_lp):
    p = write_lp("free.lp", "Minimize\n obj: x + y\nBounds\n 0 <= x <= 1\nGenerals\n x\nEnd\n")
    with pytest.raises(PallError, match="no constraints"):
        read_instance(p)


def _mps(tmp_path):
    return generate("setcover", "smoke", 7, tmp_path, "mps").path


def test_generated_mps_names_the_problem_not_a_local_path(tmp_path):
    p = _mps(tmp_path)
    name_line = next(line for line in p.read_text().splitlines() if line.startswith("NAME"))
    assert name_line.split()[1] == "setcover-smoke-s7"
    assert str(tmp_path) not in p.read_text()
    assert read_instance(p).n == read_instance(generate("setcover", "smoke", 7, tmp_path).path).n


def test_rejects_a_truncated_mps(tmp_path, write_lp):
    lines = _lines(_mps(tmp_path))
    p = write_lp("cut.mps", "".join(lines[: len(lines) // 2]))
    with pytest.raises(PallError, match=r"cut\.mps: (truncated|SCIP read no constraints|cannot)"):
        read_instance(p)


def test_rejects_an_mps_column_naming_an_undeclared_row(tmp_path, write_lp):
    lines = _lines(_mps(tmp_path))
    i = next(k for k, line in enumerate(lines) if line.startswith("COLUMNS")) + 1
    fields = lines[i].split()
    lines[i] = lines[i].replace(fields[1], "nosuchrow", 1)
    p = write_lp("badrow.mps", "".join(lines))
    with pytest.raises(PallError, match=r"(nosuchrow|badrow\.mps)"):
        read_instance(p)


def test_rejects_malformed_mps(write_lp):
    p = write_lp("junk.mps", "NAME junk\nROWS\n N obj\nCOLUMNS\n x obj 1\nwhat is this\nENDATA\n")
    with pytest.raises(PallError, match=r"junk\.mps"):
        read_instance(p)


TINY_MPS = """NAME          tiny
ROWS
 N  obj
 G  c1
 L  c2
COLUMNS
    MARKER                 'MARKER'                 'INTORG'
    x         obj       1.0        c1        1.0
    x         c2        1.0
    y         obj       2.0        c1        1.0
    MARKER                 'MARKER'                 'INTEND'
RHS
    RHS       c1        1.0        c2        5.0
BOUNDS
 UP BND       x         10
 UP BND       y         10
ENDATA
"""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "x         obj       1.0",
            "x         obj       nan",
            "column 'x': objective coefficient nan",
        ),
        ("c1        1.0\n    MARKER", "c1        nan\n    MARKER", "row 'c1', column 'y': coeff"),
        ("c2        5.0", "c2        nan", "row 'c2': right-hand side nan"),
        ("c2        5.0", "c2        -inf", "row 'c2': right-hand side -inf"),
        (
            " UP BND       y         10",
            " UP BND       y         nan",
            "column 'y': upper bound nan",
        ),
        (
            " UP BND       y         10",
            " LO BND       y         inf",
            "column 'y': lower bound +inf",
        ),
    ],
)
def test_rejects_non_finite_numbers_naming_row_and_column(write_lp, old, new, message):
    """SCIP reads ``nan`` from an MPS file and then ignores its time limit (issue #46: a 3 s
    solve ran 400 s): such a model is one line naming the file and the row/column, before any
    solve."""
    assert old in TINY_MPS
    read_instance(write_lp("ok.mps", TINY_MPS))  # the unedited model is fine
    bad = write_lp("bad.mps", TINY_MPS.replace(old, new))
    with pytest.raises(PallError, match=re.escape(f"bad.mps: {message}")):
        read_instance(bad)


def test_symlink_loop_and_dangling_link_say_so(tmp_path):
    loop = tmp_path / "loop.lp"
    loop.symlink_to(tmp_path / "other.lp")
    (tmp_path / "other.lp").symlink_to(loop)
    with pytest.raises(PallError, match=r"loop\.lp: symlink loop"):
        read_instance(loop)
    dangling = tmp_path / "gone.lp"
    dangling.symlink_to(tmp_path / "deleted.lp")
    with pytest.raises(PallError, match=r"gone.lp: dangling symlink \(its target .*deleted.lp"):
        read_instance(dangling)
