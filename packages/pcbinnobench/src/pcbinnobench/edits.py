"""ECAD edits on the s-expression trees: the moves an engineer makes in KiCad, as functions.

The expert trajectories of the shipped tasks, the oracle, the heuristic agent and the agent
tools all edit through these, so a move is always a consistent move: :func:`place` turns a
footprint's pads and fields with it (KiCad 8/9 store absolute pad angles), :func:`delete_tracks`
rips up the copper chains hanging off a footprint, :func:`add_part` writes the schematic symbol
(with a wire stub and a net label on every pin) and the board footprint together,
:func:`set_footprint` swaps a package in both files keeping pad-to-net assignments.
Every function edits the tree in place and raises :class:`EditError` with one line when the
edit is impossible (no such reference, pad or net).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from pcbinnobench import parts as lib
from pcbinnobench.design import DesignError, _at, rotate
from pcbinnobench.errors import PcbBenchError
from pcbinnobench.parts import n, s, stable_uuid
from pcbinnobench.sexpr import Node, child, children, head, identity, num, select, text_value

__all__ = [
    "EditError",
    "add_part",
    "add_track",
    "add_via",
    "delete_tracks",
    "net_code",
    "place",
    "set_footprint",
    "set_pad_net",
    "set_pin_net",
    "set_value",
    "symbol_nodes",
]

STUB = 2.54  # mm: the wire from a schematic pin to its net label


class EditError(PcbBenchError):
    """An edit that cannot be made on this design."""


def _footprint(pcb: Node, ref: str) -> Node:
    found = [fp for fp in children(pcb, "footprint") if identity(fp) == ref]
    if not found:
        raise EditError(f"board: no footprint {ref!r}")
    if len(found) > 1:
        raise EditError(f"board: {len(found)} footprints are called {ref!r}")
    return found[0]


def _symbol(sch: Node, ref: str) -> Node:
    found = [sym for sym in children(sch, "symbol") if identity(sym) == ref]
    if not found:
        raise EditError(f"schematic: no symbol {ref!r}")
    return found[0]


def _finite(*values: float) -> None:
    for v in values:
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise EditError(f"not a finite number: {v!r}")


def _set_at(node: Node, x: float, y: float, angle: float | None) -> None:
    at = child(node, "at")
    new: Node = [s("at"), n(x), n(y)] + ([n(angle)] if angle else [])
    if at is None:
        node.insert(1, new)
    else:
        node[node.index(at)] = new


def _angle(node: Node) -> float:
    at = child(node, "at")
    if at is not None and len(at) > 3 and isinstance(at[3], (int, float)):
        return float(at[3])
    return 0.0


def _norm(angle: float) -> float:
    a = math.fmod(angle, 360.0)
    if a > 180:
        a -= 360
    if a <= -180:
        a += 360
    return 0.0 if abs(a) < 1e-9 else round(a, 6)


def place(pcb: Node, ref: str, x: float, y: float, rotation: float | None = None) -> None:
    """Move footprint ``ref`` to ``(x, y)``; with ``rotation``, turn it (pads and fields too)."""
    _finite(x, y, *([] if rotation is None else [rotation]))
    fp = _footprint(pcb, ref)
    old = _angle(fp)
    new = old if rotation is None else _norm(rotation)
    _set_at(fp, x, y, new)
    delta = new - old
    if delta:
        for item in fp[1:]:
            if head(item) in ("pad", "property", "fp_text") and child(item, "at") is not None:
                at = child(item, "at")
                assert at is not None
                _set_at(item, num(at[1]), num(at[2]), _norm(_angle(item) + delta))


def net_code(pcb: Node, name: str, create: bool = True) -> int:
    """The board's code for net ``name`` (a new ``(net N "name")`` if ``create``)."""
    if not name:
        return 0
    codes = {}
    for node in children(pcb, "net"):
        if len(node) > 2:
            codes[text_value(node[2])] = int(num(node[1]))
    if name in codes:
        return codes[name]
    if not create:
        raise EditError(f"board: no net {name!r}")
    code = max(codes.values(), default=0) + 1
    nets = [i for i, item in enumerate(pcb) if head(item) == "net"]
    pos = nets[-1] + 1 if nets else len(pcb)
    pcb.insert(pos, [s("net"), n(code), name])
    return code


