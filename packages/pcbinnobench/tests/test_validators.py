"""Validators judge meaning: each task can fail and pass; defects fail; bytes do not matter."""

import json
import shutil

import pytest
from pcbinnobench import drc, validators
from pcbinnobench.agents import DoNothingAgent, OracleAgent
from pcbinnobench.audit import MUTANTS, audit_task, ground_truth_workspace
from pcbinnobench.errors import PcbBenchError
from pcbinnobench.harness import run_episode
from pcbinnobench.validators import net_partition_diff, validate


def test_every_task_fails_untouched_and_passes_with_the_oracle(tasks):
    for t in tasks:
        nothing = run_episode(t, DoNothingAgent(), "objective")
        oracle = run_episode(t, OracleAgent(t.solution()), "guided")
        assert not nothing.passed, t.id
        assert nothing.result.failures(), t.id
        assert oracle.passed, (t.id, [c for c in oracle.result.failures()])


def test_relayout_passes_and_every_mutant_fails(tasks):
    for t in (tasks[0], tasks[5]):
        audit = audit_task(t)
        assert audit.truth.passed
        assert audit.relayout.passed
        assert audit.bytes_changed
        assert set(audit.mutants) == set(MUTANTS)
        assert all(audit.mutants_caught.values()), audit.mutants_caught


def test_no_unrelated_change_names_the_moved_part(tmp_path, task):
    from pcbinnobench.audit import _nudge

    ws = ground_truth_workspace(task, tmp_path / "ws")
    _nudge(task, ws)
    result = validate(ws, task.hidden)
    unchanged = next(c for c in result.checks if c.name == "unchanged")
    assert unchanged.status == "failed"
    assert "moved" in unchanged.detail


def test_cross_artifact_nets_are_compared_as_graphs():
    sch = {
        "GND": frozenset({("C1", "2"), ("U1", "2")}),
        "VIN": frozenset({("C1", "1"), ("U1", "1")}),
    }
    same = {
        "GND": frozenset({("U1", "2"), ("C1", "2")}),
        "VIN": frozenset({("U1", "1"), ("C1", "1")}),
    }
    assert net_partition_diff(sch, same) == []
    swapped = {
        "GND": frozenset({("C1", "1"), ("U1", "2")}),
        "VIN": frozenset({("C1", "2"), ("U1", "1")}),
    }
    assert net_partition_diff(sch, swapped)
    renamed = {"GROUND": same["GND"], "VIN": same["VIN"]}
    assert any("called GROUND" in d for d in net_partition_diff(sch, renamed))
    auto = {"Net-(C1-Pad2)": same["GND"], "VIN": same["VIN"]}
    assert any("GND" in d for d in net_partition_diff(sch, auto))


def test_missing_kicad_cli_is_skipped_never_passed(monkeypatch, tmp_path, task):
    monkeypatch.setattr(drc, "find_kicad_cli", lambda: None)
    ws = ground_truth_workspace(task, tmp_path / "ws")
    result = validate(ws, task.hidden)
    cli = [c for c in result.checks if c.name.startswith("kicad_cli")]
    assert cli
    assert all(c.status == "skipped" for c in cli)
    assert not result.complete
    assert result.passed  # the checks that ran passed ...
    only = validators.ValidationResult("t", [c for c in cli])
    assert not only.passed  # ... but skipped checks alone never make a pass


def test_agent_that_deletes_files_fails_cleanly(tmp_path, task):
    ws = ground_truth_workspace(task, tmp_path / "ws")
    for f in ws.glob("*.kicad_*"):
        f.unlink()
    result = validate(ws, task.hidden)
    assert not result.passed
    assert any(c.name.startswith("required_file") and c.status == "failed" for c in result.checks)
    shutil.rmtree(ws)
    assert not validate(ws, task.hidden).passed


def test_drc_subset_finds_a_clearance_violation(tmp_path, task):
    from pcbinnobench.audit import _short

    ws = ground_truth_workspace(task, tmp_path / "ws")
    board_file = next(ws.glob("*.kicad_pcb"))
    from pcbinnobench import design

    clean = drc.run_drc(design.load_board(board_file), 0.2)
    assert not clean.clearance_violations
    assert clean.unconnected == 0
    _short(task, ws)
    dirty = drc.run_drc(design.load_board(board_file), 0.2)
    assert dirty.clearance_violations


def test_a_bad_validator_spec_is_one_error(tmp_path, task):
    hidden = tmp_path / "hidden"
    shutil.copytree(task.hidden, hidden)
    spec = json.loads((hidden / "validators.json").read_text())
    spec["checks"].append({"kind": "astrology"})
    (hidden / "validators.json").write_text(json.dumps(spec))
    with pytest.raises(PcbBenchError, match="unknown kind"):
        validate(task.workspace, hidden)
    (hidden / "validators.json").write_text("{")
    with pytest.raises(PcbBenchError, match="not JSON"):
        validate(task.workspace, hidden)


def test_an_installed_kicad_cli_is_run_and_its_errors_fail(monkeypatch, tmp_path, task):
    fake = tmp_path / "kicad-cli"
    fake.write_text(
        "#!/bin/sh\n"
        'while [ "$1" != "--output" ]; do shift; done\n'
        'echo \'{"violations": [{"severity": "error"}, {"severity": "warning"}]}\' > "$2"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PCBINNOBENCH_KICAD_CLI", str(fake))
    ws = ground_truth_workspace(task, tmp_path / "ws")
    result = validate(ws, task.hidden)
    cli = {c.name: c for c in result.checks if c.name.startswith("kicad_cli")}
    assert cli["kicad_cli_drc"].status == "failed"
    assert "1 error" in cli["kicad_cli_drc"].detail
    assert not result.passed
