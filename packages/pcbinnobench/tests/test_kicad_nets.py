"""Net names and hierarchical sheets as KiCad defines them, on a real KiCad 8 design.

``tests/data/kicad8_hier`` (written by its ``generate.py``) is a two-level hierarchy with a
local label, a global label, a power symbol, hierarchical labels and sheet pins; its board
names the nets as KiCad's "Update PCB from schematic" does (``/OUT``, ``VBUS``, ``GND``,
``/Power/VIN``, ``/Power/Filter/SENSE``, ``/Power/Filter/TAP``).
"""

import json
import os
import shutil
from pathlib import Path

import pytest
from pcbinnobench import design
from pcbinnobench.agents import DoNothingAgent, OracleAgent
from pcbinnobench.harness import run_episode
from pcbinnobench.tasks import load_tasks
from pcbinnobench.validators import validate

DATA = Path(__file__).parent / "data" / "kicad8_hier"
DESIGN = (
    "hier.kicad_sch",
    "power.kicad_sch",
    "filter.kicad_sch",
    "hier.kicad_pcb",
    "hier.kicad_pro",
)
KICAD_NETS = {
    "/OUT": {("R1", "1"), ("R2", "1")},
    "VBUS": {("R2", "2"), ("R5", "1")},
    "GND": {("R1", "2"), ("R3", "2"), ("R4", "2"), ("R7", "2")},
    "/Power/VIN": {("R3", "1"), ("R4", "1")},
    "/Power/Filter/SENSE": {("R5", "2"), ("R6", "1")},
    "/Power/Filter/TAP": {("R6", "2"), ("R7", "1")},
}


