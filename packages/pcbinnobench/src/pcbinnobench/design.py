"""The semantic design model: what a KiCad 8/9 board and schematic mean, read from the tree.

Validators judge meaning, never bytes, so everything they compare lives here: a board's
footprints (reference, value, library footprint, side, position, rotation), its pads (number,
net, shape, absolute position), tracks, vias and zones; a schematic's symbols (reference,
value, footprint field, position), and its nets, computed from the drawing itself the way
KiCad's connectivity does it (pins, wires, junction-free T-joins, labels, power symbols).

Geometry follows KiCad's conventions: millimetres, y pointing down, angles in degrees
counter-clockwise as seen on screen. A pad's ``(at x y a)`` is relative to its footprint and
rotated with it: ``p_abs = f + R(theta_f) p`` with ``R(theta) = [[cos, sin], [-sin, cos]]`` in
y-down coordinates. A schematic pin's ``(at x y a)`` is its connection point in the symbol
library's y-up frame: ``p_sheet = s + R(theta_s) M (x, -y)`` (``M`` the symbol's mirror).

KiCad 6 and 7 files are refused with one line (their references are ``fp_text reference``,
not properties, and pad nets and several keywords differ); open and save them in KiCad 8+.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcbinnobench import sexpr
from pcbinnobench.errors import PcbBenchError
from pcbinnobench.sexpr import Node, child, children, head, num, text_value

__all__ = [
    "BOARD_MIN_VERSION",
    "SCHEMATIC_MIN_VERSION",
    "Board",
    "DesignError",
    "Footprint",
    "Pad",
    "SchSymbol",
    "Schematic",
    "Track",
    "Via",
    "Zone",
    "load_board",
    "load_schematic",
    "read_tree",
    "rotate",
]

#: KiCad 8.0's first board / schematic file versions; KiCad 9 writes 20241229 / 20250114.
BOARD_MIN_VERSION = 20240108
SCHEMATIC_MIN_VERSION = 20231120
_KICAD_RELEASE = [  # (first version, release) for the error message
    (20250114, "9"),
    (20241229, "9"),
    (20240108, "8"),
    (20231120, "8"),
    (20221018, "7"),
    (20230121, "7"),
    (20211014, "6"),
    (20211123, "6"),
]
_GRID = 1e-4  # mm: coordinates are compared on this grid (KiCad's internal unit is 1 nm)


class DesignError(PcbBenchError):
    """A KiCad file this model cannot read: wrong kind, too old, or missing a needed field."""


def _release(version: int) -> str:
    for first, release in sorted(_KICAD_RELEASE, reverse=True):
        if version >= first:
            return f"KiCad {release}"
    return "KiCad 5 or older"


def read_tree(path: str | Path, kind: str) -> Node:
    """Read and parse one KiCad file, checking its head (``kicad_pcb``/``kicad_sch``) and that
    it is KiCad 8 or newer; every failure is one :class:`~pcbinnobench.errors.PcbBenchError`."""
    p = Path(path)
    if p.is_dir():
        raise DesignError(f"{p}: is a directory, expected a .{kind} file")
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise DesignError(f"{p}: no such file") from None
    except OSError as exc:
        raise DesignError(f"{p}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DesignError(f"{p}: not UTF-8 text (a KiCad file is UTF-8)") from None
    tree = sexpr.loads(text, source=str(p))
    return check_tree(tree, kind, str(p))


def check_tree(tree: Node, kind: str, source: str) -> Node:
    """The head and version checks of :func:`read_tree` for an already parsed tree."""
    if head(tree) != kind:
        raise DesignError(f"{source}: a ({head(tree)} ...) file, expected ({kind} ...)")
    version_node = child(tree, "version")
    if version_node is None or len(version_node) < 2:
        raise DesignError(f"{source}: no (version ...); KiCad 6+ files always have one")
    try:
        version = int(num(version_node[1], "version"))
    except sexpr.SexprError:
        raise DesignError(
            f"{source}: version {text_value(version_node[1])!r} is not a number"
        ) from None
    minimum = BOARD_MIN_VERSION if kind == "kicad_pcb" else SCHEMATIC_MIN_VERSION
    if version < minimum:
        legacy = ""
        if kind == "kicad_pcb" and any(
            head(t) == "fp_text" and len(t) > 1 and text_value(t[1]) == "reference"
            for fp in children(tree, "footprint")
            for t in fp
            if isinstance(t, list)
        ):
            legacy = ", references as fp_text"
        raise DesignError(
            f"{source}: {_release(version)} format (version {version}{legacy}); pcbinnobench "
            "reads KiCad 8/9 files: open and save it in KiCad 8 or newer"
        )
    return tree


def rotate(x: float, y: float, degrees: float) -> tuple[float, float]:
    """Rotate a y-down vector counter-clockwise on screen by ``degrees`` (KiCad's sense)."""
    if degrees == 0:
        return x, y
    t = math.radians(degrees)
    c, s = math.cos(t), math.sin(t)
    return x * c + y * s, -x * s + y * c


def _at(node: Node, what: str) -> tuple[float, float, float]:
    at = child(node, "at")
    if at is None or len(at) < 3:
        raise DesignError(f"{what}: no (at x y) position")
    angle = num(at[3], what) if len(at) > 3 and isinstance(at[3], (int, float)) else 0.0
    return num(at[1], what), num(at[2], what), angle


def _prop(node: Node, name: str) -> str | None:
    for p in children(node, "property"):
        if len(p) > 2 and text_value(p[1]) == name:
            return text_value(p[2])
    return None


def _xy(node: Node | None, what: str) -> tuple[float, float]:
    if node is None or len(node) < 3:
        raise DesignError(f"{what}: missing coordinates")
    return num(node[1], what), num(node[2], what)


def _snap(x: float, y: float) -> tuple[int, int]:
    return round(x / _GRID), round(y / _GRID)


# ----------------------------------------------------------------------------- board


@dataclass(frozen=True)
class Pad:
    """One pad, in board coordinates. ``layers`` are the copper layers it sits on."""

    ref: str
    number: str
    net: str
    kind: str  # smd, thru_hole, np_thru_hole, connect
    shape: str  # rect, roundrect, circle, oval, trapezoid, custom
    x: float
    y: float
    width: float
    height: float
    angle: float  # absolute orientation, degrees
    layers: tuple[str, ...]
    roundrect_ratio: float = 0.0


@dataclass(frozen=True)
class Footprint:
    """A placed footprint: what a reviewer checks (reference, value, library id, placement)."""

    ref: str
    value: str
    lib_id: str
    layer: str
    x: float
    y: float
    rotation: float
    pads: tuple[Pad, ...]
    board_only: bool = False

    def pad(self, number: str) -> Pad:
        for p in self.pads:
            if p.number == number:
                return p
        known = ", ".join(sorted({p.number for p in self.pads})) or "none"
        raise DesignError(f"footprint {self.ref}: no pad {number!r} (pads: {known})")


@dataclass(frozen=True)
class Track:
    """A straight copper segment (arcs are split into segments when read)."""

    x1: float
    y1: float
    x2: float
    y2: float
    width: float
    layer: str
    net: str


@dataclass(frozen=True)
class Via:
    x: float
    y: float
    size: float
    drill: float
    layers: tuple[str, ...]
    net: str


@dataclass(frozen=True)
class Zone:
    """A copper zone: its net, layers, outline and (if filled) fill polygons."""

    net: str
    layers: tuple[str, ...]
    outline: tuple[tuple[float, float], ...]
    fills: tuple[tuple[str, tuple[tuple[float, float], ...]], ...]


@dataclass
class Board:
    """What a ``.kicad_pcb`` means. ``copper`` lists the board's copper layers in order."""

    source: str
    version: int
    copper: tuple[str, ...]
    nets: tuple[str, ...]
    footprints: dict[str, Footprint]
    tracks: list[Track]
    vias: list[Via]
    zones: list[Zone]
    outline: tuple[float, float, float, float] | None  # xmin, ymin, xmax, ymax of Edge.Cuts
    duplicates: tuple[str, ...] = ()

    def footprint(self, ref: str) -> Footprint:
        try:
            return self.footprints[ref]
        except KeyError:
            raise DesignError(f"{self.source}: no footprint {ref!r}") from None

    def pads(self) -> list[Pad]:
        return [p for fp in self.footprints.values() for p in fp.pads]

    def pad_nets(self) -> dict[tuple[str, str], str]:
        """(reference, pad number) -> net name, for every pad with a net."""
        return {(p.ref, p.number): p.net for p in self.pads() if p.net and p.number}


def _layers(node: Node, what: str) -> tuple[str, ...]:
    lay = child(node, "layers") or child(node, "layer")
    if lay is None:
        raise DesignError(f"{what}: no layer")
    return tuple(text_value(v) for v in lay[1:] if not isinstance(v, list))


def _expand_copper(layers: Iterable[str], copper: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for name in layers:
        if name in ("*.Cu", "F&B.Cu"):
            out.extend(copper if name == "*.Cu" else [c for c in copper if c in ("F.Cu", "B.Cu")])
        elif name.endswith(".Cu") and name in copper:
            out.append(name)
    return tuple(dict.fromkeys(out))


def _net_name(node: Node, numbers: dict[int, str]) -> str:
    net = child(node, "net")
    if net is None or len(net) < 2:
        return ""
    if len(net) > 2:  # (net 3 "GND") on pads; (net "GND") in KiCad 10
        return text_value(net[2])
    value = net[1]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return numbers.get(int(value), "")
    return text_value(value)


def _pts(node: Node | None, what: str) -> tuple[tuple[float, float], ...]:
    if node is None:
        return ()
    return tuple(_xy(p, what) for p in children(node, "xy"))


def load_board(path: str | Path) -> Board:
    """Read a KiCad 8/9 ``.kicad_pcb`` into a :class:`Board` (one error line if it can't)."""
    return board_from_tree(read_tree(path, "kicad_pcb"), str(path))


def board_from_tree(tree: Node, source: str) -> Board:
    check_tree(tree, "kicad_pcb", source)
    version = int(num(child(tree, "version")[1]))  # type: ignore[index]
    layer_node = child(tree, "layers")
    copper = tuple(
        text_value(lay[1])
        for lay in (layer_node[1:] if layer_node else [])
        if isinstance(lay, list) and len(lay) > 1 and text_value(lay[1]).endswith(".Cu")
    ) or ("F.Cu", "B.Cu")
    numbers: dict[int, str] = {}
    for n in children(tree, "net"):
        if len(n) > 2 and isinstance(n[1], (int, float)):
            numbers[int(n[1])] = text_value(n[2])
    footprints: dict[str, Footprint] = {}
    duplicates: list[str] = []
    for i, fp in enumerate(children(tree, "footprint")):
        ref = sexpr.identity(fp) or f"#fp{i}"
        what = f"{source}: footprint {ref}"
        fx, fy, frot = _at(fp, what)
        attr = child(fp, "attr")
        board_only = attr is not None and any(text_value(a) == "board_only" for a in attr[1:])
        pads: list[Pad] = []
        for pad in children(fp, "pad"):
            if len(pad) < 4:
                raise DesignError(f"{what}: a pad without number, type and shape")
            px, py, pa = _at(pad, f"{what} pad {text_value(pad[1])}")
            dx, dy = rotate(px, py, frot)
            size = child(pad, "size")
            w, h = _xy(size, f"{what} pad {text_value(pad[1])} size")
            ratio = child(pad, "roundrect_rratio")
            pads.append(
                Pad(
                    ref=ref,
                    number=text_value(pad[1]),
                    net=_net_name(pad, numbers),
                    kind=text_value(pad[2]),
                    shape=text_value(pad[3]),
                    x=fx + dx,
                    y=fy + dy,
                    width=w,
                    height=h,
                    angle=pa,  # KiCad 8/9 store the pad's absolute orientation
                    layers=_expand_copper(_layers(pad, f"{what} pad"), copper),
                    roundrect_ratio=num(ratio[1]) if ratio is not None and len(ratio) > 1 else 0,
                )
            )
        if ref in footprints:
            duplicates.append(ref)
        footprints[ref] = Footprint(
            ref=ref,
            value=_prop(fp, "Value") or "",
            lib_id=text_value(fp[1]) if len(fp) > 1 and not isinstance(fp[1], list) else "",
            layer=text_value(child(fp, "layer")[1]) if child(fp, "layer") else "F.Cu",  # type: ignore[index]
            x=fx,
            y=fy,
            rotation=frot,
            pads=tuple(pads),
            board_only=board_only,
        )
    tracks: list[Track] = []
    for seg in children(tree, "segment"):
        (x1, y1), (x2, y2) = _xy(child(seg, "start"), source), _xy(child(seg, "end"), source)
        width = num(child(seg, "width")[1]) if child(seg, "width") else 0.2  # type: ignore[index]
        layer = _layers(seg, f"{source}: segment")[0]
        tracks.append(Track(x1, y1, x2, y2, width, layer, _net_name(seg, numbers)))
    for arc in children(tree, "arc"):
        pts = [_xy(child(arc, k), source) for k in ("start", "mid", "end")]
        width = num(child(arc, "width")[1]) if child(arc, "width") else 0.2  # type: ignore[index]
        layer = _layers(arc, f"{source}: arc")[0]
        for a, b in _arc_polyline(pts[0], pts[1], pts[2]):
            tracks.append(Track(a[0], a[1], b[0], b[1], width, layer, _net_name(arc, numbers)))
    vias: list[Via] = []
    for via in children(tree, "via"):
        x, y = _xy(child(via, "at"), f"{source}: via")
        via_size = num(child(via, "size")[1]) if child(via, "size") else 0.6  # type: ignore[index]
        drill = num(child(via, "drill")[1]) if child(via, "drill") else 0.3  # type: ignore[index]
        vlayers = _layers(via, f"{source}: via")
        span = copper if len(vlayers) == 2 and set(vlayers) == {"F.Cu", "B.Cu"} else vlayers
        vias.append(
            Via(x, y, via_size, drill, _expand_copper(span, copper), _net_name(via, numbers))
        )
    zones: list[Zone] = []
    for zone in children(tree, "zone"):
        zlayers = _expand_copper(_layers(zone, f"{source}: zone"), copper)
        if not zlayers:
            continue  # a keep-out or a zone on a non-copper layer
        outline = _pts(child(child(zone, "polygon") or [], "pts"), f"{source}: zone")
        fills = []
        for fill in children(zone, "filled_polygon"):
            flayer = child(fill, "layer")
            fills.append(
                (
                    text_value(flayer[1]) if flayer else zlayers[0],
                    _pts(child(fill, "pts"), f"{source}: zone fill"),
                )
            )
        zones.append(Zone(_net_name(zone, numbers), zlayers, outline, tuple(fills)))
    return Board(
        source=source,
        version=version,
        copper=copper,
        nets=tuple(sorted(set(numbers.values()) - {""})),
        footprints=footprints,
        tracks=tracks,
        vias=vias,
        zones=zones,
        outline=_edge_bbox(tree),
        duplicates=tuple(duplicates),
    )


def _arc_polyline(
    a: tuple[float, float], m: tuple[float, float], b: tuple[float, float], pieces: int = 8
) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """A three-point arc as ``pieces`` chords (clearance to an arc is within its sagitta)."""
    ax, ay = a
    bx, by = m
    cx, cy = b
    d = 2 * (ax * (by - cy) + bx * (cy - ay) + cx * (ay - by))
    if abs(d) < 1e-12:
        return [(a, b)]
    ux = (ax**2 + ay**2) * (by - cy) + (bx**2 + by**2) * (cy - ay) + (cx**2 + cy**2) * (ay - by)
    uy = (ax**2 + ay**2) * (cx - bx) + (bx**2 + by**2) * (ax - cx) + (cx**2 + cy**2) * (bx - ax)
    ox, oy = ux / d, uy / d
    r = math.hypot(ax - ox, ay - oy)
    t0, tm, t1 = (math.atan2(p[1] - oy, p[0] - ox) for p in (a, m, b))
    span = (t1 - t0) % (2 * math.pi)
    if not ((tm - t0) % (2 * math.pi)) <= span:
        span -= 2 * math.pi
    pts = [
        (ox + r * math.cos(t0 + span * k / pieces), oy + r * math.sin(t0 + span * k / pieces))
        for k in range(pieces + 1)
    ]
    return list(itertools.pairwise(pts))


def _edge_bbox(tree: Node) -> tuple[float, float, float, float] | None:
    xs: list[float] = []
    ys: list[float] = []
    for item in tree[1:]:
        if not isinstance(item, list) or head(item) not in (
            "gr_line",
            "gr_rect",
            "gr_arc",
            "gr_poly",
            "gr_circle",
        ):
            continue
        layer = child(item, "layer")
        if layer is None or text_value(layer[1]) != "Edge.Cuts":
            continue
        for key in ("start", "end", "mid", "center"):
            node = child(item, key)
            if node is not None:
                x, y = _xy(node, "Edge.Cuts")
                xs.append(x)
                ys.append(y)
        for x, y in _pts(child(item, "pts"), "Edge.Cuts"):
            xs.append(x)
            ys.append(y)
    if not xs:
        return None
    return min(xs), min(ys), max(xs), max(ys)


# ----------------------------------------------------------------------------- schematic


@dataclass(frozen=True)
class SchPin:
    number: str
    name: str
    x: float  # sheet coordinates of the connection point
    y: float
    electrical: str


@dataclass(frozen=True)
class SchSymbol:
    """A placed schematic symbol. ``power`` symbols name a global net by their value."""

    ref: str
    value: str
    footprint: str
    lib_id: str
    x: float
    y: float
    rotation: float
    unit: int
    on_board: bool
    in_bom: bool
    power: bool
    pins: tuple[SchPin, ...]


@dataclass
class Schematic:
    """What a ``.kicad_sch`` means: its symbols and its nets as KiCad would connect them.

    ``nets`` maps a net name to its ``(reference, pin number)`` members. Named nets come from
    labels and power symbols, with KiCad's sheet-path prefixes (see :func:`schematic_from_tree`);
    a net of pins alone is ``Net-(REF-PIN)`` as KiCad names it (compare nets as graphs, see
    :mod:`pcbinnobench.validators`). ``sheets`` counts the sub-sheet instances followed."""

    source: str
    version: int
    symbols: dict[str, SchSymbol]
    nets: dict[str, frozenset[tuple[str, str]]]
    sheets: int = 0
    duplicates: tuple[str, ...] = ()
    dangling_labels: tuple[str, ...] = ()

    def symbol(self, ref: str) -> SchSymbol:
        try:
            return self.symbols[ref]
        except KeyError:
            raise DesignError(f"{self.source}: no symbol {ref!r}") from None

    def pin_nets(self) -> dict[tuple[str, str], str]:
        return {member: name for name, members in self.nets.items() for member in members}

    def parts(self) -> dict[str, SchSymbol]:
        """The symbols that become footprints (no power symbols, on the board)."""
        return {r: s for r, s in self.symbols.items() if not s.power and s.on_board}


@dataclass
class _LibPin:
    number: str
    name: str
    x: float
    y: float
    unit: int
    electrical: str


@dataclass
class _LibSymbol:
    power: bool | str  # False, True (a global power symbol) or "local" (KiCad 9)
    pins: list[_LibPin] = field(default_factory=list)


def _lib_symbols(tree: Node, source: str) -> dict[str, _LibSymbol]:
    libs: dict[str, _LibSymbol] = {}
    lib_node = child(tree, "lib_symbols")
    for sym in children(lib_node, "symbol") if lib_node else []:
        name = text_value(sym[1])
        power = child(sym, "power")
        entry = _LibSymbol(
            power=False
            if power is None
            else ("local" if any(text_value(v) == "local" for v in power[1:]) else True)
        )
        for unit_node in children(sym, "symbol"):
            unit_name = text_value(unit_node[1])  # "Device:C_0_1": unit 0 = all units
            try:
                unit = int(unit_name.rsplit("_", 2)[-2])
            except (ValueError, IndexError):
                unit = 0
            for pin in children(unit_node, "pin"):
                x, y, _ = _at(pin, f"{source}: lib symbol {name} pin")
                number = child(pin, "number")
                pname = child(pin, "name")
                entry.pins.append(
                    _LibPin(
                        number=text_value(number[1]) if number else "",
                        name=text_value(pname[1]) if pname else "",
                        x=x,
                        y=y,
                        unit=unit,
                        electrical=text_value(pin[1]) if len(pin) > 1 else "",
                    )
                )
        libs[name] = entry
    return libs


def _place_pin(
    px: float, py: float, sym_node: Node, x: float, y: float, rot: float
) -> tuple[float, float]:
    vx, vy = px, -py  # library frame is y-up
    mirror = child(sym_node, "mirror")
    if mirror is not None and len(mirror) > 1:
        if text_value(mirror[1]) == "x":
            vy = -vy
        elif text_value(mirror[1]) == "y":
            vx = -vx
    dx, dy = rotate(vx, vy, rot)
    return x + dx, y + dy


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, a: Any) -> Any:
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def _on_segment(p: tuple[int, int], a: tuple[int, int], b: tuple[int, int]) -> bool:
    (px, py), (ax, ay), (bx, by) = p, a, b
    if (bx - ax) * (py - ay) - (by - ay) * (px - ax) != 0:
        return False
    return min(ax, bx) <= px <= max(ax, bx) and min(ay, by) <= py <= max(ay, by)


def load_schematic(path: str | Path) -> Schematic:
    """Read a KiCad 8/9 ``.kicad_sch`` (the root sheet) into a :class:`Schematic` with its
    nets, following its hierarchical sub-sheets from the files beside it."""
    p = Path(path)
    return schematic_from_tree(read_tree(p, "kicad_sch"), str(p), directory=p.parent)


# KiCad's net driver priorities (eeschema connection_graph.h, CONNECTION_SUBGRAPH::PRIORITY):
# a net takes the name of its strongest driver. Drivers at HIER_LABEL and above are "strong";
# a sheet pin or a plain pin is "weak" (a net driven only by pins gets an auto name).
_PIN, _SHEET_PIN, _HIER_LABEL, _LOCAL_LABEL, _LOCAL_POWER, _POWER_PIN, _GLOBAL = range(1, 8)
_STRONG = _HIER_LABEL
_MAX_SHEET_DEPTH = 32  # deeper than any real design; stops a sheet that includes itself


@dataclass(frozen=True)
class _Driver:
    """A net driver: its priority, the depth of its sheet, and the net name it gives."""

    priority: int
    depth: int
    name: str


@dataclass
class _SheetInstance:
    """One placement of a sheet in the hierarchy: the uuid path KiCad keys symbol instances
    by (``/<root uuid>/<sheet uuid>...``) and the human path net names carry (``/Power/``)."""

    tree: Node
    source: str
    directory: Path | None
    uuid_path: str
    name_path: str
    depth: int


def _sheet_field(sheet: Node, *names: str) -> str:
    for name in names:  # KiCad 8/9 "Sheetname"; KiCad 7 wrote "Sheet name"
        value = _prop(sheet, name)
        if value is not None:
            return value
    return ""


def _instances(tree: Node, source: str, directory: Path | None) -> list[_SheetInstance]:
    """Every sheet instance of the design, root first, depth first (KiCad's sheet order).

    A sub-sheet's file is read relative to the sheet holding it (KiCad resolves
    ``Sheetfile`` against the parent's folder); a file shared by two sheet symbols is read
    once and instantiated twice, each instance with its own references. Without
    ``directory`` sub-sheets are not followed."""
    uid = child(tree, "uuid")
    root = _SheetInstance(
        tree, source, directory, "/" + (text_value(uid[1]) if uid else ""), "/", 0
    )
    out = [root]
    cache: dict[Path, Node] = {}

    def visit(inst: _SheetInstance, chain: tuple[Path, ...]) -> None:
        if inst.directory is None:
            return
        for sheet in children(inst.tree, "sheet"):
            file_name = _sheet_field(sheet, "Sheetfile", "Sheet file")
            sheet_name = _sheet_field(sheet, "Sheetname", "Sheet name")
            suid = child(sheet, "uuid")
            if not file_name:
                raise DesignError(f"{inst.source}: sheet {sheet_name!r} names no Sheetfile")
            path = (inst.directory / file_name).resolve()
            if path in chain or len(chain) > _MAX_SHEET_DEPTH:
                raise DesignError(f"{inst.source}: sheet {sheet_name!r} includes itself")
            if path not in cache:
                cache[path] = read_tree(path, "kicad_sch")
            sub = _SheetInstance(
                cache[path],
                str(inst.directory / file_name),
                path.parent,
                f"{inst.uuid_path}/{text_value(suid[1]) if suid else sheet_name}",
                f"{inst.name_path}{sheet_name}/",
                inst.depth + 1,
            )
            out.append(sub)
            visit(sub, (*chain, path))

    visit(root, (Path(source).resolve() if directory is not None else Path(source),))
    return out


def _instance_ref_unit(sym: Node, uuid_path: str, fallback_ref: str, unit: int) -> tuple[str, int]:
    """A symbol's reference and unit in one sheet instance: KiCad 8/9 keep them per sheet
    path under ``(instances (project ... (path "/root/sheet" (reference ..) (unit ..))))``
    (a sheet used twice has two), the ``Reference`` field holding only the last shown."""
    inst = child(sym, "instances")
    for proj in children(inst, "project") if inst is not None else ():
        for path in children(proj, "path"):
            if len(path) > 1 and text_value(path[1]) == uuid_path:
                ref_node, unit_node = child(path, "reference"), child(path, "unit")
                ref = text_value(ref_node[1]) if ref_node is not None else fallback_ref
                if unit_node is not None and len(unit_node) > 1:
                    unit = int(num(unit_node[1]))
                return ref, unit
    return fallback_ref, unit


def _auto_net_name(ref: str, pin: _LibPin, pins: list[_LibPin]) -> str:
    """What a pin calls a net driven by pins alone (eeschema's ``SCH_PIN::GetDefaultNetName``):
    ``Net-(U1-FB)`` after the pin's name, ``Net-(C1-Pad2)`` when the pin has no name or is
    named by its number, ``Net-(U4-Rg-Pad5)`` when another pin of the part shares its name.
    A "/" in a pin name is written ``{slash}`` (net names use "/" for sheet paths)."""
    name = "" if pin.name in ("", "~") else pin.name.replace("/", "{slash}")
    number = pin.number.replace("/", "{slash}")
    if not name or name == pin.number:
        return f"Net-({ref}-Pad{number})"
    if any(q.name == pin.name and q.number != pin.number for q in pins):
        return f"Net-({ref}-{name}-Pad{number})"
    return f"Net-({ref}-{name})"


def schematic_from_tree(tree: Node, source: str, directory: str | Path | None = None) -> Schematic:
    """Symbols and nets of a design whose root sheet is ``tree``, named the way KiCad names
    them on the board.

    Sub-sheets are followed when ``directory`` (the root file's folder) is given: a
    hierarchical label in a sub-sheet joins the net of the sheet pin of the same name on its
    parent, global labels and power symbols join by name everywhere, local labels by name
    within one sheet instance. A net takes the name of its strongest driver, as in eeschema's
    connection graph: a global label or power symbol gives its bare name (``GND``); a local
    label the sheet path plus its name (``/OUT`` on the root sheet, ``/Power/OUT`` in sheet
    "Power"); a hierarchical label its sub-sheet's path (``/Power/VOUT``) unless the parent
    names the net more strongly; among equal drivers the one higher in the hierarchy, then the
    alphabetically lower name. A net driven by pins alone is ``Net-(REF-PIN)`` after one of its
    pins (``Net-(U1-FB)``; ``Net-(C1-Pad2)`` for a pin without a name), preferring named pins
    and then the alphabetically lowest, as eeschema does for weak drivers."""
    check_tree(tree, "kicad_sch", source)
    version = int(num(child(tree, "version")[1]))  # type: ignore[index]
    instances = _instances(tree, source, Path(directory) if directory is not None else None)
    uf = _UnionFind()
    symbols: dict[str, SchSymbol] = {}
    duplicates: list[str] = []
    pin_points: list[tuple[tuple[str, str], Any]] = []
    drivers: list[tuple[_Driver, Any]] = []  # (driver, union-find node)
    auto_names: list[tuple[str, Any]] = []  # what each pin would call a net of pins alone
    lib_cache: dict[int, dict[str, _LibSymbol]] = {}
    for idx, inst in enumerate(instances):
        sheet_tree, src = inst.tree, inst.source
        if id(sheet_tree) not in lib_cache:
            if sheet_tree is not tree:
                check_tree(sheet_tree, "kicad_sch", src)
            lib_cache[id(sheet_tree)] = _lib_symbols(sheet_tree, src)
        libs = lib_cache[id(sheet_tree)]
        points: set[tuple[int, int]] = set()

        def at_point(pt: tuple[int, int], _idx: int = idx) -> tuple[str, int, tuple[int, int]]:
            return ("pt", _idx, pt)

        for i, sym in enumerate(children(sheet_tree, "symbol")):
            lib_id_node = child(sym, "lib_id")
            if lib_id_node is None:
                continue
            lib_id = text_value(lib_id_node[1])
            unit_node = child(sym, "unit")
            ref, unit = _instance_ref_unit(
                sym,
                inst.uuid_path,
                _prop(sym, "Reference") or f"#sym{idx}.{i}",
                int(num(unit_node[1])) if unit_node else 1,
            )
            x, y, rot = _at(sym, f"{src}: symbol {ref}")
            lib = libs.get(lib_id)
            if lib is None:
                raise DesignError(f"{src}: symbol {ref} uses {lib_id!r}, not in lib_symbols")
            flags = {k: child(sym, k) for k in ("on_board", "in_bom")}
            value = _prop(sym, "Value") or ""
            pins = []
            for pin in lib.pins:
                if pin.unit not in (0, unit):
                    continue
                sx, sy = _place_pin(pin.x, pin.y, sym, x, y, rot)
                pins.append(SchPin(pin.number, pin.name, sx, sy, pin.electrical))
                pt = _snap(sx, sy)
                points.add(pt)
                node: Any
                if lib.power == "local":  # KiCad 9 local power symbol: named per sheet
                    node = ("local", idx, value)
                    drivers.append(
                        (_Driver(_LOCAL_POWER, inst.depth, inst.name_path + value), node)
                    )
                    uf.union(at_point(pt), node)
                elif lib.power:
                    node = ("global", value)
                    drivers.append((_Driver(_POWER_PIN, inst.depth, value), node))
                    uf.union(at_point(pt), node)
                else:
                    pin_points.append(((ref, pin.number), at_point(pt)))
                    auto_names.append((_auto_net_name(ref, pin, lib.pins), at_point(pt)))
            if ref in symbols and not lib.power:
                if symbols[ref].unit != unit:  # another unit of a multi-unit part
                    old = symbols[ref]
                    symbols[ref] = SchSymbol(**{**old.__dict__, "pins": old.pins + tuple(pins)})
                    continue
                duplicates.append(ref)
            symbols[ref] = SchSymbol(
                ref=ref,
                value=value,
                footprint=_prop(sym, "Footprint") or "",
                lib_id=lib_id,
                x=x,
                y=y,
                rotation=rot,
                unit=unit,
                on_board=flags["on_board"] is None or text_value(flags["on_board"][1]) != "no",
                in_bom=flags["in_bom"] is None or text_value(flags["in_bom"][1]) != "no",
                power=bool(lib.power),
                pins=tuple(pins),
            )
        wires: list[tuple[tuple[int, int], tuple[int, int]]] = []
        for wire in children(sheet_tree, "wire"):
            pts = [_snap(*p) for p in _pts(child(wire, "pts"), f"{src}: wire")]
            for a, b in itertools.pairwise(pts):
                wires.append((a, b))
                uf.union(at_point(a), at_point(b))
                points.update((a, b))
        for kind, priority in (
            ("label", _LOCAL_LABEL),
            ("global_label", _GLOBAL),
            ("hierarchical_label", _HIER_LABEL),
        ):
            for lab in children(sheet_tree, kind):
                lx, ly, _ = _at(lab, f"{src}: {kind}")
                pt = _snap(lx, ly)
                name = text_value(lab[1])
                points.add(pt)
                if kind == "global_label":
                    node = ("global", name)
                    full = name
                elif kind == "label":
                    node, full = ("local", idx, name), inst.name_path + name
                else:  # the parent's sheet pin of this name is the same node
                    node, full = ("hier", idx, name), inst.name_path + name
                drivers.append((_Driver(priority, inst.depth, full), node))
                uf.union(at_point(pt), node)
        # Sheet pins of the sub-sheets drawn on this sheet: weak drivers named in this sheet.
        for child_idx, sub in enumerate(instances):
            if sub.depth != inst.depth + 1 or not sub.uuid_path.startswith(inst.uuid_path + "/"):
                continue
            if sub.uuid_path.count("/") != inst.uuid_path.count("/") + 1:
                continue
            sheet = next(
                (
                    sh
                    for sh in children(sheet_tree, "sheet")
                    if (u := child(sh, "uuid")) is not None
                    and sub.uuid_path.endswith("/" + text_value(u[1]))
                ),
                None,
            )
            for sheet_pin in children(sheet, "pin") if sheet is not None else ():
                px, py, _ = _at(sheet_pin, f"{src}: sheet pin")
                pt = _snap(px, py)
                points.add(pt)
                name = text_value(sheet_pin[1])
                node = ("hier", child_idx, name)
                drivers.append((_Driver(_SHEET_PIN, inst.depth, inst.name_path + name), node))
                uf.union(at_point(pt), node)
        # A point on the inside of a wire joins it (KiCad draws the junction dot itself); two
        # wires that merely cross do not, because neither has an end point on the other.
        for pt in points:
            for a, b in wires:
                if pt != a and pt != b and _on_segment(pt, a, b):
                    uf.union(at_point(pt), at_point(a))
    groups: dict[Any, set[tuple[str, str]]] = {}
    best: dict[Any, list[_Driver]] = {}
    for member, node in pin_points:
        groups.setdefault(uf.find(node), set()).add(member)
    for driver, node in drivers:
        best.setdefault(uf.find(node), []).append(driver)
    autos: dict[Any, list[str]] = {}
    for auto, node in auto_names:
        autos.setdefault(uf.find(node), []).append(auto)
    dangling = sorted({d.name for root, ds in best.items() if root not in groups for d in ds})
    nets: dict[str, frozenset[tuple[str, str]]] = {}
    for root, members in groups.items():
        strong = [d for d in best.get(root, ()) if d.priority >= _STRONG]
        if strong:  # strongest, then higher in the hierarchy, then alphabetical
            name = min(strong, key=lambda d: (-d.priority, d.depth, d.name)).name
        else:  # eeschema prefers a pin with a name over "-Pad<n>", then the lowest name
            name = min(autos[root], key=lambda a: ("-Pad" in a, a))
        if name in nets:  # two nets one name: KiCad would merge them; keep both apart here
            name = f"{name}#{len(nets)}"
        nets[name] = frozenset(members)
    return Schematic(
        source=source,
        version=version,
        symbols=symbols,
        nets=nets,
        sheets=len(instances) - 1
        if directory is not None
        else sum(1 for _ in children(tree, "sheet")),
        duplicates=tuple(duplicates),
        dangling_labels=tuple(dangling),
    )
