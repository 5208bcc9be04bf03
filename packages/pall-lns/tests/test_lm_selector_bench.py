"""benchmarks/lm_selector.py (issue #53, item 5) in its --tiny version: the three stages run,
the claims are exactly the declared ones (no deviation from preregistration.toml), a rerun
reuses every finished oracle instance and online run."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "lm_selector.py"


@pytest.mark.slow
def test_lm_selector_tiny(tmp_path):
    spec = importlib.util.spec_from_file_location("pall_lm_selector", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main([str(tmp_path), "--tiny"])
    assert res["deviations"] == []
    decl, _ = mod.declaration()
    assert {c["id"] for c in res["claims"]} == set(decl.claims)
    assert res["training"]["states"]["grown"] > 0
    runs = sorted((tmp_path / "runs").glob("*.json"))
    assert len(runs) == len(mod.JUDGE_SEEDS) * len(mod.JUDGE_FAMILIES) * len(mod.METHODS)
    stamps = {p.name: p.stat().st_mtime_ns for p in runs}
    again = mod.main([str(tmp_path), "--tiny"])
    assert {p.name: p.stat().st_mtime_ns for p in runs} == stamps
    assert again["rows"] == res["rows"]
