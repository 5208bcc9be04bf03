"""The shipped task set: three small real-style boards and twelve design-and-upgrade tasks.

Each board is written from a compact spec (parts, placement, nets) into a KiCad 9 project: a
schematic whose every pin has a wire stub and a net label, and a routed two-layer board
(signals on F.Cu, GND through a via per SMD pad to B.Cu). Routes come from a small greedy
router that tries a straight track, then the two L-shapes, then doglegs, and keeps the first
that clears every other net by the clearance rule; the result is checked by the pure-Python
DRC (no violation, nothing unconnected) before a task is written.

A task is the board with one engineering defect or missing feature, an *expert trajectory*
of ECAD edits that fixes it (recorded as tool actions: it is the guided prompt, the oracle's
patch and, applied to the workspace, the hidden ground truth) and the validators that judge
the result. ``pcbinnobench build-tasks --out DIR`` regenerates the shipped files byte for byte.
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pcbinnobench import design, drc, edits, sexpr
from pcbinnobench import parts as lib
from pcbinnobench.errors import PcbBenchError
from pcbinnobench.parts import n, s, stable_uuid
from pcbinnobench.sexpr import Node
from pcbinnobench.tools import Sandbox

__all__ = ["BOARDS", "TASKS", "BoardSpec", "Comp", "TaskSpec", "build_all", "describe_action"]

CLEARANCE = 0.2
TRACK = 0.25
MARGIN = 0.05  # the router keeps this much more than the clearance


@dataclass(frozen=True)
class Comp:
    ref: str
    key: str
    value: str
    x: float
    y: float
    rotation: float
    nets: dict[str, str]


@dataclass(frozen=True)
class BoardSpec:
    name: str
    title: str
    outline: tuple[float, float, float, float]
    comps: tuple[Comp, ...]
    notes: str
    routes: dict[str, tuple[tuple[tuple[float, float], ...], ...]] = field(default_factory=dict)
    back_routes: dict[str, tuple[tuple[tuple[float, float], ...], ...]] = field(
        default_factory=dict
    )

    def comp(self, ref: str) -> Comp:
        return next(c for c in self.comps if c.ref == ref)

    def with_comp(self, ref: str, **changes: Any) -> BoardSpec:
        comps = tuple(replace(c, **changes) if c.ref == ref else c for c in self.comps)
        return replace(self, comps=comps)


def _c(ref: str, key: str, value: str, x: float, y: float, rot: float, **nets: str) -> Comp:
    return Comp(ref, key, value, x, y, rot, {k.lstrip("p"): v for k, v in nets.items()})


LDO = BoardSpec(
    "ldo3v3",
    "5 V to 3.3 V LDO supply with input and output capacitors",
    (96.0, 98.0, 132.0, 116.0),
    (
        _c("J1", "PinHeader_1x02", "PWR_IN", 104, 104.05, 0, p1="+5V", p2="GND"),
        _c("C1", "C_0805", "1uF", 109, 105, -90, p1="+5V", p2="GND"),
        _c("R1", "R_0805", "10k", 113, 108.5, 0, p1="+5V", p2="EN"),
        _c(
            "U1", "SOT-23-5_LDO", "AP2112K-3.3", 118, 105, 0, p1="+5V", p2="GND", p3="EN", p5="+3V3"
        ),
        _c("C2", "C_0805", "1uF", 122, 105, -90, p1="+3V3", p2="GND"),
        _c("J2", "PinHeader_1x02", "PWR_OUT", 128, 104.05, 0, p1="+3V3", p2="GND"),
    ),
    "AP2112K-3.3 (datasheet excerpt): stable with a 1 uF ceramic capacitor on VIN and on "
    "VOUT; place both within 3 mm of the pin. EN must be held high to enable the output: "
    "pull it up to VIN. Absolute maximum VIN is 6.5 V; the 5 V input comes from an external "
    "cable and needs transient protection at the connector (SMBJ5.0A, D_SMA).",
)

OPAMP = BoardSpec(
    "opamp_buffer",
    "RC-filtered unity-gain buffer on an LMV358",
    (100.0, 97.0, 132.0, 116.0),
    (
        _c("J1", "PinHeader_1x04", "SIG", 106, 100, 90, p1="GND", p2="IN", p3="OUT", p4="+5V"),
        _c("R1", "R_0805", "1k", 108.54, 105, -90, p1="IN", p2="IN_F"),
        _c("C2", "C_0805", "10nF", 105.8, 110.6, 180, p1="IN_F", p2="GND"),
        _c(
            "U1",
            "LMV358",
            "LMV358",
            118,
            108,
            0,
            p1="OUT",
            p2="OUT",
            p3="IN_F",
            p4="GND",
            p5="GND",
            p6="OUTB",
            p7="OUTB",
            p8="+5V",
        ),
        _c("C1", "C_0805", "100nF", 123.2, 107.05, -90, p1="+5V", p2="GND"),
    ),
    "LMV358 (datasheet excerpt): bypass V+ with a 100 nF ceramic capacitor placed as close "
    "as possible to pin 8. Channel A is a unity-gain buffer (OUTA to -INA) fed through the "
    "R1-C2 low-pass filter, corner f = 1 / (2 pi R1 C2). Channel B is unused: +INB to GND, "
    "-INB to OUTB.",
)

EEPROM = BoardSpec(
    "i2c_eeprom",
    "24LC02 I2C EEPROM module with pull-ups",
    (100.0, 96.5, 134.0, 118.0),
    (
        _c("J1", "PinHeader_1x04", "I2C", 104, 100, 90, p1="GND", p2="+3V3", p3="SCL", p4="SDA"),
        _c("R1", "R_0805", "4.7k", 112.89, 103, 180, p1="+3V3", p2="SDA"),
        _c("R2", "R_0805", "4.7k", 107.81, 104.5, 0, p1="+3V3", p2="SCL"),
        _c(
            "U1",
            "24LC02",
            "24LC02",
            120,
            108,
            180,
            p1="GND",
            p2="GND",
            p3="GND",
            p4="GND",
            p5="SDA",
            p6="SCL",
            p7="GND",
            p8="+3V3",
        ),
        _c("C1", "C_0805", "100nF", 115.3, 110.855, -90, p1="+3V3", p2="GND"),
    ),
    "24LC02 (datasheet excerpt): decouple VCC (pin 8) with 100 nF placed next to the pin. "
    "A0-A2 and WP tied to VSS: address 0x50, writes enabled. SDA and SCL need pull-ups "
    "(4.7 kOhm at 100 kHz). Daisy-chained modules repeat the 4-pin header "
    "GND, +3V3, SCL, SDA.",
    routes={
        "+3V3": (
            ((106.54, 100.0), (106.54, 109.905), (117.525, 109.905)),
            ((106.54, 100.0), (106.54, 98.2), (114.16, 98.2), (114.16, 103.0)),
        ),
        "SCL": (((109.08, 100.0), (109.08, 107.365), (117.525, 107.365)),),
        "SDA": (((111.62, 100.0), (111.62, 106.095), (117.525, 106.095)),),
    },
    back_routes={"GND": (((104.0, 100.0), (104.0, 105.5)),)},
)

BOARDS = {b.name: b for b in (LDO, OPAMP, EEPROM)}


# ----------------------------------------------------------------------------- files


def _pcb_skeleton(spec: BoardSpec, nets: list[str]) -> Node:
    layers = [
        s("layers"),
        [n(0), "F.Cu", s("signal")],
        [n(2), "B.Cu", s("signal")],
        [n(5), "F.SilkS", s("user"), "F.Silkscreen"],
        [n(7), "B.SilkS", s("user"), "B.Silkscreen"],
        [n(1), "F.Mask", s("user")],
        [n(3), "B.Mask", s("user")],
        [n(13), "F.Paste", s("user")],
        [n(25), "Edge.Cuts", s("user")],
        [n(31), "F.CrtYd", s("user"), "F.Courtyard"],
        [n(35), "F.Fab", s("user")],
    ]
    tree: Node = [
        s("kicad_pcb"),
        [s("version"), n(20241229)],
        [s("generator"), "pcbnew"],
        [s("generator_version"), "9.0"],
        [s("general"), [s("thickness"), n(1.6)], [s("legacy_teardrops"), s("no")]],
        [s("paper"), "A4"],
        layers,
        [
            s("setup"),
            [s("pad_to_mask_clearance"), n(0)],
            [s("allow_soldermask_bridges_in_footprints"), s("no")],
            [s("tenting"), s("front"), s("back")],
        ],
        [s("net"), n(0), ""],
    ]
    for i, net in enumerate(nets, start=1):
        tree.append([s("net"), n(i), net])
    return tree


def _project(spec: BoardSpec) -> str:
    data = {
        "board": {"design_settings": {"defaults": {"track_width": TRACK}}},
        "meta": {"filename": f"{spec.name}.kicad_pro", "version": 3},
        "net_settings": {
            "classes": [
                {
                    "name": "Default",
                    "clearance": CLEARANCE,
                    "track_width": TRACK,
                    "via_diameter": 0.6,
                    "via_drill": 0.3,
                    "wire_width": 6,
                }
            ],
            "meta": {"version": 4},
        },
        "sheets": [[stable_uuid(spec.name, "root"), "Root"]],
    }
    return json.dumps(data, indent=2) + "\n"


def _schematic(spec: BoardSpec) -> Node:
    root = stable_uuid(spec.name, "root")
    tree: Node = [
        s("kicad_sch"),
        [s("version"), n(20250114)],
        [s("generator"), "eeschema"],
        [s("generator_version"), "9.0"],
        [s("uuid"), root],
        [s("paper"), "A4"],
        [s("lib_symbols")],
    ]
    for i, c in enumerate(spec.comps):
        edits._ensure_lib_symbol(tree, c.key)
        x, y = 50.8 + 40.64 * (i % 3), 50.8 + 40.64 * (i // 3)
        tree.extend(edits.symbol_nodes(c.key, c.ref, c.value, x, y, c.nets, spec.name, root))
    tree.append([s("sheet_instances"), [s("path"), "/", [s("page"), "1"]]])
    tree.append([s("embedded_fonts"), s("no")])
    return tree


def _board(spec: BoardSpec) -> Node:
    nets = sorted({net for c in spec.comps for net in c.nets.values()})
    tree = _pcb_skeleton(spec, nets)
    for c in spec.comps:
        codes = {pad: (nets.index(net) + 1, net) for pad, net in c.nets.items()}
        tree.append(
            lib.footprint_node(
                c.key, c.ref, c.value, c.x, c.y, c.rotation, codes, f"{spec.name}/{c.ref}"
            )
        )
    x0, y0, x1, y1 = spec.outline
    tree.append(
        [
            s("gr_rect"),
            [s("start"), n(x0), n(y0)],
            [s("end"), n(x1), n(y1)],
            [s("stroke"), [s("width"), n(0.05)], [s("type"), s("default")]],
            [s("fill"), s("no")],
            [s("layer"), "Edge.Cuts"],
            [s("uuid"), stable_uuid(spec.name, "edge")],
        ]
    )
    tree.append([s("embedded_fonts"), s("no")])
    for net in nets:
        route_net(tree, net, spec.routes.get(net, ()), spec.back_routes.get(net, ()))
    return tree


# ----------------------------------------------------------------------------- routing


def _obstacles(tree: Node, net: str, layer: str) -> list[Any]:
    board = design.board_from_tree(tree, "router")
    return [sh for sh in drc._shapes(board) if sh.net != net and layer in sh.layers]


def _clear(points: list[tuple[float, float]], obstacles: list[Any], layer: str) -> bool:
    for a, b in itertools.pairwise(points):
        seg = drc._Shape((a, b), TRACK / 2, (layer,), "", "candidate")
        if any(drc.distance(seg, o) < CLEARANCE + MARGIN for o in obstacles):
            return False
    return True


def find_route(
    tree: Node, net: str, a: tuple[float, float], b: tuple[float, float], layer: str
) -> list[tuple[float, float]] | None:
    """The first clear polyline from ``a`` to ``b``: straight, L-shapes, then doglegs."""
    obstacles = _obstacles(tree, net, layer)
    (ax, ay), (bx, by) = a, b
    candidates = [[a, b], [a, (bx, ay), b], [a, (ax, by), b]]
    for d in (1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.5, -4.5):
        candidates.append([a, (ax, ay + d), (bx, ay + d), b])
        candidates.append([a, (ax + d, ay), (ax + d, by), b])
        candidates.append([a, (ax, by + d), (bx, by + d), b])
        candidates.append([a, (bx + d, ay), (bx + d, by), b])
    for points in candidates:
        pts = [(round(x, 4), round(y, 4)) for x, y in points]
        pts = [p for i, p in enumerate(pts) if i == 0 or p != pts[i - 1]]
        if _clear(pts, obstacles, layer):
            return pts
    return None


def via_spot(tree: Node, pad: design.Pad, center: tuple[float, float]) -> tuple[float, float]:
    """Where the GND via of an SMD pad goes: outward from the footprint first, then around."""
    reach = max(pad.width, pad.height) / 2 + 0.8
    dx, dy = pad.x - center[0], pad.y - center[1]
    # outward along the nearest axis, so a via does not depend on what else is placed
    first = 90.0 * round(math.degrees(math.atan2(dy, dx)) / 90.0) if (dx or dy) else 0.0
    front = _obstacles(tree, "GND", "F.Cu")
    obstacles = front + _obstacles(tree, "GND", "B.Cu")
    for k in range(12):
        t = math.radians(first + (30 * ((k + 1) // 2) * (1 if k % 2 else -1)))
        x, y = round(pad.x + reach * math.cos(t), 3), round(pad.y + reach * math.sin(t), 3)
        via = drc._Shape(((x, y),), 0.3, ("F.Cu", "B.Cu"), "GND", "via")
        if all(drc.distance(via, o) >= CLEARANCE + MARGIN for o in obstacles) and _clear(
            [(pad.x, pad.y), (x, y)], front, "F.Cu"
        ):
            return x, y
    raise PcbBenchError(f"router: no room for a GND via at {pad.ref}.{pad.number}")


def _anchors(island: list[Any], layer: str) -> list[tuple[float, float]]:
    """Points a new track may start from: pad centres, via centres, track ends on ``layer``."""
    out = []
    for sh in island:
        if layer not in sh.layers:
            continue
        if sh.pad is not None or len(sh.core) == 1:
            out.append(sh.core[0] if len(sh.core) == 1 else _centre(sh.core))
        elif len(sh.core) == 2:
            out.extend(sh.core)
    return [(round(x, 4), round(y, 4)) for x, y in out]


def _centre(core: tuple[tuple[float, float], ...]) -> tuple[float, float]:
    return (sum(p[0] for p in core) / len(core), sum(p[1] for p in core) / len(core))


def route_net(
    tree: Node,
    net: str,
    explicit: tuple[tuple[tuple[float, float], ...], ...] = (),
    back: tuple[tuple[tuple[float, float], ...], ...] = (),
) -> list[dict[str, Any]]:
    """Route ``net`` until its copper is one island; return the edits as tool actions.

    ``explicit`` polylines are laid first (F.Cu; ``back``: B.Cu). GND gets a via beside every
    SMD pad that has no GND copper yet and is joined on B.Cu; other nets are joined on F.Cu.
    Islands are joined closest pair first, so re-routing a moved part only adds what joins it again.
    """
    actions: list[dict[str, Any]] = []

    def track(points: list[tuple[float, float]], layer: str) -> None:
        pts = [[x, y] for x, y in points]
        edits.add_track(tree, net, pts, layer, TRACK)
        actions.append({"tool": "add_track", "args": {"net": net, "points": pts, "layer": layer}})

    for line in explicit:
        track(list(line), "F.Cu")
    for line in back:
        track(list(line), "B.Cu")
    layer = "F.Cu"
    if net == "GND":
        layer = "B.Cu"
        board = design.board_from_tree(tree, "router")
        for island in drc.islands(board, net):
            if any(sh.pad is None or "B.Cu" in sh.layers for sh in island):
                continue  # already reaches B.Cu (a via, a THT pad) or has tracks
            pad = next(p for p in board.pads() if (p.ref, p.number) == island[0].pad)
            fp = board.footprints[pad.ref]
            vx, vy = via_spot(tree, pad, (fp.x, fp.y))
            track([(pad.x, pad.y), (vx, vy)], "F.Cu")
            edits.add_via(tree, net, vx, vy)
            actions.append({"tool": "add_via", "args": {"net": net, "x": vx, "y": vy}})
    for _ in range(64):
        board = design.board_from_tree(tree, "router")
        groups = drc.islands(board, net)
        if len(groups) <= 1:
            return actions
        pairs = []
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                for a in _anchors(groups[i], layer):
                    for b in _anchors(groups[j], layer):
                        pairs.append((math.dist(a, b), a, b))
        for _, a, b in sorted(pairs)[:40]:
            path = find_route(tree, net, a, b, layer)
            if path is not None:
                track(path, layer)
                break
        else:
            raise PcbBenchError(f"router: cannot join the islands of {net} on {layer}")
    raise PcbBenchError(f"router: {net} still in pieces")  # pragma: no cover


# ----------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class TaskSpec:
    """One task: the board, the defect, the fix and how it is judged."""

    id: str
    board: str
    kind: str  # decap_move, add_tvs, swap_footprint, change_value, fix_net, add_connector
    title: str
    objective: str
    setup: Callable[[BoardSpec], BoardSpec]
    solve: Callable[[Sandbox], None]
    checks: list[dict[str, Any]]
    changed: tuple[str, ...]  # file kinds that must change: "pcb", "sch"
    touched: tuple[str, ...]  # references the fix may change
    pcb_patch: Callable[[Node], None] | None = None
    sch_patch: Callable[[Node], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _same(spec: BoardSpec) -> BoardSpec:
    return spec


class _Recorder:
    """Runs a solution's actions in a sandbox and keeps them as the trajectory."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        self.actions: list[dict[str, Any]] = []

    def do(self, tool: str, **args: Any) -> None:
        action = {"tool": tool, "args": args}
        result = self.box.execute(action)
        if result.startswith("error:"):
            raise PcbBenchError(f"expert trajectory failed at {tool}: {result}")
        self.actions.append(action)

    def reroute(self, ref: str, nets: list[str]) -> None:
        """Route the moved part's nets with the router, recording each edit."""
        pcb = next(self.box.root.glob("*.kicad_pcb"))
        tree = design.read_tree(pcb, "kicad_pcb")
        for net in nets:
            for action in route_net(tree, net):
                self.actions.append(action)
        pcb.write_text(sexpr.dumps(tree), encoding="utf-8")


