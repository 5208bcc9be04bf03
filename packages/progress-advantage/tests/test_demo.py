"""The real `demo --quick`: results.json validates and holds the identity claims (slow)."""

import pytest
from progress_advantage import __version__
from progress_advantage.cli import main

from paperstack.records import load_results


@pytest.mark.slow
def test_demo_quick_writes_checked_results(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    results = load_results(tmp_path / "results.json")  # validates and recomputes every claim
    assert results.manifest.version == __version__
    assert {"exact_identity", "pa_matches_exact_advantage"} <= {c.id for c in results.claims}
    assert (tmp_path / "report.md").read_text().startswith("# progress-advantage")