def set_pad_net(pcb: Node, ref: str, pad: str, net: str) -> None:
    """Assign pad ``pad`` of ``ref`` to ``net`` on the board."""
    fp = _footprint(pcb, ref)
    found = [p for p in children(fp, "pad") if text_value(p[1]) == str(pad)]
    if not found:
        raise EditError(f"board: footprint {ref} has no pad {pad!r}")
    code = net_code(pcb, net)
    for p in found:
        old = child(p, "net")
        new: Node = [s("net"), n(code), net]
        if old is not None:
            p[p.index(old)] = new
        else:
            uid = child(p, "uuid")
            p.insert(p.index(uid) if uid is not None else len(p), new)


def _pad_geometry(fp: Node) -> list[tuple[float, float, float]]:
    """Absolute centre and reach (half the larger side) of every copper pad."""
    fx, fy, frot = _at(fp, "footprint")
    out = []
    for p in children(fp, "pad"):
        px, py, _ = _at(p, "pad")
        dx, dy = rotate(px, py, frot)
        size = child(p, "size")
        reach = max(num(size[1]), num(size[2])) / 2 if size is not None else 0.5
        out.append((fx + dx, fy + dy, reach))
    return out


def _key(x: float, y: float) -> tuple[int, int]:
    return round(x * 1e4), round(y * 1e4)


def delete_tracks(pcb: Node, ref: str) -> int:
    """Rip up the copper hanging off footprint ``ref``: every segment with an end on one of
    its pads, followed along the chain (through vias and bends) until it reaches another pad
    or a junction of three or more items. Returns how many items were removed."""
    pads = _pad_geometry(_footprint(pcb, ref))
    other = [
        g for fp in children(pcb, "footprint") if identity(fp) != ref for g in _pad_geometry(fp)
    ]

    def on(pads_: list[tuple[float, float, float]], x: float, y: float) -> bool:
        return any(math.hypot(x - px, y - py) <= r * 0.75 for px, py, r in pads_)

    items: list[tuple[Node, list[tuple[int, int]]]] = []
    for item in pcb[1:]:
        if head(item) == "segment":
            a, b = child(item, "start"), child(item, "end")
            if a is not None and b is not None:
                items.append((item, [_key(num(a[1]), num(a[2])), _key(num(b[1]), num(b[2]))]))
        elif head(item) == "via":
            at = child(item, "at")
            if at is not None:
                items.append((item, [_key(num(at[1]), num(at[2]))]))
    by_point: dict[tuple[int, int], list[int]] = {}
    for i, (_, pts) in enumerate(items):
        for pt in pts:
            by_point.setdefault(pt, []).append(i)
    removed: set[int] = set()
    frontier = [
        i
        for i, (item, pts) in enumerate(items)
        if head(item) == "segment" and any(on(pads, x / 1e4, y / 1e4) for x, y in pts)
    ]
    while frontier:
        i = frontier.pop()
        if i in removed:
            continue
        removed.add(i)
        for pt in items[i][1]:
            x, y = pt[0] / 1e4, pt[1] / 1e4
            if on(other, x, y):
                continue
            rest = [j for j in by_point[pt] if j not in removed]
            if len(rest) == 1:  # the chain goes on; at a junction it stops
                frontier.extend(rest)
    for i in sorted(removed, reverse=True):
        pcb.remove(items[i][0])
    return len(removed)


def add_track(
    pcb: Node,
    net: str,
    points: Sequence[Sequence[float]],
    layer: str = "F.Cu",
    width: float = 0.25,
) -> int:
    """Route ``net`` along ``points`` (two or more ``[x, y]``) on ``layer``."""
    if len(points) < 2:
        raise EditError("add_track: needs at least two points")
    pts = []
    for p in points:
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            raise EditError(f"add_track: a point must be [x, y], got {p!r}")
        _finite(*p)
        pts.append((float(p[0]), float(p[1])))
    _finite(width)
    if width <= 0:
        raise EditError(f"add_track: width must be > 0, got {width}")
    if layer not in ("F.Cu", "B.Cu"):
        raise EditError(f"add_track: layer must be F.Cu or B.Cu, got {layer!r}")
    code = net_code(pcb, net)
    existing = sum(1 for _ in children(pcb, "segment")) + sum(1 for _ in children(pcb, "via"))
    for k, (a, b) in enumerate(itertools.pairwise(pts)):
        pcb.insert(
            _track_slot(pcb),
            [
                s("segment"),
                [s("start"), n(a[0]), n(a[1])],
                [s("end"), n(b[0]), n(b[1])],
                [s("width"), n(width)],
                [s("layer"), layer],
                [s("net"), n(code)],
                [s("uuid"), stable_uuid("segment", net, a, b, layer, existing + k)],
            ],
        )
    return len(pts) - 1