_CURRENT: dict[str, _Recorder] = {}


def _rec(box: Sandbox) -> _Recorder:
    return _CURRENT[str(box.root)]


def _move_decap(
    ref: str, x: float, y: float, rot: float, nets: list[str]
) -> Callable[[Sandbox], None]:
    def solve(box: Sandbox) -> None:
        r = _rec(box)
        r.do("delete_tracks", ref=ref)
        r.do("place", ref=ref, x=x, y=y, rotation=rot)
        r.reroute(ref, nets)

    return solve


def _add_part(
    ref: str, key: str, value: str, x: float, y: float, rot: float, nets: dict[str, str]
) -> Callable[[Sandbox], None]:
    def solve(box: Sandbox) -> None:
        r = _rec(box)
        r.do("add_part", ref=ref, part=key, value=value, x=x, y=y, rotation=rot, nets=nets)
        r.reroute(ref, sorted(set(nets.values())))

    return solve


def _actions(*steps: tuple[str, dict[str, Any]]) -> Callable[[Sandbox], None]:
    def solve(box: Sandbox) -> None:
        r = _rec(box)
        for tool, args in steps:
            r.do(tool, **args)

    return solve


def _common(touched: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {"kind": "unchanged", "except": list(touched)},
        {"kind": "cross_artifact"},
        {"kind": "drc"},
        {"kind": "kicad_cli_drc"},
        {"kind": "kicad_cli_erc"},
    ]


