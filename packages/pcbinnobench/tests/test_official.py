"""``pcbinnobench import``: the official subset's task layout read into a task set.

The fixture lays the KiCad 8 hierarchical design of ``tests/data/kicad8_hier`` out the way the
official repository does (``tasks/<id>/``, ``evaluation/ground_truths/<id>/``,
``validators/tasks/<id>.py`` with a ``TaskSpec``); the task: R6 pad 1 was left on
``/Power/VIN`` on the board, the expert put it back on ``/Power/Filter/SENSE``.
"""

import json
import shutil
from pathlib import Path

import pytest
from pcbinnobench.agents import DoNothingAgent, OracleAgent
from pcbinnobench.cli import main
from pcbinnobench.harness import Budget, run_episode
from pcbinnobench.official import import_official, read_official
from pcbinnobench.tasks import load_tasks

DATA = Path(__file__).parent / "data" / "kicad8_hier"
FILES = [
    "hier.kicad_sch",
    "power.kicad_sch",
    "filter.kicad_sch",
    "hier.kicad_pcb",
    "hier.kicad_pro",
]
TID = "analog_basic_HIER-001_task_1"
SPEC = f"""from validators.common import TaskSpec, validate_against_ground_truth

SPEC = TaskSpec(
    task_id={TID!r},
    project_files={FILES!r},
    golden_hashes={{}},
    source_hashes={{}},
    schematic_file='hier.kicad_sch',
    pcb_file='hier.kicad_pcb',
    kicad_cli_checks=('drc', 'netlist_export'),
    position_checks={{'R6': {{'footprint': 'Resistor_SMD:R_0603_1608Metric',
                               'x': 135.0, 'y': 100.0, 'rotation': 90.0}}}},
    netlist_checks={{'R6': {{'1': '/Power/Filter/SENSE', '2': '/Power/Filter/TAP'}}}},
)

def validate(workspace_dir, repo_root=None):
    return validate_against_ground_truth(SPEC, workspace_dir, repo_root=repo_root)
"""


def official_checkout(root: Path) -> Path:
    truth = root / "evaluation" / "ground_truths" / TID
    ws = root / "tasks" / TID / "workspace"
    for d in (truth, ws):
        d.mkdir(parents=True)
        for f in FILES:
            shutil.copyfile(DATA / f, d / f)
    pcb = ws / "hier.kicad_pcb"
    text = pcb.read_text(encoding="utf-8")
    pad = text.index('(pad "1"', text.index('(property "Reference" "R6"'))
    net = text.index("(net ", pad)
    end = text.index(")", net) + 1
    pcb.write_text(text[:net] + '(net 1 "/Power/VIN")' + text[end:], encoding="utf-8")
    (ws / "datasheets").mkdir()
    (ws / "datasheets" / "notes.txt").write_text("R6 filters the sense line.\n")
    folder = root / "tasks" / TID
    (folder / "prompt.md").write_text("Review the sense filter and fix the design.\n")
    (folder / "prompt_with_guidance.md").write_text("Connect R6 pad 1 to /Power/Filter/SENSE.\n")
    (folder / "task.json").write_text(
        json.dumps(
            {
                "task_id": TID,
                "domain": "Analog",
                "difficulty_tier": "Hard near-miss",
                "prompt": "prompt.md",
                "prompt_with_guidance": "prompt_with_guidance.md",
                "workspace": "workspace",
                "hidden_ground_truth": f"evaluation/ground_truths/{TID}",
                "validator": f"validators/tasks/{TID.lower()}.py",
                "mineru_datasheets": [],
            }
        )
    )
    (root / "validators" / "tasks").mkdir(parents=True)
    (root / "validators" / "tasks" / f"{TID.lower()}.py").write_text(SPEC)
    return root


def test_import_reads_the_official_layout_and_judges_by_meaning(tmp_path):
    root = official_checkout(tmp_path / "official")
    [result] = import_official(root, tmp_path / "set")
    assert result.truth_passes
    # the fixture's board is not routed: our DRC fails the expert's result, so it is left out
    assert set(result.dropped) == {"drc"}
    assert "unconnected" in result.dropped["drc"]
    task = load_tasks(tmp_path / "set")[0]
    assert task.id == TID
    assert "Connect R6 pad 1" in task.prompt("guided")
    assert (task.workspace / "datasheets" / "notes.txt").is_file()
    spec = json.loads((task.hidden / "validators.json").read_text())
    kinds = [c["kind"] for c in spec["checks"]]
    assert spec["changed"] == ["pcb"]
    for kind in (
        "component",
        "pad_nets",
        "netlist_matches_truth",
        "unchanged",
        "cross_artifact",
        "kicad_cli_drc",
    ):
        assert kind in kinds
    nothing = run_episode(task, DoNothingAgent(), "objective")
    oracle = run_episode(task, OracleAgent(task.solution()), "guided", Budget(max_tokens=10**7))
    assert not nothing.passed
    assert {"changed:pcb", "pad_nets:R6", "cross_artifact"} <= {
        c.name for c in nothing.result.failures()
    }
    assert oracle.passed, oracle.result.failures()


def test_import_command_writes_a_task_set(tmp_path, capsys):
    root = official_checkout(tmp_path / "official")
    assert main(["import", str(root), "--out", str(tmp_path / "set")]) == 0
    out = capsys.readouterr().out
    assert f"{TID}: " in out
    assert "ground truth passes" in out
    assert "as shipped fails" in out
    assert main(["tasks", "--tasks", str(tmp_path / "set")]) == 0


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda r: (r / "tasks" / TID / "task.json").unlink(), "task.json"),
        (lambda r: (r / "tasks" / TID / "task.json").write_text("{"), "task.json"),
        (lambda r: (r / "tasks" / TID / "prompt.md").unlink(), "prompt.md"),
        (
            lambda r: (r / "validators" / "tasks" / f"{TID.lower()}.py").write_text("x = 1\n"),
            f"{TID.lower()}.py",
        ),
        (lambda r: shutil.rmtree(r / "evaluation"), TID),
        (lambda r: (r / "tasks" / TID / "workspace" / "hier.kicad_pcb").unlink(), "hier.kicad_pcb"),
        (lambda r: shutil.rmtree(r / "tasks"), "tasks"),
    ],
)
def test_bad_layout_is_one_line_naming_the_file(tmp_path, capsys, damage, named):
    root = official_checkout(tmp_path / "official")
    damage(root)
    with pytest.raises(SystemExit) as exc:
        main(["import", str(root), "--out", str(tmp_path / "set")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert named in err
    assert not (tmp_path / "set").exists()


def test_read_official_never_executes_the_validator_module(tmp_path):
    root = official_checkout(tmp_path / "official")
    module = root / "validators" / "tasks" / f"{TID.lower()}.py"
    marker = tmp_path / "executed"
    module.write_text(f"open({str(marker)!r}, 'w').close()\n" + module.read_text())
    [task] = read_official(root)
    assert task.spec["pcb_file"] == "hier.kicad_pcb"
    assert not marker.exists()
