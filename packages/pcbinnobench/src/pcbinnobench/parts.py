"""A small part library: KiCad footprints and schematic symbols the shipped tasks use.

Pad positions and sizes follow KiCad's standard libraries (``Capacitor_SMD``,
``Resistor_SMD``, ``Package_TO_SOT_SMD``, ``Package_SO``, ``Diode_SMD``,
``Connector_PinHeader_2.54mm``), so a shipped board opens in KiCad as a real one would. Each
part writes its footprint (:func:`footprint_node`) and its library symbol
(:func:`lib_symbol_node`) as s-expression trees; the symbol body is a plain rectangle.
Identifiers are deterministic (``uuid5`` of a name), so regenerated files are byte-identical.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from pcbinnobench.errors import PcbBenchError
from pcbinnobench.sexpr import Integer, Node, Number, Symbol, format_number

__all__ = ["PARTS", "Part", "footprint_node", "lib_symbol_node", "part", "stable_uuid"]

_NS = uuid.UUID("5f1d2c1e-8f3a-4c55-9a0e-2b7d0c6a9e41")


def stable_uuid(*names: object) -> str:
    """A uuid that depends only on ``names`` (files regenerate byte for byte)."""
    return str(uuid.uuid5(_NS, "/".join(str(n) for n in names)))


def n(value: float) -> Integer | Number:
    """A number atom written the way KiCad writes it (an integer when it is one)."""
    text = format_number(value)
    return Integer(text) if "." not in text else Number(text)


def s(name: str) -> Symbol:
    return Symbol(name)


@dataclass(frozen=True)
class PadSpec:
    number: str
    x: float
    y: float
    w: float
    h: float
    shape: str = "roundrect"
    kind: str = "smd"
    drill: float = 0.0


@dataclass(frozen=True)
class PinSpec:
    number: str
    name: str
    x: float  # library frame (y up), connection point
    y: float
    angle: float  # direction from the connection point into the body
    electrical: str = "passive"


@dataclass(frozen=True)
class Part:
    key: str
    footprint: str
    symbol: str
    pads: tuple[PadSpec, ...]
    pins: tuple[PinSpec, ...]
    body: tuple[float, float]  # half width, half height of the symbol rectangle
    description: str
    prefix: str


def _two(dx: float, w: float, h: float) -> tuple[PadSpec, ...]:
    return (PadSpec("1", -dx, 0, w, h), PadSpec("2", dx, 0, w, h))


_VERTICAL = (PinSpec("1", "~", 0, 3.81, 270), PinSpec("2", "~", 0, -3.81, 90))
_HORIZONTAL = (PinSpec("1", "K", -3.81, 0, 0), PinSpec("2", "A", 3.81, 0, 180))


def _header(count: int) -> Part:
    pads = tuple(
        PadSpec(str(i + 1), 0, 2.54 * i, 1.7, 1.7, "rect" if i == 0 else "oval", "thru_hole", 1.0)
        for i in range(count)
    )
    pins = tuple(PinSpec(str(i + 1), f"Pin_{i + 1}", -5.08, -2.54 * i, 0) for i in range(count))
    return Part(
        f"PinHeader_1x{count:02d}",
        f"Connector_PinHeader_2.54mm:PinHeader_1x{count:02d}_P2.54mm_Vertical",
        f"Connector_Generic:Conn_01x{count:02d}",
        pads,
        pins,
        (1.27, 1.27 * count),
        f"Generic connector, single row, 01x{count:02d}",
        "J",
    )


def _soic8(names: tuple[str, ...], symbol: str, description: str, kinds: tuple[str, ...]) -> Part:
    pads = tuple(
        PadSpec(str(i + 1), -2.475, -1.905 + 1.27 * i, 1.95, 0.6) for i in range(4)
    ) + tuple(PadSpec(str(8 - i), 2.475, -1.905 + 1.27 * i, 1.95, 0.6) for i in range(4))
    pins = tuple(
        PinSpec(str(i + 1), names[i], -10.16, 3.81 - 2.54 * i, 0, kinds[i]) for i in range(4)
    ) + tuple(
        PinSpec(str(8 - i), names[7 - i], 10.16, 3.81 - 2.54 * i, 180, kinds[7 - i])
        for i in range(4)
    )
    return Part(
        symbol.split(":")[1],
        "Package_SO:SOIC-8_3.9x4.9mm_P1.27mm",
        symbol,
        pads,
        pins,
        (7.62, 5.08),
        description,
        "U",
    )


PARTS: dict[str, Part] = {
    p.key: p
    for p in (
        Part(
            "C_0805",
            "Capacitor_SMD:C_0805_2012Metric",
            "Device:C",
            _two(0.95, 1.0, 1.45),
            _VERTICAL,
            (0.76, 2.03),
            "Unpolarized capacitor",
            "C",
        ),
        Part(
            "C_0603",
            "Capacitor_SMD:C_0603_1608Metric",
            "Device:C",
            _two(0.775, 0.9, 0.95),
            _VERTICAL,
            (0.76, 2.03),
            "Unpolarized capacitor",
            "C",
        ),
        Part(
            "R_0805",
            "Resistor_SMD:R_0805_2012Metric",
            "Device:R",
            _two(0.9125, 1.025, 1.4),
            _VERTICAL,
            (1.016, 2.54),
            "Resistor",
            "R",
        ),
        Part(
            "R_0603",
            "Resistor_SMD:R_0603_1608Metric",
            "Device:R",
            _two(0.825, 0.8, 0.95),
            _VERTICAL,
            (1.016, 2.54),
            "Resistor",
            "R",
        ),
        Part(
            "LED_0805",
            "LED_SMD:LED_0805_2012Metric",
            "Device:LED",
            _two(0.9375, 0.975, 1.4),
            _HORIZONTAL,
            (1.27, 1.27),
            "Light emitting diode",
            "D",
        ),
        Part(
            "TVS_SMA",
            "Diode_SMD:D_SMA",
            "Device:D_TVS",
            (PadSpec("1", -2.0, 0, 2.5, 1.8), PadSpec("2", 2.0, 0, 2.5, 1.8)),
            _HORIZONTAL,
            (1.27, 1.27),
            "Unidirectional transient-voltage-suppression diode",
            "D",
        ),
        Part(
            "SOT-23_NMOS",
            "Package_TO_SOT_SMD:SOT-23",
            "Transistor_FET:2N7002",
            (
                PadSpec("1", -0.9375, -0.95, 1.475, 0.6),
                PadSpec("2", -0.9375, 0.95, 1.475, 0.6),
                PadSpec("3", 0.9375, 0, 1.475, 0.6),
            ),
            (
                PinSpec("1", "G", -5.08, 0, 0, "input"),
                PinSpec("2", "S", 2.54, -5.08, 90),
                PinSpec("3", "D", 2.54, 5.08, 270),
            ),
            (2.54, 2.54),
            "N-channel MOSFET, SOT-23",
            "Q",
        ),
        Part(
            "SOT-23-5_LDO",
            "Package_TO_SOT_SMD:SOT-23-5",
            "Regulator_Linear:AP2112K-3.3",
            (
                PadSpec("1", -1.1375, -0.95, 1.325, 0.6),
                PadSpec("2", -1.1375, 0, 1.325, 0.6),
                PadSpec("3", -1.1375, 0.95, 1.325, 0.6),
                PadSpec("4", 1.1375, 0.95, 1.325, 0.6),
                PadSpec("5", 1.1375, -0.95, 1.325, 0.6),
            ),
            (
                PinSpec("1", "VIN", -7.62, 2.54, 0, "power_in"),
                PinSpec("2", "GND", 0, -7.62, 90, "power_in"),
                PinSpec("3", "EN", -7.62, 0, 0, "input"),
                PinSpec("4", "NC", 7.62, 0, 180, "no_connect"),
                PinSpec("5", "VOUT", 7.62, 2.54, 180, "power_out"),
            ),
            (5.08, 5.08),
            "600mA low-dropout linear regulator, 3.3V, SOT-23-5",
            "U",
        ),
        _soic8(
            ("OUTA", "-INA", "+INA", "V-", "+INB", "-INB", "OUTB", "V+"),
            "Amplifier_Operational:LMV358",
            "Dual low-voltage rail-to-rail op amp",
            ("output", "input", "input", "power_in", "input", "input", "output", "power_in"),
        ),
        _soic8(
            ("A0", "A1", "A2", "GND", "SDA", "SCL", "WP", "VCC"),
            "Memory_EEPROM:24LC02",
            "2 Kbit I2C serial EEPROM",
            ("input", "input", "input", "power_in", "bidirectional", "input", "input", "power_in"),
        ),
        _header(2),
        _header(3),
        _header(4),
    )
}


def part(key: str) -> Part:
    """A library part by key, or one error line listing the keys."""
    try:
        return PARTS[key]
    except KeyError:
        raise PcbBenchError(f"unknown part {key!r}; known: {', '.join(sorted(PARTS))}") from None


def part_for_footprint(lib_id: str) -> Part | None:
    """The library part whose footprint is ``lib_id`` (the first one), if any."""
    return next((p for p in PARTS.values() if p.footprint == lib_id), None)


def _effects(hide: bool = False, size: float = 1.27) -> Node:
    eff: Node = [s("effects"), [s("font"), [s("size"), n(size), n(size)]]]
    if hide:
        eff.append([s("hide"), s("yes")])
    return eff


def _fp_property(
    name: str, value: str, x: float, y: float, layer: str, hide: bool, seed: str
) -> Node:
    node: Node = [s("property"), name, value, [s("at"), n(x), n(y), n(0)], [s("layer"), layer]]
    if hide:
        node.append([s("hide"), s("yes")])
    node += [
        [s("uuid"), stable_uuid(seed, "prop", name)],
        [s("effects"), [s("font"), [s("size"), n(1), n(1)], [s("thickness"), n(0.15)]]],
    ]
    return node


def pad_node(p: PadSpec, rotation: float, net: tuple[int, str] | None, seed: str) -> Node:
    node: Node = [
        s("pad"),
        p.number,
        s(p.kind),
        s(p.shape),
        [s("at"), n(p.x), n(p.y)] + ([n(rotation)] if rotation else []),
        [s("size"), n(p.w), n(p.h)],
    ]
    if p.kind == "thru_hole":
        node.append([s("drill"), n(p.drill)])
        node.append([s("layers"), "*.Cu", "*.Mask"])
        node.append([s("remove_unused_layers"), s("no")])
    else:
        node.append([s("layers"), "F.Cu", "F.Mask", "F.Paste"])
    if p.shape == "roundrect":
        node.append([s("roundrect_rratio"), n(0.25)])
    if net is not None and net[1]:
        node.append([s("net"), n(net[0]), net[1]])
    node.append([s("uuid"), stable_uuid(seed, "pad", p.number)])
    return node


def footprint_node(
    key: str,
    ref: str,
    value: str,
    x: float,
    y: float,
    rotation: float,
    nets: dict[str, tuple[int, str]],
    seed: str,
) -> Node:
    """A placed footprint with its pads on ``nets`` (pad number -> (net code, name))."""
    p = part(key)
    ys = [q.y for q in p.pads]
    top, bottom = min(ys) - 1.7, max(ys) + 1.7
    node: Node = [
        s("footprint"),
        p.footprint,
        [s("layer"), "F.Cu"],
        [s("uuid"), stable_uuid(seed, "fp")],
        [s("at"), n(x), n(y)] + ([n(rotation)] if rotation else []),
        _fp_property("Reference", ref, 0, top, "F.SilkS", False, seed),
        _fp_property("Value", value, 0, bottom, "F.Fab", False, seed),
        _fp_property("Footprint", p.footprint, 0, 0, "F.Fab", True, seed),
        _fp_property("Datasheet", "~", 0, 0, "F.Fab", True, seed),
        _fp_property("Description", p.description, 0, 0, "F.Fab", True, seed),
        [s("attr"), s("through_hole" if p.pads[0].kind == "thru_hole" else "smd")],
    ]
    for q in p.pads:
        node.append(pad_node(q, rotation, nets.get(q.number), seed))
    node.append([s("embedded_fonts"), s("no")])
    return node


def lib_symbol_node(key: str) -> Node:
    """The library symbol of a part (``lib_symbols`` entry): a rectangle and its pins."""
    p = part(key)
    name = p.symbol.split(":")[1]
    hw, hh = p.body
    body: Node = [
        s("symbol"),
        f"{name}_0_1",
        [
            s("rectangle"),
            [s("start"), n(-hw), n(hh)],
            [s("end"), n(hw), n(-hh)],
            [s("stroke"), [s("width"), n(0.254)], [s("type"), s("default")]],
            [s("fill"), [s("type"), s("background")]],
        ],
    ]
    pins: Node = [s("symbol"), f"{name}_1_1"]
    for pin in p.pins:
        pins.append(
            [
                s("pin"),
                s(pin.electrical),
                s("line"),
                [s("at"), n(pin.x), n(pin.y), n(pin.angle)],
                [s("length"), n(2.54)],
                [s("name"), pin.name, _effects()],
                [s("number"), pin.number, _effects()],
            ]
        )
    return [
        s("symbol"),
        p.symbol,
        [s("pin_names"), [s("offset"), n(1.016)]],
        [s("exclude_from_sim"), s("no")],
        [s("in_bom"), s("yes")],
        [s("on_board"), s("yes")],
        [s("property"), "Reference", p.prefix, [s("at"), n(hw + 1.27), n(hh)], _effects()],
        [s("property"), "Value", name, [s("at"), n(hw + 1.27), n(-hh)], _effects()],
        [s("property"), "Footprint", "", [s("at"), n(0), n(0)], _effects(hide=True)],
        [s("property"), "Datasheet", "~", [s("at"), n(0), n(0)], _effects(hide=True)],
        [s("property"), "Description", p.description, [s("at"), n(0), n(0)], _effects(hide=True)],
        body,
        pins,
        [s("embedded_fonts"), s("no")],
    ]