def _wrong_pad_net(ref: str, pad: str, net: str) -> Callable[[Node], None]:
    def patch(tree: Node) -> None:
        edits.set_pad_net(tree, ref, pad, net)

    return patch


def _wrong_pin_net(ref: str, pin: str, net: str) -> Callable[[Node], None]:
    def patch(tree: Node) -> None:
        edits.set_pin_net(tree, ref, pin, net)

    return patch


TASKS: list[TaskSpec] = [
    TaskSpec(
        "ldo_decap_vout",
        "ldo3v3",
        "decap_move",
        "Move the LDO output capacitor next to VOUT",
        "The 3.3 V rail of this LDO module oscillates under load steps. Review the output "
        "capacitor layout against the regulator's stability requirements in "
        "references/design_notes.md and fix the board. Do not change unrelated parts.",
        lambda b: b.with_comp("C2", x=122, y=111.5),
        _move_decap("C2", 122.0, 105.0, -90, ["+3V3", "GND"]),
        [
            {"kind": "pad_distance", "a": ["C2", "1"], "b": ["U1", "5"], "max_mm": 3.0},
            {"kind": "pad_nets", "ref": "C2", "pads": {"1": "+3V3", "2": "GND"}},
        ],
        ("pcb",),
        ("C2",),
    ),
    TaskSpec(
        "ldo_add_tvs",
        "ldo3v3",
        "add_tvs",
        "Add a TVS diode across the 5 V input",
        "Field returns show the AP2112K destroyed by hot-plug transients on the 5 V input "
        "cable. Add the input protection the design notes call for, in the schematic and on "
        "the board, at the input connector.",
        _same,
        _add_part("D1", "TVS_SMA", "SMBJ5.0A", 100.5, 106.0, 90, {"1": "+5V", "2": "GND"}),
        [
            {"kind": "component", "ref": "D1", "footprint": "Diode_SMD:D_SMA", "value": "SMBJ5.0A"},
            {"kind": "pad_nets", "ref": "D1", "pads": {"1": "+5V", "2": "GND"}},
            {"kind": "pin_nets", "ref": "D1", "pins": {"1": "+5V", "2": "GND"}},
            {"kind": "pad_distance", "a": ["D1", "1"], "b": ["J1", "1"], "max_mm": 8.0},
        ],
        ("pcb", "sch"),
        ("D1",),
    ),
    TaskSpec(
        "ldo_swap_c1_0603",
        "ldo3v3",
        "swap_footprint",
        "Move the input capacitor to the 0603 package",
        "The BOM is being consolidated: the input capacitor of this board must use the 0603 "
        "package (Capacitor_SMD:C_0603_1608Metric) from now on. Update the design so that "
        "schematic and board agree.",
        _same,
        _actions(("set_footprint", {"ref": "C1", "part": "C_0603"})),
        [
            {
                "kind": "component",
                "ref": "C1",
                "footprint": "Capacitor_SMD:C_0603_1608Metric",
                "near": [109.0, 105.0],
                "tol_mm": 0.5,
            },
            {
                "kind": "sch_field",
                "ref": "C1",
                "field": "Footprint",
                "value": "Capacitor_SMD:C_0603_1608Metric",
            },
            {"kind": "pad_nets", "ref": "C1", "pads": {"1": "+5V", "2": "GND"}},
        ],
        ("pcb", "sch"),
        ("C1",),
    ),
    TaskSpec(
        "ldo_c2_2u2",
        "ldo3v3",
        "change_value",
        "Raise the output capacitance to 2.2 uF",
        "Under the new 300 mA load the output ripple is too high; the regulator vendor "
        "recommends 2.2 uF on VOUT for loads above 250 mA. Update the output capacitor in "
        "both the schematic and the board.",
        _same,
        _actions(("set_value", {"ref": "C2", "value": "2.2uF"})),
        [
            {
                "kind": "component",
                "ref": "C2",
                "value": "2.2uF",
                "footprint": "Capacitor_SMD:C_0805_2012Metric",
            },
            {"kind": "sch_field", "ref": "C2", "field": "Value", "value": "2.2uF"},
        ],
        ("pcb", "sch"),
        ("C2",),
    ),
    TaskSpec(
        "opamp_decap_vplus",
        "opamp_buffer",
        "decap_move",
        "Move the op amp bypass capacitor next to V+",
        "The buffer output shows supply noise. Review whether the op amp's supply bypassing "
        "is laid out as its datasheet (references/design_notes.md) requires and fix the "
        "board; leave everything else as it is.",
        lambda b: b.with_comp("C1", x=128.5, y=113.0),
        _move_decap("C1", 123.2, 107.05, -90, ["+5V", "GND"]),
        [
            {"kind": "pad_distance", "a": ["C1", "1"], "b": ["U1", "8"], "max_mm": 3.5},
            {"kind": "pad_nets", "ref": "C1", "pads": {"1": "+5V", "2": "GND"}},
        ],
        ("pcb",),
        ("C1",),
    ),
    TaskSpec(
        "opamp_fix_r1_net",
        "opamp_buffer",
        "fix_net",
        "Fix the filter resistor's pad net on the board",
        "Board bring-up: the buffer input sits at 0 V whatever the input. The schematic is "
        "correct; find where the board disagrees with it and fix the board.",
        _same,
        _actions(("set_pad_net", {"ref": "R1", "pad": "2", "net": "IN_F"})),
        [{"kind": "pad_nets", "ref": "R1", "pads": {"1": "IN", "2": "IN_F"}}],
        ("pcb",),
        ("R1",),
        pcb_patch=_wrong_pad_net("R1", "2", "GND"),
    ),
    TaskSpec(
        "opamp_filter_34k",
        "opamp_buffer",
        "change_value",
        "Move the input filter corner to about 34 kHz",
        "The input filter is too slow for the new sensor: its corner must move to about "
        "34 kHz with R1 unchanged. Choose the E12 capacitor value and update both the "
        "schematic and the board.",
        _same,
        _actions(("set_value", {"ref": "C2", "value": "4.7nF"})),
        [
            {"kind": "component", "ref": "C2", "value": "4.7nF"},
            {"kind": "sch_field", "ref": "C2", "field": "Value", "value": "4.7nF"},
        ],
        ("pcb", "sch"),
        ("C2",),
    ),
    TaskSpec(
        "opamp_swap_r1_0603",
        "opamp_buffer",
        "swap_footprint",
        "Move the filter resistor to the 0603 package",
        "The assembly house has no 0805 1k resistors in stock: the filter resistor must use "
        "the 0603 package (Resistor_SMD:R_0603_1608Metric). Keep schematic and board in sync.",
        _same,
        _actions(("set_footprint", {"ref": "R1", "part": "R_0603"})),
        [
            {
                "kind": "component",
                "ref": "R1",
                "footprint": "Resistor_SMD:R_0603_1608Metric",
                "near": [108.54, 105.0],
                "tol_mm": 0.5,
            },
            {
                "kind": "sch_field",
                "ref": "R1",
                "field": "Footprint",
                "value": "Resistor_SMD:R_0603_1608Metric",
            },
            {"kind": "pad_nets", "ref": "R1", "pads": {"1": "IN", "2": "IN_F"}},
        ],
        ("pcb", "sch"),
        ("R1",),
    ),
    TaskSpec(
        "eeprom_decap_vcc",
        "i2c_eeprom",
        "decap_move",
        "Move the EEPROM decoupling capacitor next to VCC",
        "Writes to the EEPROM fail intermittently when the bus is long. Review the local "
        "decoupling of the EEPROM against references/design_notes.md and fix the board "
        "without touching unrelated parts.",
        lambda b: b.with_comp("C1", x=130.0, y=115.0),
        _move_decap("C1", 115.3, 110.855, -90, ["+3V3", "GND"]),
        [
            {"kind": "pad_distance", "a": ["C1", "1"], "b": ["U1", "8"], "max_mm": 3.5},
            {"kind": "pad_nets", "ref": "C1", "pads": {"1": "+3V3", "2": "GND"}},
        ],
        ("pcb",),
        ("C1",),
    ),
    TaskSpec(
        "eeprom_add_j2",
        "i2c_eeprom",
        "add_connector",
        "Add a daisy-chain connector",
        "Modules must be daisy-chainable: add a second 4-pin I2C header with the same pinout "
        "as J1, beside J1 on the same traces, connected in the schematic and on the board.",
        _same,
        _add_part(
            "J2",
            "PinHeader_1x04",
            "I2C",
            104.0,
            102.54,
            90,
            {"1": "GND", "2": "+3V3", "3": "SCL", "4": "SDA"},
        ),
        [
            {
                "kind": "component",
                "ref": "J2",
                "footprint": "Connector_PinHeader_2.54mm:PinHeader_1x04_P2.54mm_Vertical",
            },
            {
                "kind": "pad_nets",
                "ref": "J2",
                "pads": {"1": "GND", "2": "+3V3", "3": "SCL", "4": "SDA"},
            },
            {
                "kind": "pin_nets",
                "ref": "J2",
                "pins": {"1": "GND", "2": "+3V3", "3": "SCL", "4": "SDA"},
            },
        ],
        ("pcb", "sch"),
        ("J2",),
    ),
    TaskSpec(
        "eeprom_fix_wp",
        "i2c_eeprom",
        "fix_net",
        "Fix the write-protect pin in the schematic",
        "Firmware cannot write the EEPROM although the board matches the intended design. "
        "The schematic was edited by hand afterwards and no longer matches the board; "
        "correct the schematic so the two agree again.",
        _same,
        _actions(("set_pin_net", {"ref": "U1", "pin": "7", "net": "GND"})),
        [{"kind": "pin_nets", "ref": "U1", "pins": {"7": "GND", "8": "+3V3"}}],
        ("sch",),
        ("U1",),
        sch_patch=_wrong_pin_net("U1", "7", "+3V3"),
    ),
    TaskSpec(
        "eeprom_add_tvs",
        "i2c_eeprom",
        "add_tvs",
        "Add a TVS diode on the 3.3 V rail at the connector",
        "ESD testing at the cable connector resets the EEPROM. Add a unidirectional TVS "
        "(SMBJ3.3A, D_SMA) from the supply rail to ground next to J1, in the schematic and "
        "on the board.",
        _same,
        _add_part("D1", "TVS_SMA", "SMBJ3.3A", 103.0, 104.5, 90, {"1": "+3V3", "2": "GND"}),
        [
            {"kind": "component", "ref": "D1", "footprint": "Diode_SMD:D_SMA", "value": "SMBJ3.3A"},
            {"kind": "pad_nets", "ref": "D1", "pads": {"1": "+3V3", "2": "GND"}},
            {"kind": "pin_nets", "ref": "D1", "pins": {"1": "+3V3", "2": "GND"}},
            {"kind": "pad_distance", "a": ["D1", "1"], "b": ["J1", "2"], "max_mm": 8.0},
        ],
        ("pcb", "sch"),
        ("D1",),
    ),
]


