"""Auditing the validators themselves: meaning-preserving rewrites pass, defects fail.

The public PCBInnoBench subset judges by SHA-256 equality with golden files, so a design that
KiCad would write differently (another float format, another indentation) fails while it is
correct. These validators judge meaning; this module measures that on every task:

- :func:`relayout` rewrites a file without changing what it means: the whole s-expression on
  one line, every integer written as a decimal (``105`` -> ``105.0``), so every byte moves;
  the expert's ground truth rewritten this way must still pass;
- :data:`MUTANTS` are small defects applied to the ground truth, each of the kind an agent
  makes: an unrelated part nudged 1 mm, an unrelated part's value changed in both files, a
  pad reassigned to another net on the board only, a copper short across an IC's pads, the
  schematic deleted, the board truncated, a hidden file copied into the workspace. Every
  mutant must fail at least one check.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pcbinnobench import design, edits, sexpr
from pcbinnobench.sexpr import Node
from pcbinnobench.tasks import Task
from pcbinnobench.validators import ValidationResult, validate

__all__ = ["MUTANTS", "AuditResult", "audit_task", "ground_truth_workspace", "relayout"]


def _flat(node: Any) -> str:
    if isinstance(node, list):
        return "(" + " ".join(_flat(x) for x in node) + ")"
    if isinstance(node, sexpr.Integer) and not isinstance(node, bool):
        return sexpr.format_number(float(node)) + ".0" if "." not in str(node) else str(node)
    return sexpr.node_text(node)


def relayout(path: Path) -> None:
    """Rewrite a KiCad file in another byte layout with the same meaning (see module doc)."""
    tree = sexpr.loads(path.read_text(encoding="utf-8"), source=str(path))
    path.write_text(_flat(tree) + "\n", encoding="utf-8")


def ground_truth_workspace(task: Task, dest: Path) -> Path:
    """A copy of the task's workspace with the expert's result in place of its design files."""
    shutil.copytree(task.workspace, dest)
    for f in (task.hidden / "ground_truth").iterdir():
        shutil.copyfile(f, dest / f.name)
    return dest


def _project(ws: Path) -> str:
    return next(ws.glob("*.kicad_pro")).stem


def _untouched(task: Task, ws: Path) -> list[str]:
    spec = json.loads((task.hidden / "validators.json").read_text(encoding="utf-8"))
    allowed = set()
    for check in spec["checks"]:
        if check.get("kind") == "unchanged":
            allowed = set(check.get("except", []))
    board = design.load_board(ws / f"{_project(ws)}.kicad_pcb")
    return sorted(r for r in board.footprints if r not in allowed)


def _edit_pcb(ws: Path, fn: Callable[[Node], None]) -> None:
    path = ws / f"{_project(ws)}.kicad_pcb"
    tree = design.read_tree(path, "kicad_pcb")
    fn(tree)
    path.write_text(sexpr.dumps(tree), encoding="utf-8")


def _nudge(task: Task, ws: Path) -> None:
    ref = _untouched(task, ws)[0]
    board = design.load_board(ws / f"{_project(ws)}.kicad_pcb")
    fp = board.footprint(ref)
    _edit_pcb(ws, lambda t: edits.place(t, ref, fp.x + 1.0, fp.y, fp.rotation))


def _revalue(task: Task, ws: Path) -> None:
    ref = _untouched(task, ws)[0]
    name = _project(ws)
    pcb_path, sch_path = ws / f"{name}.kicad_pcb", ws / f"{name}.kicad_sch"
    pcb, sch = design.read_tree(pcb_path, "kicad_pcb"), design.read_tree(sch_path, "kicad_sch")
    edits.set_value(pcb, sch, ref, "47k")
    pcb_path.write_text(sexpr.dumps(pcb), encoding="utf-8")
    sch_path.write_text(sexpr.dumps(sch), encoding="utf-8")


def _wrong_net(task: Task, ws: Path) -> None:
    board = design.load_board(ws / f"{_project(ws)}.kicad_pcb")
    ref = _untouched(task, ws)[0]
    pad = board.footprint(ref).pads[0]
    other = next(n for n in sorted(board.nets) if n and n != pad.net)
    _edit_pcb(ws, lambda t: edits.set_pad_net(t, ref, pad.number, other))


def _short(task: Task, ws: Path) -> None:
    board = design.load_board(ws / f"{_project(ws)}.kicad_pcb")
    fp = next(f for f in board.footprints.values() if f.ref.startswith("U"))
    a = next(p for p in fp.pads if p.net)
    b = next(p for p in fp.pads if p.net and p.net != a.net)

    def short(tree: Node) -> None:
        edits.add_track(tree, a.net, [[a.x, a.y], [b.x, b.y]], "F.Cu")

    _edit_pcb(ws, short)


def _delete_sch(task: Task, ws: Path) -> None:
    (ws / f"{_project(ws)}.kicad_sch").unlink()


def _truncate_pcb(task: Task, ws: Path) -> None:
    path = ws / f"{_project(ws)}.kicad_pcb"
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2], encoding="utf-8")


def _leak(task: Task, ws: Path) -> None:
    shutil.copyfile(task.hidden / "solution.json", ws / "references" / "solution.json")


#: name -> defect applied to a ground-truth workspace; each must fail a check
MUTANTS: dict[str, Callable[[Task, Path], None]] = {
    "nudge_unrelated_part": _nudge,
    "revalue_unrelated_part": _revalue,
    "board_only_net_change": _wrong_net,
    "copper_short": _short,
    "schematic_deleted": _delete_sch,
    "board_truncated": _truncate_pcb,
    "hidden_file_copied": _leak,
}


@dataclass
class AuditResult:
    task_id: str
    truth: ValidationResult
    relayout: ValidationResult
    bytes_changed: bool
    mutants: dict[str, ValidationResult]

    @property
    def mutants_caught(self) -> dict[str, bool]:
        return {k: not v.passed for k, v in self.mutants.items()}


def audit_task(task: Task) -> AuditResult:
    """Validate the task's ground truth, its relayout and every mutant."""
    with tempfile.TemporaryDirectory(prefix="pcbinnobench-audit-") as tmp:
        base = Path(tmp)
        truth_ws = ground_truth_workspace(task, base / "truth")
        truth = validate(truth_ws, task.hidden)
        lay_ws = ground_truth_workspace(task, base / "relayout")
        before = {
            p.name: p.read_bytes() for p in lay_ws.glob("*.kicad_*") if p.suffix != ".kicad_pro"
        }
        for name in before:
            relayout(lay_ws / name)
        changed = all((lay_ws / k).read_bytes() != v for k, v in before.items())
        relaid = validate(lay_ws, task.hidden)
        mutants = {}
        for i, (name, mutate) in enumerate(MUTANTS.items()):
            ws = ground_truth_workspace(task, base / f"mutant{i}")
            mutate(task, ws)
            mutants[name] = validate(ws, task.hidden)
    return AuditResult(task.id, truth, relaid, changed, mutants)
