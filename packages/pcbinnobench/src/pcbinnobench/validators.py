"""Validators that judge what a design means, never its bytes.

A task's hidden evaluation package holds ``validators.json`` (the checks), ``original/`` (the
workspace as shipped) and ``ground_truth/`` (the expert's result, for reference and tests:
no check compares bytes with it). :func:`validate` runs, on an agent's final workspace:

- **structural**: the workspace exists, every project file is there and parses as KiCad 8/9,
  no file of the hidden package is in it, and the files the task must change did change
  (in meaning: their trees differ from the original's);
- **task-specific**: positions and pad-to-pad distances (a decoupling capacitor's pad to its
  IC's supply pad), pad-to-net maps on the board, pin-to-net maps in the schematic,
  footprints, values and fields, and *no unrelated change*: every reference the task does
  not name keeps its place, rotation, footprint, value and nets;
- **cross-artifact**: schematic references, values and footprints equal the board's, and the
  schematic's nets equal the board's pad nets, compared as graphs (the partitions of pins
  into nets, plus the names of named nets, named as KiCad names them: ``/OUT`` for a local
  label, ``/Power/VIN`` in a sub-sheet, ``GND`` for a power or global net; sub-sheets are
  followed, see :func:`pcbinnobench.design.schematic_from_tree`);
- **DRC**: the pure-Python clearance and unconnected-pad rules (:mod:`pcbinnobench.drc`);
- **kicad-cli** DRC/ERC: run where installed; ``skipped`` where not, and a skipped check is
  reported as skipped, never as passed.

``passed`` is all checks that ran passed; ``complete`` says whether any was skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from pcbinnobench import design, drc, sexpr
from pcbinnobench.design import Board, Schematic
from pcbinnobench.errors import PcbBenchError

__all__ = [
    "FAMILIES",
    "FAMILY_ORDER",
    "Check",
    "ValidationResult",
    "net_partition_diff",
    "validate",
]

#: check name prefix -> family, for the per-validator breakdown
FAMILIES = {
    "workspace_exists": "structural",
    "required_file": "structural",
    "parseable": "structural",
    "hidden_files_absent": "structural",
    "changed": "structural",
    "pad_distance": "task",
    "pad_nets": "task",
    "pin_nets": "task",
    "component": "task",
    "sch_field": "task",
    "unchanged": "task",
    "position": "task",
    "netlist_matches_truth": "task",
    "cross_artifact": "cross_artifact",
    "drc": "drc",
    "kicad_cli_drc": "kicad_cli",
    "kicad_cli_erc": "kicad_cli",
}
#: the families in report order
FAMILY_ORDER = ("structural", "task", "cross_artifact", "drc", "kicad_cli")
HIDDEN_NAMES = {"validators.json", "solution.json"}
HIDDEN_DIRS = {"ground_truth", "original", "hidden", "evaluation"}
POSITION_TOL = 0.01  # mm: an untouched footprint has not moved
ROTATION_TOL = 0.1  # degrees


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # passed, failed, skipped
    detail: str = ""

    @property
    def family(self) -> str:
        return FAMILIES.get(self.name.split(":", 1)[0], "task")


@dataclass
class ValidationResult:
    task_id: str
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        ran = [c for c in self.checks if c.status != "skipped"]
        return bool(ran) and all(c.status == "passed" for c in ran)

    @property
    def complete(self) -> bool:
        return all(c.status != "skipped" for c in self.checks)

    @property
    def skipped(self) -> list[Check]:
        return [c for c in self.checks if c.status == "skipped"]

    def family_passed(self) -> dict[str, bool]:
        out: dict[str, bool] = {}
        for c in self.checks:
            if c.status == "skipped":
                continue
            out[c.family] = out.get(c.family, True) and c.status == "passed"
        return out

    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "failed"]

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "passed": self.passed,
            "complete": self.complete,
            "checks": [
                {"name": c.name, "status": c.status, "detail": c.detail} for c in self.checks
            ],
        }


def _ok(name: str, good: bool, detail: str = "") -> Check:
    return Check(name, "passed" if good else "failed", detail)


def load_spec(hidden: Path) -> dict[str, Any]:
    path = hidden / "validators.json"
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PcbBenchError(f"{path}: no validator spec (is this a hidden task package?)") from None
    except ValueError as exc:
        raise PcbBenchError(f"{path}: not JSON ({exc})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("checks"), list):
        raise PcbBenchError(f"{path}: needs a 'checks' list")
    return spec


def _canonical(tree: Any) -> Any:
    if isinstance(tree, list):
        return [_canonical(x) for x in tree]
    if isinstance(tree, (int, float)) and not isinstance(tree, bool):
        return round(float(tree), 6)
    return ("sym", str(tree.value())) if isinstance(tree, sexpr.Symbol) else tree


def validate(workspace: str | Path, hidden: str | Path) -> ValidationResult:
    """Every check of the task's spec on ``workspace``; never raises on a bad workspace
    (a missing, unparseable or deleted file is a failed check), only on a bad spec."""
    ws, hid = Path(workspace), Path(hidden)
    spec = load_spec(hid)
    result = ValidationResult(str(spec.get("task_id", hid.name)))
    add = result.checks.append
    if not ws.is_dir():
        add(_ok("workspace_exists", False, f"{ws} is not a directory"))
        return result
    add(_ok("workspace_exists", True))
    project = str(spec["project"])
    files = {
        k: ws / f"{project}.{ext}"
        for k, ext in (("pro", "kicad_pro"), ("sch", "kicad_sch"), ("pcb", "kicad_pcb"))
    }
    for name in spec.get("required_files", []):
        add(_ok(f"required_file:{name}", (ws / name).is_file()))
    trees: dict[str, Any] = {}
    board: Board | None = None
    sch: Schematic | None = None
    for kind, path in files.items():
        if not path.is_file():
            add(_ok(f"parseable:{path.name}", False, "missing"))
            continue
        try:
            if kind == "pro":
                json.loads(path.read_text(encoding="utf-8"))
            elif kind == "pcb":
                trees[kind] = design.read_tree(path, "kicad_pcb")
                board = design.board_from_tree(trees[kind], path.name)
            else:
                trees[kind] = design.read_tree(path, "kicad_sch")
                sch = design.schematic_from_tree(trees[kind], path.name, directory=ws)
            add(_ok(f"parseable:{path.name}", True))
        except (PcbBenchError, ValueError, UnicodeDecodeError) as exc:
            add(_ok(f"parseable:{path.name}", False, str(exc)[:300]))
    leaked = sorted(
        p.relative_to(ws).as_posix()
        for p in ws.rglob("*")
        if p.name in HIDDEN_NAMES or (p.is_dir() and p.name in HIDDEN_DIRS)
    )
    add(_ok("hidden_files_absent", not leaked, ", ".join(leaked)))
    orig_dir = hid / "original"
    orig_board = design.load_board(orig_dir / f"{project}.kicad_pcb")
    orig_sch = design.load_schematic(orig_dir / f"{project}.kicad_sch")
    for kind in spec.get("changed", []):
        if str(kind).startswith("file:"):  # any project file, e.g. a sub-sheet
            add(_changed_file(ws, orig_dir, str(kind)[5:]))
            continue
        ext = {"pcb": "kicad_pcb", "sch": "kicad_sch"}[kind]
        if kind not in trees:
            add(_ok(f"changed:{kind}", False, "file missing or unparseable"))
            continue
        before = design.read_tree(orig_dir / f"{project}.{ext}", ext)
        add(
            _ok(
                f"changed:{kind}",
                _canonical(trees[kind]) != _canonical(before),
                "unchanged in meaning" if _canonical(trees[kind]) == _canonical(before) else "",
            )
        )
    context = _Context(ws, files, board, sch, orig_board, orig_sch, hid)
    for i, check in enumerate(spec["checks"]):
        check_kind = check.get("kind") if isinstance(check, dict) else None
        runner = _RUNNERS.get(str(check_kind))
        if runner is None:
            raise PcbBenchError(
                f"{hid / 'validators.json'}: check {i} has unknown kind {check_kind!r}"
            )
        try:
            add(runner(context, check))
        except PcbBenchError as exc:
            add(Check(check_name(check), "failed", str(exc)[:300]))
    return result


@dataclass
class _Context:
    ws: Path
    files: dict[str, Path]
    board: Board | None
    sch: Schematic | None
    orig_board: Board
    orig_sch: Schematic
    hidden: Path

    def need_board(self) -> Board:
        if self.board is None:
            raise PcbBenchError("no readable board")
        return self.board

    def need_sch(self) -> Schematic:
        if self.sch is None:
            raise PcbBenchError("no readable schematic")
        return self.sch


def _changed_file(ws: Path, orig_dir: Path, rel: str) -> Check:
    """``changed:file:<path>``: a file the task must change differs from the original in
    meaning (a KiCad file's tree), or in bytes for any other file."""
    name = f"changed:{rel}"
    new, old = ws / rel, orig_dir / rel
    if not new.is_file():
        return _ok(name, False, "file missing")
    kind = {".kicad_sch": "kicad_sch", ".kicad_pcb": "kicad_pcb"}.get(new.suffix)
    if kind is None:
        return _ok(name, new.read_bytes() != old.read_bytes(), "unchanged")
    try:
        same = _canonical(design.read_tree(new, kind)) == _canonical(design.read_tree(old, kind))
    except PcbBenchError as exc:
        return _ok(name, False, str(exc)[:300])
    return _ok(name, not same, "unchanged in meaning" if same else "")


def check_name(check: dict[str, Any]) -> str:
    kind = str(check.get("kind"))
    ref = check.get("ref") or "/".join(map(str, check.get("a", []) + check.get("b", [])))
    return f"{kind}:{ref}" if ref else kind


def _pad_distance(c: _Context, check: dict[str, Any]) -> Check:
    board = c.need_board()
    a = board.footprint(check["a"][0]).pad(str(check["a"][1]))
    b = board.footprint(check["b"][0]).pad(str(check["b"][1]))
    d = math.hypot(a.x - b.x, a.y - b.y)
    limit = float(check["max_mm"])
    return _ok(check_name(check), d <= limit, f"{d:.2f} mm (limit {limit:g} mm)")


def _pad_nets(c: _Context, check: dict[str, Any]) -> Check:
    fp = c.need_board().footprint(check["ref"])
    bad = [
        f"{p}: {fp.pad(p).net or '-'} != {net}"
        for p, net in check["pads"].items()
        if fp.pad(p).net != net
    ]
    return _ok(check_name(check), not bad, "; ".join(bad))


def _pin_nets(c: _Context, check: dict[str, Any]) -> Check:
    sch = c.need_sch()
    sch.symbol(check["ref"])
    nets = sch.pin_nets()
    bad = [
        f"{p}: {nets.get((check['ref'], p), '-')} != {net}"
        for p, net in check["pins"].items()
        if nets.get((check["ref"], p)) != net
    ]
    return _ok(check_name(check), not bad, "; ".join(bad))


def _component(c: _Context, check: dict[str, Any]) -> Check:
    fp = c.need_board().footprint(check["ref"])
    bad = []
    if "footprint" in check and fp.lib_id != check["footprint"]:
        bad.append(f"footprint {fp.lib_id}")
    if "value" in check and fp.value != check["value"]:
        bad.append(f"value {fp.value}")
    if "near" in check:
        d = math.hypot(fp.x - check["near"][0], fp.y - check["near"][1])
        if d > float(check.get("tol_mm", 0.5)):
            bad.append(f"{d:.2f} mm from ({check['near'][0]}, {check['near'][1]})")
    if "rotation" in check:
        off = abs((fp.rotation - float(check["rotation"]) + 180) % 360 - 180)
        if off > float(check.get("rot_tol_deg", ROTATION_TOL)):
            bad.append(f"rotation {fp.rotation:g} != {check['rotation']}")
    return _ok(check_name(check), not bad, "; ".join(bad))


def _netlist_matches_truth(c: _Context, check: dict[str, Any]) -> Check:
    """The schematic's netlist (every sheet) equals the ground truth's: the same parts with
    the same values and footprints, the same partition of pins into nets and the same names
    of named nets. This is what the official subset's ``netlist_export`` check means, without
    its hash of kicad-cli's export (which also changes with timestamps and sheet order)."""
    sch = c.need_sch()
    root = c.hidden / "ground_truth" / c.files["sch"].name
    truth = design.load_schematic(root)
    diffs = []
    mine, theirs = sch.parts(), truth.parts()
    diffs += [f"{r} missing" for r in sorted(set(theirs) - set(mine))]
    diffs += [f"{r} not in the ground truth" for r in sorted(set(mine) - set(theirs))]
    for ref in sorted(set(mine) & set(theirs)):
        a, b = mine[ref], theirs[ref]
        if (a.value, a.footprint, a.lib_id) != (b.value, b.footprint, b.lib_id):
            diffs.append(f"{ref} is {a.lib_id} {a.value} {a.footprint}, expected "
                         f"{b.lib_id} {b.value} {b.footprint}")  # fmt: skip
    diffs += net_partition_diff(sch.nets, truth.nets, ("netlist", "ground truth"))
    return _ok("netlist_matches_truth", not diffs, "; ".join(diffs[:8]))


def _sch_field(c: _Context, check: dict[str, Any]) -> Check:
    sym = c.need_sch().symbol(check["ref"])
    value = {"Value": sym.value, "Footprint": sym.footprint}.get(check["field"])
    if value is None:
        raise PcbBenchError(f"sch_field: unsupported field {check['field']!r}")
    return _ok(check_name(check), value == check["value"], f"{check['field']} = {value}")


def _unchanged(c: _Context, check: dict[str, Any]) -> Check:
    """No unrelated change: every untouched reference keeps place, package, value and nets."""
    board, sch = c.need_board(), c.need_sch()
    allowed = set(check.get("except", []))
    diffs = []
    for ref, old in c.orig_board.footprints.items():
        if ref in allowed:
            continue
        new = board.footprints.get(ref)
        if new is None:
            diffs.append(f"{ref} removed from the board")
            continue
        if (
            math.hypot(new.x - old.x, new.y - old.y) > POSITION_TOL
            or abs((new.rotation - old.rotation + 180) % 360 - 180) > ROTATION_TOL
        ):
            diffs.append(f"{ref} moved")
        if (new.lib_id, new.value) != (old.lib_id, old.value):
            diffs.append(f"{ref} footprint/value changed")
        if {p.number: p.net for p in new.pads} != {p.number: p.net for p in old.pads}:
            diffs.append(f"{ref} pad nets changed")
    old_pins, new_pins = c.orig_sch.pin_nets(), sch.pin_nets()
    for ref, old_sym in c.orig_sch.parts().items():
        if ref in allowed:
            continue
        new_sym = sch.symbols.get(ref)
        if new_sym is None:
            diffs.append(f"{ref} removed from the schematic")
            continue
        if (new_sym.value, new_sym.footprint) != (old_sym.value, old_sym.footprint):
            diffs.append(f"{ref} schematic value/footprint changed")
        for pin in old_sym.pins:
            key = (ref, pin.number)
            if old_pins.get(key) != new_pins.get(key) and not (
                str(old_pins.get(key, "")).startswith("Net-(")
            ):
                diffs.append(f"{ref}.{pin.number} net changed")
    return _ok("unchanged", not diffs, "; ".join(sorted(set(diffs))[:10]))


def _graph(groups: dict[str, frozenset[tuple[str, str]]]) -> nx.Graph:
    g = nx.Graph()
    for name, members in groups.items():
        g.add_node(("net", name))
        for ref, pin in members:
            g.add_edge(("net", name), ("pin", ref, pin))
    return g


def net_partition_diff(
    sch_nets: dict[str, frozenset[tuple[str, str]]],
    board_nets: dict[str, frozenset[tuple[str, str]]],
    sides: tuple[str, str] = ("schematic", "board"),
) -> list[str]:
    """Where the schematic's and the board's connectivity differ, as graphs.

    Each side is a bipartite graph of nets and (reference, pin) nodes; its connected
    components partition the pins. Components of two or more pins must be equal as sets, and
    a named schematic net's name must be the board net's name (auto names ``Net-(...)`` may
    differ: KiCad and this reader name unnamed nets differently)."""
    out = []
    a, b = sides
    gs, gb = _graph(sch_nets), _graph(board_nets)

    def parts(g: nx.Graph) -> dict[frozenset[Any], set[str]]:
        res: dict[frozenset[Any], set[str]] = {}
        for comp in nx.connected_components(g):
            pins = frozenset(x[1:] for x in comp if x[0] == "pin")
            if len(pins) >= 2:
                res[pins] = {x[1] for x in comp if x[0] == "net"}
        return res

    ps, pb = parts(gs), parts(gb)
    for pins in sorted(set(ps) - set(pb), key=sorted):
        out.append(f"{a} net {sorted(ps[pins])[0]} ({len(pins)} pins) is not a {b} net")
    for pins in sorted(set(pb) - set(ps), key=sorted):
        out.append(f"{b} net {sorted(pb[pins])[0]} ({len(pins)} pins) is not a {a} net")
    for pins in set(ps) & set(pb):
        named = {x for x in ps[pins] if not x.startswith("Net-(")}
        if named and not named & pb[pins]:
            out.append(f"net {sorted(named)[0]} is called {sorted(pb[pins])[0]} on the {b}")
    return out


def _cross(c: _Context, check: dict[str, Any]) -> Check:
    board, sch = c.need_board(), c.need_sch()
    diffs = []
    parts = sch.parts()
    fps = {r: f for r, f in board.footprints.items() if not f.board_only}
    for ref in sorted(set(parts) - set(fps)):
        diffs.append(f"{ref} in the schematic only")
    for ref in sorted(set(fps) - set(parts)):
        diffs.append(f"{ref} on the board only")
    for ref in sorted(set(parts) & set(fps)):
        if parts[ref].value != fps[ref].value:
            diffs.append(f"{ref} value {parts[ref].value} != {fps[ref].value}")
        if parts[ref].footprint != fps[ref].lib_id:
            diffs.append(f"{ref} footprint {parts[ref].footprint} != {fps[ref].lib_id}")
    board_nets: dict[str, set[tuple[str, str]]] = {}
    for key, net in board.pad_nets().items():
        board_nets.setdefault(net, set()).add(key)
    diffs += net_partition_diff(sch.nets, {k: frozenset(v) for k, v in board_nets.items()})
    return _ok("cross_artifact", not diffs, "; ".join(diffs[:8]))


def _drc(c: _Context, check: dict[str, Any]) -> Check:
    board = c.need_board()
    report = drc.run_drc(board, drc.clearance_rule(c.files["pro"]))
    good = not report.clearance_violations and report.unconnected == 0
    detail = f"{len(report.clearance_violations)} clearance, {report.unconnected} unconnected" + (
        f": {report.violations[0].message}" if report.violations else ""
    )
    return _ok("drc", good, detail)


def _cli(kind: str) -> Callable[[_Context, dict[str, Any]], Check]:
    def run(c: _Context, check: dict[str, Any]) -> Check:
        target = c.files["pcb" if kind == "kicad_cli_drc" else "sch"]
        if not target.is_file():
            return Check(kind, "failed", f"{target.name} missing")
        result = drc.kicad_cli_drc(target) if kind == "kicad_cli_drc" else drc.kicad_cli_erc(target)
        return Check(kind, result.status, result.detail)

    return run


_RUNNERS: dict[str, Callable[[_Context, dict[str, Any]], Check]] = {
    "pad_distance": _pad_distance,
    "pad_nets": _pad_nets,
    "pin_nets": _pin_nets,
    "component": _component,
    "sch_field": _sch_field,
    "unchanged": _unchanged,
    "cross_artifact": _cross,
    "netlist_matches_truth": _netlist_matches_truth,
    "drc": _drc,
    "kicad_cli_drc": _cli("kicad_cli_drc"),
    "kicad_cli_erc": _cli("kicad_cli_erc"),
}