def _track_slot(pcb: Node) -> int:
    last = [i for i, item in enumerate(pcb) if head(item) in ("segment", "via", "arc")]
    if last:
        return last[-1] + 1
    tail = [i for i, item in enumerate(pcb) if head(item) in ("zone", "embedded_fonts")]
    return tail[0] if tail else len(pcb)


def add_via(pcb: Node, net: str, x: float, y: float, size: float = 0.6, drill: float = 0.3) -> None:
    """A through via of ``net`` at ``(x, y)``."""
    _finite(x, y, size, drill)
    code = net_code(pcb, net)
    pcb.insert(
        _track_slot(pcb),
        [
            s("via"),
            [s("at"), n(x), n(y)],
            [s("size"), n(size)],
            [s("drill"), n(drill)],
            [s("layers"), "F.Cu", "B.Cu"],
            [s("net"), n(code)],
            [s("uuid"), stable_uuid("via", net, x, y)],
        ],
    )


def _set_property(node: Node, name: str, value: str) -> bool:
    for p in children(node, "property"):
        if len(p) > 2 and text_value(p[1]) == name:
            p[2] = value
            return True
    return False


def set_value(pcb: Node | None, sch: Node | None, ref: str, value: str) -> None:
    """Set the Value of ``ref`` in the schematic and/or on the board."""
    if not isinstance(value, str) or not value.strip():
        raise EditError("set_value: value must be a non-empty string")
    if sch is not None:
        _set_property(_symbol(sch, ref), "Value", value)
    if pcb is not None:
        _set_property(_footprint(pcb, ref), "Value", value)


def set_footprint(pcb: Node | None, sch: Node | None, ref: str, key: str) -> None:
    """Swap the package of ``ref`` for library part ``key`` (schematic field and board
    footprint), keeping its place, rotation, value and pad-to-net assignments."""
    new_part = lib.part(key)
    if sch is not None:
        _set_property(_symbol(sch, ref), "Footprint", new_part.footprint)
    if pcb is None:
        return
    fp = _footprint(pcb, ref)
    x, y, rot = _at(fp, f"footprint {ref}")
    value = next(
        (text_value(p[2]) for p in children(fp, "property") if text_value(p[1]) == "Value"), ""
    )
    nets: dict[str, tuple[int, str]] = {}
    for p in children(fp, "pad"):
        net = child(p, "net")
        if net is not None and len(net) > 2:
            nets[text_value(p[1])] = (int(num(net[1])), text_value(net[2]))
    missing = sorted(set(nets) - {q.number for q in new_part.pads})
    if missing:
        raise EditError(f"set_footprint {ref}: {key} has no pad(s) {', '.join(missing)}")
    uid = child(fp, "uuid")
    seed = text_value(uid[1]) if uid is not None else ref
    pcb[pcb.index(fp)] = lib.footprint_node(key, ref, value, x, y, rot, nets, seed + key)


# ----------------------------------------------------------------------------- schematic