def _copy(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in DESIGN:
        shutil.copyfile(DATA / name, dest / name)
    return dest


def test_schematic_nets_carry_kicads_names_through_the_hierarchy():
    sch = design.load_schematic(DATA / "hier.kicad_sch")
    assert {k: set(v) for k, v in sch.nets.items()} == KICAD_NETS
    assert sch.sheets == 2
    assert sorted(sch.parts()) == [f"R{i}" for i in range(1, 8)]


def test_board_and_schematic_of_the_hierarchy_agree():
    board = design.load_board(DATA / "hier.kicad_pcb")
    by_net: dict[str, set] = {}
    for key, net in board.pad_nets().items():
        by_net.setdefault(net, set()).add(key)
    assert by_net == KICAD_NETS


def _task_set(root: Path, defect: bool = True) -> Path:
    """One task on the hierarchical design: R6 pad 1 was left on /Power/VIN on the board;
    the fix puts it back on /Power/Filter/SENSE (a net named in a sub-sub-sheet)."""
    truth = _copy(root / "hidden" / "hier_pad_net" / "ground_truth")
    original = _copy(root / "hidden" / "hier_pad_net" / "original")
    pcb = original / "hier.kicad_pcb"
    text = pcb.read_text(encoding="utf-8")
    start = text.index('(property "Reference" "R6"')
    pad = text.index('(pad "1"', start)
    net = text.index("(net ", pad)
    end = text.index(")", net) + 1
    vin = text[text.index("(net ", text.index('"/Power/VIN"') - 12) :]
    code = vin.split()[1]
    pcb.write_text(text[:net] + f'(net {code} "/Power/VIN")' + text[end:], encoding="utf-8")
    public = root / "tasks" / "hier_pad_net"
    shutil.copytree(original, public / "workspace")
    (public / "prompts").mkdir()
    (public / "prompts" / "objective.md").write_text("Fix the board net of the filter input.\n")
    (public / "prompts" / "guided.md").write_text("Put R6 pad 1 on /Power/Filter/SENSE.\n")
    (public / "task.json").write_text(
        json.dumps(
            {
                "task_id": "hier_pad_net",
                "title": "filter input net",
                "board": "hier",
                "kind": "fix_pad_net",
                "workspace": "workspace",
                "prompts": {"objective": "prompts/objective.md", "guided": "prompts/guided.md"},
            }
        )
    )
    hidden = root / "hidden" / "hier_pad_net"
    (hidden / "validators.json").write_text(
        json.dumps(
            {
                "task_id": "hier_pad_net",
                "project": "hier",
                "required_files": ["hier.kicad_pro", "hier.kicad_sch", "hier.kicad_pcb"],
                "changed": ["pcb"],
                "checks": [
                    {"kind": "pad_nets", "ref": "R6", "pads": {"1": "/Power/Filter/SENSE"}},
                    {"kind": "unchanged", "except": ["R6"]},
                    {"kind": "cross_artifact"},
                ],
            }
        )
    )
    (hidden / "solution.json").write_text(
        json.dumps(
            [
                {
                    "tool": "set_pad_net",
                    "args": {"ref": "R6", "pad": "1", "net": "/Power/Filter/SENSE"},
                }
            ]
        )
    )
    assert truth.is_dir()
    return root


def test_hierarchical_task_do_nothing_fails_and_oracle_passes(tmp_path):
    task = load_tasks(_task_set(tmp_path))[0]
    truth = validate(task.hidden / "ground_truth", task.hidden)
    assert [c.name for c in truth.failures()] == [], truth.failures()
    nothing = run_episode(task, DoNothingAgent(), "objective")
    oracle = run_episode(task, OracleAgent(task.solution()), "guided")
    failed = {c.name for c in nothing.result.failures()}
    assert not nothing.passed
    assert {"pad_nets:R6", "cross_artifact", "changed:pcb"} <= failed
    assert oracle.passed, oracle.result.failures()


def test_board_without_the_sheet_path_prefix_fails_the_cross_check(tmp_path):
    """A board that calls the local-label net "OUT" is not what KiCad writes ("/OUT")."""
    task = load_tasks(_task_set(tmp_path))[0]
    ws = _copy(tmp_path / "ws")
    pcb = ws / "hier.kicad_pcb"
    pcb.write_text(pcb.read_text(encoding="utf-8").replace('"/OUT"', '"OUT"'), encoding="utf-8")
    cross = next(c for c in validate(ws, task.hidden).checks if c.name == "cross_artifact")
    assert cross.status == "failed"
    assert "net /OUT is called OUT on the board" in cross.detail


def test_missing_sub_sheet_is_an_unparseable_schematic_naming_the_file(tmp_path):
    task = load_tasks(_task_set(tmp_path))[0]
    ws = _copy(tmp_path / "ws")
    (ws / "filter.kicad_sch").unlink()
    result = validate(ws, task.hidden)
    parse = next(c for c in result.checks if c.name == "parseable:hier.kicad_sch")
    assert parse.status == "failed"
    assert "filter.kicad_sch" in parse.detail
    with pytest.raises(design.DesignError, match=r"filter\.kicad_sch"):
        design.load_schematic(ws / "hier.kicad_sch")


def test_a_sheet_that_includes_itself_is_refused(tmp_path):
    """filter.kicad_sch given a copy of the sheet symbol that places filter.kicad_sch."""
    ws = _copy(tmp_path / "ws")
    power = (ws / "power.kicad_sch").read_text(encoding="utf-8")
    sheet_symbol = power[power.index("\t(sheet\n") : power.rstrip().rindex(")")]
    sub = ws / "filter.kicad_sch"
    sub.write_text(sub.read_text(encoding="utf-8").rstrip()[:-1] + sheet_symbol + ")\n")
    with pytest.raises(design.DesignError, match="includes itself"):
        design.load_schematic(ws / "hier.kicad_sch")


OFFICIAL = os.environ.get("PCBINNOBENCH_OFFICIAL")


@pytest.mark.slow
@pytest.mark.skipif(
    not OFFICIAL,
    reason="set PCBINNOBENCH_OFFICIAL to a checkout of github.com/Xiafyjck/pcbinnobench",
)
def test_official_designs_pass_the_cross_check():
    """Every board/schematic pair of the official subset (35 ground truths, 35 workspaces)
    agrees as KiCad names it, except three whose board holds parts the schematic lacks."""
    from pcbinnobench.validators import net_partition_diff

    inconsistent = {"analog_basic_ANA-MID-007_task_4", "analog_basic_ANA-OPAMP-003_task_4"}
    checked = 0
    for pcb in sorted(Path(OFFICIAL).rglob("*.kicad_pcb")):
        board = design.load_board(pcb)
        sch = design.load_schematic(pcb.with_suffix(".kicad_sch"))
        by_net: dict[str, set] = {}
        for key, net in board.pad_nets().items():
            by_net.setdefault(net, set()).add(key)
        diff = net_partition_diff(sch.nets, {k: frozenset(v) for k, v in by_net.items()})
        task = pcb.parent.name if pcb.parent.name != "workspace" else pcb.parent.parent.name
        checked += 1
        if task in inconsistent:
            continue
        assert diff == [], (pcb, diff[:3])
    assert checked == 70
