"""Design rule checks: a pure-Python subset that always runs, and KiCad's own where installed.

The subset checks the two rules a layout edit breaks most often, so CI judges real rules
even where ``kicad-cli`` cannot be installed (Debian 12 ships KiCad 6, which has no CLI):

- **clearance**: copper of different nets on a shared layer closer than the clearance rule
  (the ``.kicad_pro`` Default net class, else 0.2 mm);
- **unconnected**: pads of one net that copper (tracks, vias, through-hole pads, zone fills)
  does not join; counted as KiCad's ratsnest does, ``sum over nets (islands - 1)``.

Every copper shape is a convex *core* (a point, a segment or a convex polygon) grown by a
radius: a circle is a point plus r, a track or an oval a segment plus half its width, a
rounded rectangle its inner rectangle plus the corner radius, a rectangle a polygon plus 0.
The distance between two shapes is then exact: ``d = dist(core_a, core_b) - r_a - r_b``.

:func:`kicad_cli_drc` and :func:`kicad_cli_erc` run ``kicad-cli pcb drc`` / ``sch erc``
where the binary exists and return a :class:`CliCheck` whose status is ``skipped`` where it
does not: a missing tool is never a pass (the public PCBInnoBench subset records it as one).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcbinnobench.design import Board, Pad, _UnionFind, rotate

__all__ = [
    "DEFAULT_CLEARANCE",
    "CliCheck",
    "DrcReport",
    "Violation",
    "clearance_rule",
    "find_kicad_cli",
    "kicad_cli_drc",
    "kicad_cli_erc",
    "run_drc",
]

DEFAULT_CLEARANCE = 0.2  # mm: KiCad's Default net class
_TOUCH = 1e-6  # mm: copper closer than this is connected
Point = tuple[float, float]


@dataclass(frozen=True)
class _Shape:
    """A convex core grown by ``radius``; ``core`` has 1 (point), 2 (segment) or 3+ points."""

    core: tuple[Point, ...]
    radius: float
    layers: tuple[str, ...]
    net: str
    what: str  # for messages: "pad C4.1", "track GND", "via"
    pad: tuple[str, str] | None = None

    def bbox(self) -> tuple[float, float, float, float]:
        xs = [p[0] for p in self.core]
        ys = [p[1] for p in self.core]
        r = self.radius
        return min(xs) - r, min(ys) - r, max(xs) + r, max(ys) + r


def _pad_shape(pad: Pad) -> _Shape:
    w, h = pad.width, pad.height
    what = f"pad {pad.ref}.{pad.number}"
    key = (pad.ref, pad.number)

    def place(pts: Sequence[Point]) -> tuple[Point, ...]:
        out = []
        for x, y in pts:
            dx, dy = rotate(x, y, pad.angle)
            out.append((pad.x + dx, pad.y + dy))
        return tuple(out)

    if pad.shape == "circle":
        return _Shape(((pad.x, pad.y),), w / 2, pad.layers, pad.net, what, key)
    if pad.shape == "oval":
        r = min(w, h) / 2
        half = (max(w, h) - min(w, h)) / 2
        ends = [(-half, 0.0), (half, 0.0)] if w >= h else [(0.0, -half), (0.0, half)]
        return _Shape(place(ends), r, pad.layers, pad.net, what, key)
    r = pad.roundrect_ratio * min(w, h) if pad.shape == "roundrect" else 0.0
    hw, hh = w / 2 - r, h / 2 - r
    corners = [(-hw, -hh), (hw, -hh), (hw, hh), (-hw, hh)]
    return _Shape(place(corners), r, pad.layers, pad.net, what, key)


def _seg_dist(p: Point, a: Point, b: Point) -> float:
    ax, ay = a
    bx, by = b
    dx, dy = bx - ax, by - ay
    length2 = dx * dx + dy * dy
    if length2 == 0:
        return math.hypot(p[0] - ax, p[1] - ay)
    t = max(0.0, min(1.0, ((p[0] - ax) * dx + (p[1] - ay) * dy) / length2))
    return math.hypot(p[0] - (ax + t * dx), p[1] - (ay + t * dy))


def _cross(o: Point, a: Point, b: Point) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _segments_cross(a: Point, b: Point, c: Point, d: Point) -> bool:
    d1, d2 = _cross(c, d, a), _cross(c, d, b)
    d3, d4 = _cross(a, b, c), _cross(a, b, d)
    return ((d1 > 0) != (d2 > 0)) and ((d3 > 0) != (d4 > 0)) and d1 * d2 < 0 and d3 * d4 < 0


def _inside(p: Point, poly: Sequence[Point]) -> bool:
    """Point in polygon (even-odd rule; works for the concave polygons of zone fills too)."""
    x, y = p
    inside = False
    n = len(poly)
    for i in range(n):
        (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % n]
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


def _edges(core: Sequence[Point]) -> list[tuple[Point, Point]]:
    if len(core) == 1:
        return [(core[0], core[0])]
    if len(core) == 2:
        return [(core[0], core[1])]
    return [(core[i], core[(i + 1) % len(core)]) for i in range(len(core))]


def _core_distance(a: Sequence[Point], b: Sequence[Point]) -> float:
    if len(a) >= 3 and any(_inside(p, a) for p in b[:1]):
        return 0.0
    if len(b) >= 3 and any(_inside(p, b) for p in a[:1]):
        return 0.0
    best = math.inf
    for p1, p2 in _edges(a):
        for q1, q2 in _edges(b):
            if _segments_cross(p1, p2, q1, q2):
                return 0.0
            best = min(
                best,
                _seg_dist(p1, q1, q2),
                _seg_dist(p2, q1, q2),
                _seg_dist(q1, p1, p2),
                _seg_dist(q2, p1, p2),
            )
    return best


def distance(a: _Shape, b: _Shape) -> float:
    """Edge-to-edge distance between two copper shapes (negative when they overlap)."""
    return _core_distance(a.core, b.core) - a.radius - b.radius


@dataclass(frozen=True)
class Violation:
    rule: str  # "clearance" or "unconnected"
    message: str
    items: tuple[str, ...]
    value: float = 0.0


@dataclass
class DrcReport:
    """What the pure-Python subset found; ``unconnected`` counts missing connections."""

    clearance: float
    violations: list[Violation] = field(default_factory=list)
    unconnected: int = 0

    @property
    def clearance_violations(self) -> list[Violation]:
        return [v for v in self.violations if v.rule == "clearance"]

    def to_json(self) -> dict[str, Any]:
        return {
            "clearance_mm": self.clearance,
            "clearance_violations": len(self.clearance_violations),
            "unconnected": self.unconnected,
            "violations": [v.message for v in self.violations[:50]],
        }


def clearance_rule(project: str | Path | None) -> float:
    """The Default net class clearance of a ``.kicad_pro`` (JSON), else 0.2 mm."""
    if project is None:
        return DEFAULT_CLEARANCE
    try:
        data = json.loads(Path(project).read_text(encoding="utf-8"))
        for cls in data["net_settings"]["classes"]:
            if cls.get("name") == "Default" and isinstance(cls.get("clearance"), (int, float)):
                return float(cls["clearance"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return DEFAULT_CLEARANCE


def _shapes(board: Board) -> list[_Shape]:
    shapes = [_pad_shape(p) for p in board.pads() if p.layers and p.kind != "np_thru_hole"]
    for t in board.tracks:
        shapes.append(
            _Shape(
                ((t.x1, t.y1), (t.x2, t.y2)),
                t.width / 2,
                (t.layer,),
                t.net,
                f"track {t.net or '(no net)'} on {t.layer}",
            )
        )
    for v in board.vias:
        shapes.append(_Shape(((v.x, v.y),), v.size / 2, v.layers, v.net, f"via {v.net}"))
    return shapes


def _touches_fill(shape: _Shape, poly: Sequence[Point]) -> bool:
    """Whether copper lies on a zone fill: a core point inside it, or its edge within reach
    (a pad sits in a thermal-relief hole and touches the fill through its spokes)."""
    if any(_inside(p, poly) for p in shape.core):
        return True
    x0, y0, x1, y1 = shape.bbox()
    reach = shape.radius + _TOUCH
    n = len(poly)
    for k in range(n):
        a, b = poly[k], poly[(k + 1) % n]
        if (
            max(a[0], b[0]) < x0
            or min(a[0], b[0]) > x1
            or max(a[1], b[1]) < y0
            or min(a[1], b[1]) > y1
        ):
            continue
        for p1, p2 in _edges(shape.core):
            if (
                _segments_cross(p1, p2, a, b)
                or min(
                    _seg_dist(p1, a, b),
                    _seg_dist(p2, a, b),
                    _seg_dist(a, p1, p2),
                    _seg_dist(b, p1, p2),
                )
                <= reach
            ):
                return True
    return False


def islands(board: Board, net: str) -> list[list[_Shape]]:
    """The copper of ``net`` grouped into electrically joined islands (pads, tracks, vias)."""
    shapes = [sh for sh in _shapes(board) if sh.net == net]
    uf = _UnionFind()
    for i, a in enumerate(shapes):
        uf.find(i)
        for j in range(i + 1, len(shapes)):
            b = shapes[j]
            if set(a.layers) & set(b.layers) and distance(a, b) <= _TOUCH:
                uf.union(i, j)
    groups: dict[Any, list[_Shape]] = {}
    for i, sh in enumerate(shapes):
        groups.setdefault(uf.find(i), []).append(sh)
    return sorted(groups.values(), key=lambda g: (-len(g), sorted(x.what for x in g)))


def run_drc(board: Board, clearance: float = DEFAULT_CLEARANCE) -> DrcReport:
    """The clearance and unconnected-pad rules over a whole board."""
    shapes = _shapes(board)
    boxes = [s.bbox() for s in shapes]
    report = DrcReport(clearance=clearance)
    uf = _UnionFind()
    order = sorted(range(len(shapes)), key=lambda i: boxes[i][0])
    for oi, i in enumerate(order):
        a, ba = shapes[i], boxes[i]
        for j in order[oi + 1 :]:
            bb = boxes[j]
            if bb[0] > ba[2] + clearance:
                break
            if bb[1] > ba[3] + clearance or ba[1] > bb[3] + clearance:
                continue
            b = shapes[j]
            if not set(a.layers) & set(b.layers):
                continue
            d = distance(a, b)
            same = a.net == b.net and a.net != ""
            if same:
                if d <= _TOUCH:
                    uf.union(i, j)
            elif d < clearance - _TOUCH and not (a.pad and b.pad and a.pad[0] == b.pad[0]):
                report.violations.append(
                    Violation(
                        "clearance",
                        f"{a.what} and {b.what}: {max(d, 0):.3f} mm < {clearance:g} mm",
                        (a.what, b.what),
                        d,
                    )
                )
    # Zone fills join the copper of their net that lies on them.
    for zi, zone in enumerate(board.zones):
        for fi, (layer, poly) in enumerate(zone.fills):
            if len(poly) < 3:
                continue
            node = ("zone", zi, fi)
            for i, s in enumerate(shapes):
                if s.net == zone.net and layer in s.layers and _touches_fill(s, poly):
                    uf.union(i, node)
    islands: dict[str, set[Any]] = {}
    for i, s in enumerate(shapes):
        if s.pad is not None and s.net:
            islands.setdefault(s.net, set()).add(uf.find(i))
    for net, roots in sorted(islands.items()):
        if len(roots) > 1:
            report.unconnected += len(roots) - 1
            members = sorted(s.what for i, s in enumerate(shapes) if s.pad and s.net == net)
            report.violations.append(
                Violation(
                    "unconnected",
                    f"net {net}: {len(roots)} islands ({', '.join(members[:6])})",
                    tuple(members),
                    len(roots) - 1,
                )
            )
    return report


# ----------------------------------------------------------------------------- kicad-cli


@dataclass(frozen=True)
class CliCheck:
    """A kicad-cli check: ``status`` is passed, failed or skipped (tool absent or unusable)."""

    name: str
    status: str
    detail: str
    violations: int | None = None


def find_kicad_cli() -> str | None:
    """``$PCBINNOBENCH_KICAD_CLI`` if set (empty: treat as absent), else ``kicad-cli`` on PATH."""
    env = os.environ.get("PCBINNOBENCH_KICAD_CLI")
    if env is not None:
        return env or None
    return shutil.which("kicad-cli")


def _run_cli(name: str, args: list[str], timeout: float) -> CliCheck:
    exe = find_kicad_cli()
    if exe is None:
        return CliCheck(name, "skipped", "kicad-cli not installed (not counted as a pass)")
    with tempfile.TemporaryDirectory(prefix="pcbinnobench-cli-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [exe, *args, "--format", "json", "--severity-error", "--output", str(report)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return CliCheck(name, "skipped", f"kicad-cli did not run ({type(exc).__name__})")
        try:
            data = json.loads(report.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return CliCheck(name, "skipped", f"kicad-cli wrote no report: {tail[0][:200]}")
    count = _count_violations(data)
    return CliCheck(
        name, "passed" if count == 0 else "failed", f"{count} error(s) reported by kicad-cli", count
    )


def _count_violations(data: Any) -> int:
    """Errors in a kicad-cli JSON report (DRC: violations, unconnected_items,
    schematic_parity; ERC: the violations of every sheet)."""
    count = 0
    if isinstance(data, dict):
        for key in ("violations", "unconnected_items", "schematic_parity"):
            count += sum(
                1
                for v in data.get(key, [])
                if not isinstance(v, dict) or v.get("severity", "error") == "error"
            )
        for sheet in data.get("sheets", []):
            count += _count_violations(sheet)
    return count


def kicad_cli_drc(pcb: str | Path, timeout: float = 120.0) -> CliCheck:
    """``kicad-cli pcb drc --schematic-parity`` on a board (skipped where not installed)."""
    return _run_cli("kicad_cli_drc", ["pcb", "drc", "--schematic-parity", str(pcb)], timeout)


def kicad_cli_erc(sch: str | Path, timeout: float = 120.0) -> CliCheck:
    """``kicad-cli sch erc`` on a schematic (skipped where not installed)."""
    return _run_cli("kicad_cli_erc", ["sch", "erc", str(sch)], timeout)
