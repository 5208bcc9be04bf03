"""Read the official PCBInnoBench task layout into this package's task format.

The public subset (github.com/Xiafyjck/pcbinnobench, 35 tasks) is laid out as::

    tasks/<id>/task.json                  task_id, domain, difficulty_tier, prompt,
                                          prompt_with_guidance, workspace,
                                          hidden_ground_truth, validator
    tasks/<id>/prompt.md                  the objective alone
    tasks/<id>/prompt_with_guidance.md    the objective with the expert's fix in words
    tasks/<id>/workspace/                 the KiCad 9 project, datasheets/, renders/
    evaluation/ground_truths/<id>/        the expert's project (hidden)
    validators/tasks/<module>.py          SPEC = TaskSpec(project_files, golden_hashes,
                                          source_hashes, schematic_file, pcb_file,
                                          kicad_cli_checks, position_checks, netlist_checks)

:func:`import_official` writes it as a task set of :mod:`pcbinnobench.tasks` (``tasks/`` for
agents, ``hidden/`` for evaluation). The validator module is read as data (its ``TaskSpec``
call's literal arguments through :mod:`ast`), never executed. The checks keep the spec's
meaning, not its two flaws: golden SHA-256 equality becomes per-file *changed in meaning*
plus a netlist comparison with the ground truth, and a missing kicad-cli stays *skipped*.

Checks the imported task gets: ``changed`` for every design file the expert changed,
``component`` (footprint, position within the spec's tolerance, rotation) per
``position_checks``, ``pad_nets`` per ``netlist_checks``, ``netlist_matches_truth`` for
``netlist_export``, kicad-cli DRC/ERC for ``drc``/``erc``, and ours: ``unchanged`` (every
part the expert did not touch stays as it was), ``cross_artifact`` and the pure-Python
``drc``. A check the ground truth itself fails is left out and listed in
``hidden/<id>/import.json``, so the oracle (which writes the ground truth's files) passes by
construction; whether doing nothing fails is measured on import and printed.
"""

from __future__ import annotations

import ast
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcbinnobench import design
from pcbinnobench.errors import PcbBenchError

__all__ = ["ImportResult", "OfficialTask", "import_official", "read_official"]

_TASK_FIELDS = ("task_id", "prompt", "prompt_with_guidance", "workspace", "validator")
_SPEC_FIELDS = ("project_files", "schematic_file", "pcb_file")
_CLI = {"drc": "kicad_cli_drc", "erc": "kicad_cli_erc"}


@dataclass
class OfficialTask:
    """One task of the official layout, its validator spec read as data."""

    id: str
    folder: Path
    meta: dict[str, Any]
    spec: dict[str, Any]
    ground_truth: Path

    @property
    def workspace(self) -> Path:
        return self.folder / str(self.meta["workspace"])

    @property
    def project(self) -> str:
        return Path(str(self.spec["pcb_file"])).stem


@dataclass
class ImportResult:
    """What importing one task gave: its checks, the ones left out, and two sanity runs."""

    task_id: str
    checks: int
    dropped: dict[str, str] = field(default_factory=dict)
    truth_passes: bool = False
    shipped_fails: list[str] = field(default_factory=list)


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PcbBenchError(f"{path}: missing (an official task folder has task.json)") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PcbBenchError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise PcbBenchError(f"{path}: must be a JSON object")
    return data


