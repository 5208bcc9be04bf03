"""benchmarks/scaling.py (issue #53, item 4) on its smoke size: every point written, a rerun
skips finished points (resumable), the summary's reference and time-to-gap are consistent."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "scaling.py"


@pytest.fixture(scope="module")
def scaling():
    spec = importlib.util.spec_from_file_location("pall_scaling", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_scaling_points_resume_and_summary(scaling, tmp_path):
    args = [
        str(tmp_path),
        "--sizes",
        "smoke",
        "--families",
        "setcover",
        "--methods",
        "scip,pall",
        "--seeds",
        "smoke=1",
        "--time-limits",
        "smoke=1",
    ]
    scaling.main(args)
    pts = tmp_path / "points"
    names = sorted(p.name for p in pts.glob("*.json"))
    assert names == [
        "setcover-smoke-s1000.gen.json",
        "setcover-smoke-s1000.pall.json",
        "setcover-smoke-s1000.scip.json",
    ]
    assert not list((tmp_path / "work").glob("*.lp"))  # the instance is removed once done
    data = json.loads((tmp_path / "scaling.json").read_text())
    rows = {r["method"]: r for r in data["rows"]}
    assert set(rows) == {"pall", "scip"}
    ref = min(r["final"] for r in rows.values())  # set cover minimises
    for r in rows.values():
        assert r["reference"] == ref
        assert r["peak_rss_mb"] > 10
        # the method that found the reference reaches every gap; 1% is never before 5%
        if r["final"] == ref:
            assert r["final_gap"] == 0
            assert r["time_to_0.01"] is not None
        if r["time_to_0.01"] is not None:
            assert r["time_to_0.05"] <= r["time_to_0.01"]
        assert (r["time_to_0.01"] is None) == (r["final_gap"] > 0.01)
    assert "| setcover | smoke |" in (tmp_path / "scaling.md").read_text()
    # a killed run keeps its finished points: only the missing one is run again
    stamp = (pts / "setcover-smoke-s1000.scip.json").stat().st_mtime_ns
    (pts / "setcover-smoke-s1000.pall.json").unlink()
    scaling.main(args)
    assert (pts / "setcover-smoke-s1000.scip.json").stat().st_mtime_ns == stamp
    assert (pts / "setcover-smoke-s1000.pall.json").is_file()