# ----------------------------------------------------------------------------- trajectories


def describe_action(action: dict[str, Any]) -> str:
    """One step of an expert trajectory in words (the guided prompt's lines)."""
    a = action["args"]
    tool = action["tool"]

    def xy(x: float, y: float) -> str:
        return f"({sexpr.format_number(x)}, {sexpr.format_number(y)})"

    if tool == "delete_tracks":
        return f"Rip up the tracks and vias of {a['ref']}."
    if tool == "place":
        return (
            f"Move {a['ref']} to {xy(a['x'], a['y'])} with rotation "
            f"{sexpr.format_number(a.get('rotation', 0))}."
        )
    if tool == "add_track":
        pts = " to ".join(xy(*p) for p in a["points"])
        return f"Route {a['net']} on {a.get('layer', 'F.Cu')} from {pts}."
    if tool == "add_via":
        return f"Place a {a['net']} via at {xy(a['x'], a['y'])}."
    if tool == "add_part":
        nets = ", ".join(f"pad {k} to {v}" for k, v in a["nets"].items())
        return (
            f"Add {a['ref']} as part {a['part']} value {a['value']} at "
            f"{xy(a['x'], a['y'])} with rotation {sexpr.format_number(a.get('rotation', 0))}"
            f", {nets}."
        )
    if tool == "set_value":
        return f"Set the value of {a['ref']} to {a['value']}."
    if tool == "set_footprint":
        return f"Change the footprint of {a['ref']} to part {a['part']}."
    if tool == "set_pad_net":
        return f"Assign pad {a['pad']} of {a['ref']} to net {a['net']}."
    if tool == "set_pin_net":
        return f"Connect schematic pin {a['pin']} of {a['ref']} to net {a['net']}."
    raise PcbBenchError(f"no description for tool {tool!r}")


