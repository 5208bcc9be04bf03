"""The CLI contract: help, the quick demo's results (every claim the issue names), bad input."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from minpath import __version__
from minpath.cli import main

from paperstack.records import load_results

CLAIMS = {
    "premise_raw_model_solves_task",
    "minpath_cuts_30pct",
    "minpath_keeps_accuracy",
    "minpath_beats_baselines_at_ratio",
    "minpath_beats_truncation",
    "minpath_beats_random_drop",
    "minpath_beats_tokenskip",
    "minpath_beats_length_budget",
}


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "bench", "compress", "traces"):
        assert command in out


def test_console_script_help_is_installed():
    script = shutil.which("minpath", path=str(Path(sys.executable).parent))
    assert script is not None, "the minpath console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    assert main(["demo", "--quick", "--no-progress", "--out", str(out)]) == 0
    return out


def test_demo_quick_writes_every_claim_the_issue_names(quick):
    results = load_results(quick / "results.json")  # validates and recomputes every claim
    assert results.manifest.package == "minpath"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    premise = "premise_raw_model_solves_task"
    for claim in results.claims:
        if claim.id != premise:
            assert claim.requires == (premise,)
    row = results.row("minpath", "accuracy", "seeds")
    assert sorted(row.seeds) == ["0", "1", "2"]  # per-seed values: claims are paired
    assert (quick / "report.md").read_text().startswith("# minpath")