def read_spec(path: Path) -> dict[str, Any]:
    """The literal keyword arguments of the ``TaskSpec(...)`` call in a validator module."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except FileNotFoundError:
        raise PcbBenchError(f"{path}: missing validator module") from None
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        raise PcbBenchError(f"{path}: not a readable Python module ({exc})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "TaskSpec":
            spec: dict[str, Any] = {}
            for kw in node.keywords:
                try:
                    spec[str(kw.arg)] = ast.literal_eval(kw.value)
                except ValueError:
                    raise PcbBenchError(
                        f"{path}:{kw.value.lineno}: TaskSpec {kw.arg}= is not a literal"
                    ) from None
            missing = [f for f in _SPEC_FIELDS if f not in spec]
            if missing:
                raise PcbBenchError(f"{path}: TaskSpec lacks {', '.join(missing)}")
            if Path(str(spec["pcb_file"])).stem != Path(str(spec["schematic_file"])).stem:
                raise PcbBenchError(
                    f"{path}: schematic_file {spec['schematic_file']} and pcb_file "
                    f"{spec['pcb_file']} are not one KiCad project"
                )
            return spec
    raise PcbBenchError(f"{path}: no TaskSpec(...) call")


def read_official(root: str | Path, ids: list[str] | None = None) -> list[OfficialTask]:
    """Every task of an official checkout at ``root`` (``ids``: only those), checked for the
    layout: a bad or missing file is one :class:`PcbBenchError` naming it."""
    base = Path(root)
    if not base.is_dir():
        raise PcbBenchError(f"{base}: no such directory (a checkout of the official subset)")
    tasks_dir = base / "tasks"
    if not tasks_dir.is_dir():
        raise PcbBenchError(f"{tasks_dir}: missing (the official layout has tasks/<id>/)")
    found = sorted(p.name for p in tasks_dir.iterdir() if p.is_dir())
    if ids:
        unknown = [i for i in ids if i not in found]
        if unknown:
            raise PcbBenchError(f"{tasks_dir}: no task(s) {', '.join(unknown)}")
        found = list(ids)
    out = []
    for tid in found:
        folder = tasks_dir / tid
        meta = _json(folder / "task.json")
        missing = [f for f in _TASK_FIELDS if not isinstance(meta.get(f), str)]
        if missing:
            raise PcbBenchError(f"{folder / 'task.json'}: missing field(s) {', '.join(missing)}")
        for key in ("prompt", "prompt_with_guidance"):
            if not (folder / meta[key]).is_file():
                raise PcbBenchError(f"{folder / meta[key]}: missing prompt file")
        if not (folder / meta["workspace"]).is_dir():
            raise PcbBenchError(f"{folder / meta['workspace']}: missing workspace folder")
        truth = base / str(meta.get("hidden_ground_truth", f"evaluation/ground_truths/{tid}"))
        if not truth.is_dir():
            raise PcbBenchError(f"{truth}: missing ground truth folder")
        spec = read_spec(base / meta["validator"])
        task = OfficialTask(tid, folder, meta, spec, truth)
        for name in (spec["pcb_file"], spec["schematic_file"]):
            for side in (task.workspace, truth):
                if not (side / name).is_file():
                    raise PcbBenchError(f"{side / name}: missing design file")
        out.append(task)
    return out


def _touched(task: OfficialTask) -> set[str]:
    """References the expert changed: on the board (package, value, place, pad nets) or in
    the schematic (value, footprint, pin nets), plus those added or removed."""
    pcb, sch = task.spec["pcb_file"], task.spec["schematic_file"]
    b0, b1 = design.load_board(task.workspace / pcb), design.load_board(task.ground_truth / pcb)
    s0 = design.load_schematic(task.workspace / sch)
    s1 = design.load_schematic(task.ground_truth / sch)
    out = set(b0.footprints) ^ set(b1.footprints) | set(s0.parts()) ^ set(s1.parts())
    for ref in set(b0.footprints) & set(b1.footprints):
        a, b = b0.footprints[ref], b1.footprints[ref]
        if (a.lib_id, a.value, round(a.x, 3), round(a.y, 3), a.rotation) != (
            b.lib_id,
            b.value,
            round(b.x, 3),
            round(b.y, 3),
            b.rotation,
        ) or {p.number: p.net for p in a.pads} != {p.number: p.net for p in b.pads}:
            out.add(ref)
    p0, p1 = s0.pin_nets(), s1.pin_nets()
    for ref in set(s0.parts()) & set(s1.parts()):
        old, new = s0.parts()[ref], s1.parts()[ref]
        if (old.value, old.footprint) != (new.value, new.footprint) or any(
            p0.get((ref, p.number)) != p1.get((ref, p.number)) for p in old.pins
        ):
            out.add(ref)
    return out


def _checks(task: OfficialTask) -> tuple[list[Any], list[dict[str, Any]], list[str]]:
    """(changed entries, checks, changed files) of one task, before the ground-truth gate."""
    spec = task.spec
    design_files = [
        f for f in spec["project_files"] if str(f).endswith((".kicad_sch", ".kicad_pcb"))
    ]
    changed_files = [
        f
        for f in design_files
        if (task.workspace / f).is_file()
        and (task.ground_truth / f).is_file()
        and (task.workspace / f).read_bytes() != (task.ground_truth / f).read_bytes()
    ]
    changed: list[Any] = []
    for f in changed_files:
        if f == spec["pcb_file"]:
            changed.append("pcb")
        elif f == spec["schematic_file"]:
            changed.append("sch")
        else:
            changed.append(f"file:{f}")
    tol = float(spec.get("position_tolerance_mm", 0.02))
    rot_tol = float(spec.get("rotation_tolerance_deg", 0.2))
    checks: list[dict[str, Any]] = []
    for ref, want in sorted(spec.get("position_checks", {}).items()):
        check: dict[str, Any] = {"kind": "component", "ref": ref}
        if "footprint" in want:
            check["footprint"] = want["footprint"]
        if "x" in want and "y" in want:
            check.update(near=[want["x"], want["y"]], tol_mm=tol)
        if "rotation" in want:
            check.update(rotation=want["rotation"], rot_tol_deg=rot_tol)
        checks.append(check)
    for ref, pads in sorted(spec.get("netlist_checks", {}).items()):
        checks.append({"kind": "pad_nets", "ref": ref, "pads": dict(pads)})
    cli = tuple(spec.get("kicad_cli_checks", ()))
    if "netlist_export" in cli:
        checks.append({"kind": "netlist_matches_truth"})
    checks.append({"kind": "unchanged", "except": sorted(_touched(task))})
    checks.append({"kind": "cross_artifact"})
    checks.append({"kind": "drc"})
    checks += [{"kind": _CLI[c]} for c in cli if c in _CLI]
    return changed, checks, changed_files


def _changed_name(entry: str) -> str:
    return f"changed:{entry[5:] if entry.startswith('file:') else entry}"


def import_official(
    root: str | Path, out: str | Path, ids: list[str] | None = None
) -> list[ImportResult]:
    """Write the official tasks at ``root`` as a task set under ``out`` (``tasks/``,
    ``hidden/``); returns per task what was kept, left out and measured."""
    from pcbinnobench.validators import check_name, validate

    official = read_official(root, ids)
    dest = Path(out)
    results = []
    for task in official:
        public, hidden = dest / "tasks" / task.id, dest / "hidden" / task.id
        for d in (public, hidden):
            if d.exists():
                shutil.rmtree(d)
        shutil.copytree(task.workspace, public / "workspace", symlinks=False)
        prompts = public / "prompts"
        prompts.mkdir(parents=True)
        shutil.copyfile(task.folder / task.meta["prompt"], prompts / "objective.md")
        shutil.copyfile(task.folder / task.meta["prompt_with_guidance"], prompts / "guided.md")
        meta = {
            "task_id": task.id,
            "title": f"{task.meta.get('domain', '')}: {task.meta.get('difficulty_tier', '')}",
            "board": task.project,
            "kind": str(task.meta.get("difficulty_tier", "official")),
            "prompts": {"objective": "prompts/objective.md", "guided": "prompts/guided.md"},
            "workspace": "workspace",
            "format": "KiCad 9 (official PCBInnoBench subset)",
            "source": {k: task.meta.get(k) for k in ("domain", "difficulty_tier", "validator")},
        }
        (public / "task.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        for side, src in (("original", task.workspace), ("ground_truth", task.ground_truth)):
            for f in task.spec["project_files"]:
                if (src / f).is_file():
                    (hidden / side / f).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src / f, hidden / side / f)
        changed, checks, changed_files = _checks(task)
        solution = [
            {
                "tool": "write_file",
                "args": {"path": f, "content": (task.ground_truth / f).read_text(encoding="utf-8")},
            }
            for f in changed_files
        ]
        (hidden / "solution.json").write_text(json.dumps(solution) + "\n", encoding="utf-8")
        spec = {
            "task_id": task.id,
            "project": task.project,
            "required_files": [f for f in task.spec["project_files"] if "/" not in f],
            "changed": changed,
            "checks": checks,
        }
        (hidden / "validators.json").write_text(json.dumps(spec, indent=2) + "\n", "utf-8")
        # The gate: a check the expert's own result fails cannot judge an agent.
        truth = validate(hidden / "ground_truth", hidden)
        dropped = {c.name: c.detail for c in truth.failures()}
        if dropped:
            spec["changed"] = [k for k in changed if _changed_name(k) not in dropped]
            spec["checks"] = [
                c for c in checks if check_name(c) not in dropped and c["kind"] not in dropped
            ]
            (hidden / "validators.json").write_text(json.dumps(spec, indent=2) + "\n", "utf-8")
            truth = validate(hidden / "ground_truth", hidden)
        shipped = validate(public / "workspace", hidden)
        (hidden / "import.json").write_text(
            json.dumps({"dropped_because_ground_truth_fails": dropped}, indent=2) + "\n",
            "utf-8",
        )
        results.append(
            ImportResult(
                task.id,
                len(spec["checks"]) + len(spec["changed"]),
                dropped,
                truth.passed,
                [c.name for c in shipped.failures()],
            )
        )
    return results