def _pin_stub(
    pin: lib.PinSpec, x: float, y: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    px, py = x + pin.x, y - pin.y
    a = math.radians(pin.angle)
    ox, oy = -math.cos(a), math.sin(a)  # outward, in the y-down sheet frame
    return (px, py), (round(px + STUB * ox, 4), round(py + STUB * oy, 4))


def symbol_nodes(
    key: str,
    ref: str,
    value: str,
    x: float,
    y: float,
    nets: dict[str, str],
    project: str,
    root: str,
) -> list[Node]:
    """A schematic symbol of part ``key`` at ``(x, y)`` and, for each pin, a wire stub with a
    net label ``nets[pin]`` (a no-connect flag on pins without a net)."""
    p = lib.part(key)
    seed = f"sch/{ref}"
    sym: Node = [
        s("symbol"),
        [s("lib_id"), p.symbol],
        [s("at"), n(x), n(y), n(0)],
        [s("unit"), n(1)],
        [s("exclude_from_sim"), s("no")],
        [s("in_bom"), s("yes")],
        [s("on_board"), s("yes")],
        [s("dnp"), s("no")],
        [s("uuid"), stable_uuid(seed)],
    ]
    hw, _hh = p.body
    for name, text, dx, dy, hide in (
        ("Reference", ref, hw + 2.54, -1.27, False),
        ("Value", value, hw + 2.54, 1.27, False),
        ("Footprint", p.footprint, 0, 0, True),
        ("Datasheet", "~", 0, 0, True),
        ("Description", p.description, 0, 0, True),
    ):
        eff: Node = [s("effects"), [s("font"), [s("size"), n(1.27), n(1.27)]]]
        if hide:
            eff.append([s("hide"), s("yes")])
        else:
            eff.append([s("justify"), s("left")])
        sym.append([s("property"), name, text, [s("at"), n(x + dx), n(y + dy), n(0)], eff])
    for pin in p.pins:
        sym.append([s("pin"), pin.number, [s("uuid"), stable_uuid(seed, "pin", pin.number)]])
    sym.append(
        [
            s("instances"),
            [
                s("project"),
                project,
                [s("path"), f"/{root}", [s("reference"), ref], [s("unit"), n(1)]],
            ],
        ]
    )
    out = [sym]
    for pin in p.pins:
        (px, py), (ex, ey) = _pin_stub(pin, x, y)
        net = nets.get(pin.number, "")
        if not net:
            out.append(
                [
                    s("no_connect"),
                    [s("at"), n(px), n(py)],
                    [s("uuid"), stable_uuid(seed, "nc", pin.number)],
                ]
            )
            continue
        out.append(
            [
                s("wire"),
                [s("pts"), [s("xy"), n(px), n(py)], [s("xy"), n(ex), n(ey)]],
                [s("stroke"), [s("width"), n(0)], [s("type"), s("default")]],
                [s("uuid"), stable_uuid(seed, "wire", pin.number)],
            ]
        )
        angle = 180 if ex < px else (90 if ey < py else (270 if ey > py else 0))
        justify = [s("justify"), s("right" if angle == 180 else "left")]
        font: Node = [s("font"), [s("size"), n(1.27), n(1.27)]]
        # A global label: its net is called by its bare name on the board ("VOUT"), where a
        # local label's would be "/VOUT" (KiCad prefixes local labels with the sheet path).
        out.append(
            [
                s("global_label"),
                net,
                [s("shape"), s("passive")],
                [s("at"), n(ex), n(ey), n(angle)],
                [s("fields_autoplaced"), s("yes")],
                [s("effects"), font, justify],
                [s("uuid"), stable_uuid(seed, "label", pin.number)],
                [
                    s("property"),
                    "Intersheetrefs",
                    "${INTERSHEET_REFS}",
                    [s("at"), n(ex), n(ey), n(0)],
                    [s("effects"), font, justify, [s("hide"), s("yes")]],
                ],
            ]
        )
    return out


def _ensure_lib_symbol(sch: Node, key: str) -> None:
    libs = child(sch, "lib_symbols")
    if libs is None:
        libs = [s("lib_symbols")]
        sch.insert(len(sch), libs)
    name = lib.part(key).symbol
    if not any(text_value(sym[1]) == name for sym in children(libs, "symbol")):
        libs.append(lib.lib_symbol_node(key))
        libs[1:] = sorted(libs[1:], key=lambda node: text_value(node[1]))


def _insert_before_tail(tree: Node, nodes: list[Node], tail: tuple[str, ...]) -> None:
    pos = next((i for i, item in enumerate(tree) if head(item) in tail), len(tree))
    tree[pos:pos] = nodes


def add_part(
    pcb: Node | None,
    sch: Node | None,
    ref: str,
    key: str,
    value: str,
    x: float,
    y: float,
    rotation: float = 0.0,
    nets: dict[str, str] | None = None,
    sch_at: Sequence[float] | None = None,
) -> None:
    """Add a new component to the schematic (symbol, stubs, labels) and the board (footprint
    at ``(x, y, rotation)`` with its pads on ``nets``, pad number -> net name)."""
    p = lib.part(key)
    nets = {str(k): str(v) for k, v in (nets or {}).items()}
    unknown = sorted(set(nets) - {q.number for q in p.pads})
    if unknown:
        raise EditError(f"add_part {ref}: {key} has no pad(s) {', '.join(unknown)}")
    _finite(x, y, rotation)
    if pcb is not None:
        if any(identity(fp) == ref for fp in children(pcb, "footprint")):
            raise EditError(f"board: a footprint {ref!r} already exists")
        codes = {k: (net_code(pcb, v), v) for k, v in nets.items()}
        node = lib.footprint_node(key, ref, value, x, y, _norm(rotation), codes, f"pcb/{ref}")
        last = [i for i, item in enumerate(pcb) if head(item) == "footprint"]
        pcb.insert(last[-1] + 1 if last else len(pcb), node)
    if sch is not None:
        if any(identity(sym) == ref for sym in children(sch, "symbol")):
            raise EditError(f"schematic: a symbol {ref!r} already exists")
        sx, sy = (sch_at[0], sch_at[1]) if sch_at else _free_sheet_spot(sch)
        _finite(sx, sy)
        _ensure_lib_symbol(sch, key)
        uid = child(sch, "uuid")
        root = text_value(uid[1]) if uid is not None else ""
        project = _project_name(sch)
        nodes = symbol_nodes(key, ref, value, float(sx), float(sy), nets, project, root)
        _insert_before_tail(sch, nodes, ("sheet_instances", "embedded_fonts"))


def _project_name(sch: Node) -> str:
    for sym in children(sch, "symbol"):
        inst = child(sym, "instances")
        proj = child(inst, "project") if inst is not None else None
        if proj is not None and len(proj) > 1:
            return text_value(proj[1])
    return "project"


def _free_sheet_spot(sch: Node) -> tuple[float, float]:
    xs = [num(at[1]) for sym in children(sch, "symbol") if (at := child(sym, "at")) is not None]
    return (round(max(xs, default=50.8) + 30.48, 2), 50.8)


def set_pin_net(sch: Node, ref: str, pin: str, net: str) -> None:
    """Connect schematic pin ``pin`` of ``ref`` to ``net``: rename the label on its stub (or
    draw a stub and a global label where the pin has none; a no-connect flag there is
    removed). A local label keeps its kind, so its net stays prefixed with the sheet path."""
    if not isinstance(net, str) or not net.strip():
        raise EditError("set_pin_net: net must be a non-empty name")
    sym = _symbol(sch, ref)
    lib_id = text_value(child(sym, "lib_id")[1])  # type: ignore[index]
    part = next((p for p in lib.PARTS.values() if p.symbol == lib_id), None)
    if part is None:
        raise EditError(f"set_pin_net: symbol {ref} ({lib_id}) is not a library part here")
    spec = next((q for q in part.pins if q.number == str(pin)), None)
    if spec is None:
        raise EditError(f"set_pin_net: symbol {ref} has no pin {pin!r}")
    try:
        x, y, _ = _at(sym, ref)
    except DesignError as exc:
        raise EditError(str(exc)) from None
    (px, py), (ex, ey) = _pin_stub(spec, x, y)
    for lab in [*children(sch, "global_label"), *children(sch, "label")]:
        at = child(lab, "at")
        if at is not None and _key(num(at[1]), num(at[2])) == _key(ex, ey):
            lab[1] = net
            return
    for nc in list(children(sch, "no_connect")):
        at = child(nc, "at")
        if at is not None and _key(num(at[1]), num(at[2])) == _key(px, py):
            sch.remove(nc)
    uid = child(sym, "uuid")
    root = text_value(child(sch, "uuid")[1]) if child(sch, "uuid") else ""  # type: ignore[index]
    nodes = [
        node
        for node in symbol_nodes(part.key, ref, "", x, y, {str(pin): net}, "", root)[1:]
        if head(node) != "no_connect"
    ]
    for node in nodes:
        u = child(node, "uuid")
        if u is not None:
            u[1] = stable_uuid(text_value(uid[1]) if uid else ref, head(node), pin, net)
    _insert_before_tail(sch, nodes, ("sheet_instances", "embedded_fonts"))


def selection_count(tree: Node, path: str) -> int:
    """How many nodes ``path`` selects (for tool observations)."""
    return len(select(tree, path))


def describe_change(kind: str, **fields: Any) -> str:
    """A one-line account of an edit, for tool observations and trajectories."""
    args = ", ".join(f"{k}={v}" for k, v in fields.items())
    return f"{kind}({args})"