def guided_prompt(task: TaskSpec, actions: list[dict[str, Any]]) -> str:
    steps = "\n".join(f"{i}. {describe_action(a)}" for i, a in enumerate(actions, start=1))
    return (
        f"{task.objective}\n\nExpert trajectory (consulted: references/design_notes.md):\n"
        f"{steps}\n{len(actions) + 1}. Finish.\n"
    )


# ----------------------------------------------------------------------------- building


def write_board_files(spec: BoardSpec, out: Path, task: TaskSpec | None = None) -> None:
    """Write ``<name>.kicad_pro/.kicad_sch/.kicad_pcb`` and references/ into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    pcb = _board(spec)
    sch = _schematic(spec)
    if task is not None and task.pcb_patch is not None:
        task.pcb_patch(pcb)
    if task is not None and task.sch_patch is not None:
        task.sch_patch(sch)
    (out / f"{spec.name}.kicad_pro").write_text(_project(spec), encoding="utf-8")
    (out / f"{spec.name}.kicad_sch").write_text(sexpr.dumps(sch), encoding="utf-8")
    (out / f"{spec.name}.kicad_pcb").write_text(sexpr.dumps(pcb), encoding="utf-8")
    refs = out / "references"
    refs.mkdir(exist_ok=True)
    (refs / "design_notes.md").write_text(f"# {spec.title}\n\n{spec.notes}\n", encoding="utf-8")


def build_task(task: TaskSpec, tasks_dir: Path, hidden_dir: Path) -> None:
    """Write one task: its public folder and its hidden evaluation package, apart."""
    spec = task.setup(BOARDS[task.board])
    public = tasks_dir / task.id
    hidden = hidden_dir / task.id
    for d in (public, hidden):
        if d.exists():
            shutil.rmtree(d)
    workspace = public / "workspace"
    write_board_files(spec, workspace, task)
    with Sandbox(workspace) as box:
        rec = _Recorder(box)
        _CURRENT[str(box.root)] = rec
        try:
            task.solve(box)
        finally:
            _CURRENT.pop(str(box.root), None)
        truth = hidden / "ground_truth"
        truth.mkdir(parents=True)
        for name in (f"{spec.name}.kicad_sch", f"{spec.name}.kicad_pcb"):
            shutil.copyfile(box.root / name, truth / name)
    original = hidden / "original"
    original.mkdir()
    for name in (f"{spec.name}.kicad_sch", f"{spec.name}.kicad_pcb", f"{spec.name}.kicad_pro"):
        shutil.copyfile(workspace / name, original / name)
    prompts = public / "prompts"
    prompts.mkdir()
    (prompts / "objective.md").write_text(task.objective + "\n", encoding="utf-8")
    (prompts / "guided.md").write_text(guided_prompt(task, rec.actions), encoding="utf-8")
    meta = {
        "task_id": task.id,
        "title": task.title,
        "board": spec.name,
        "kind": task.kind,
        "prompts": {"objective": "prompts/objective.md", "guided": "prompts/guided.md"},
        "workspace": "workspace",
        "format": "KiCad 9",
    }
    (public / "task.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    validators = {
        "task_id": task.id,
        "project": spec.name,
        "required_files": [
            f"{spec.name}.kicad_pro",
            f"{spec.name}.kicad_sch",
            f"{spec.name}.kicad_pcb",
        ],
        "changed": list(task.changed),
        "checks": task.checks + _common(task.touched),
    }
    (hidden / "validators.json").write_text(
        json.dumps(validators, indent=2) + "\n", encoding="utf-8"
    )
    (hidden / "solution.json").write_text(
        json.dumps(rec.actions, indent=2) + "\n", encoding="utf-8"
    )


def build_all(root: Path) -> list[str]:
    """Write every task under ``root/tasks`` and ``root/hidden``; returns the task ids."""
    tasks_dir, hidden_dir = root / "tasks", root / "hidden"
    tasks_dir.mkdir(parents=True, exist_ok=True)
    hidden_dir.mkdir(parents=True, exist_ok=True)
    for task in TASKS:
        build_task(task, tasks_dir, hidden_dir)
    return [t.id for t in TASKS]


def check_board(spec: BoardSpec) -> drc.DrcReport:
    """The pure-Python DRC of a board spec as written (for building and tests)."""
    with tempfile.TemporaryDirectory() as tmp:
        write_board_files(spec, Path(tmp))
        board = design.load_board(Path(tmp) / f"{spec.name}.kicad_pcb")
    return drc.run_drc(board, CLEARANCE)
