"""Writes the KiCad 8 design in this folder (run it to regenerate; the files are committed).

A two-level hierarchy with every way KiCad names a net, the shapes KiCad 8.0 writes
(schematic version 20231120, board 20240108):

    hier.kicad_sch (root)  R1.1, R2.1 on local label OUT            -> net "/OUT"
                           R2.2 on global label VBUS                 -> "VBUS"
                           R1.2, R3.2 on power symbol GND            -> "GND"
                           R3.1 wired to sheet pin VIN of "Power"
      power.kicad_sch      R4.1 on hierarchical label VIN            -> "/Power/VIN"
      (sheet "Power")      R5.1 on global label VBUS, R4.2 on GND
                           R5.2 wired to sheet pin SENSE of "Filter"
        filter.kicad_sch   R6.1 on hierarchical label SENSE          -> "/Power/Filter/SENSE"
        (sheet "Filter")   R6.2, R7.1 on local label TAP             -> "/Power/Filter/TAP"
                           R7.2 on GND

The board names every net the way KiCad's "Update PCB from schematic" does.
"""

from __future__ import annotations

from pathlib import Path

from pcbinnobench import parts, sexpr
from pcbinnobench.parts import n, s, stable_uuid

HERE = Path(__file__).parent
ROOT, SHEET_P, SHEET_F = (stable_uuid("hier", k) for k in ("root", "sheet-power", "sheet-filter"))
FONT = [s("effects"), [s("font"), [s("size"), n(1.27), n(1.27)]]]
R_SYMBOL = parts.lib_symbol_node("R_0603")
GND_SYMBOL = [
    s("symbol"),
    "power:GND",
    [s("power")],
    [s("pin_numbers"), [s("hide"), s("yes")]],
    [s("pin_names"), [s("offset"), n(0)], [s("hide"), s("yes")]],
    [s("exclude_from_sim"), s("no")],
    [s("in_bom"), s("yes")],
    [s("on_board"), s("yes")],
    [
        s("property"),
        "Reference",
        "#PWR",
        [s("at"), n(0), n(-6.35), n(0)],
        [*FONT, [s("hide"), s("yes")]],
    ],
    [s("property"), "Value", "GND", [s("at"), n(0), n(-3.81), n(0)], FONT],
    [s("property"), "Footprint", "", [s("at"), n(0), n(0), n(0)], [*FONT, [s("hide"), s("yes")]]],
    [s("property"), "Datasheet", "", [s("at"), n(0), n(0), n(0)], [*FONT, [s("hide"), s("yes")]]],
    [
        s("property"),
        "Description",
        'Power symbol creates a global label with name "GND" , ground',
        [s("at"), n(0), n(0), n(0)],
        [*FONT, [s("hide"), s("yes")]],
    ],
    [
        s("symbol"),
        "GND_0_1",
        [
            s("polyline"),
            [
                s("pts"),
                [s("xy"), n(0), n(0)],
                [s("xy"), n(0), n(-1.27)],
                [s("xy"), n(1.27), n(-1.27)],
                [s("xy"), n(0), n(-2.54)],
                [s("xy"), n(-1.27), n(-1.27)],
                [s("xy"), n(0), n(-1.27)],
            ],
            [s("stroke"), [s("width"), n(0)], [s("type"), s("default")]],
            [s("fill"), [s("type"), s("none")]],
        ],
    ],
    [
        s("symbol"),
        "GND_1_1",
        [
            s("pin"),
            s("power_in"),
            s("line"),
            [s("at"), n(0), n(0), n(270)],
            [s("length"), n(0)],
            [s("hide"), s("yes")],
            [s("name"), "GND", FONT],
            [s("number"), "1", FONT],
        ],
    ],
]
FOOTPRINT = parts.part("R_0603").footprint


def _instances(path: str, ref: str) -> list:
    return [
        s("instances"),
        [s("project"), "hier", [s("path"), path, [s("reference"), ref], [s("unit"), n(1)]]],
    ]


def resistor(ref: str, value: str, x: float, y: float, path: str) -> list:
    """Device:R at (x, y): pin 1 connects at (x, y - 3.81), pin 2 at (x, y + 3.81)."""
    return [
        s("symbol"),
        [s("lib_id"), "Device:R"],
        [s("at"), n(x), n(y), n(0)],
        [s("unit"), n(1)],
        [s("exclude_from_sim"), s("no")],
        [s("in_bom"), s("yes")],
        [s("on_board"), s("yes")],
        [s("dnp"), s("no")],
        [s("uuid"), stable_uuid("hier", ref)],
        [s("property"), "Reference", ref, [s("at"), n(x + 2.54), n(y - 1.27), n(0)], FONT],
        [s("property"), "Value", value, [s("at"), n(x + 2.54), n(y + 1.27), n(0)], FONT],
        [
            s("property"),
            "Footprint",
            FOOTPRINT,
            [s("at"), n(x), n(y), n(0)],
            [*FONT, [s("hide"), s("yes")]],
        ],
        [
            s("property"),
            "Datasheet",
            "~",
            [s("at"), n(x), n(y), n(0)],
            [*FONT, [s("hide"), s("yes")]],
        ],
        [
            s("property"),
            "Description",
            "Resistor",
            [s("at"), n(x), n(y), n(0)],
            [*FONT, [s("hide"), s("yes")]],
        ],
        [s("pin"), "1", [s("uuid"), stable_uuid("hier", ref, "1")]],
        [s("pin"), "2", [s("uuid"), stable_uuid("hier", ref, "2")]],
        _instances(path, ref),
    ]


def gnd(ref: str, x: float, y: float, path: str) -> list:
    return [
        s("symbol"),
        [s("lib_id"), "power:GND"],
        [s("at"), n(x), n(y), n(0)],
        [s("unit"), n(1)],
        [s("exclude_from_sim"), s("no")],
        [s("in_bom"), s("yes")],
        [s("on_board"), s("yes")],
        [s("dnp"), s("no")],
        [s("fields_autoplaced"), s("yes")],
        [s("uuid"), stable_uuid("hier", ref)],
        [
            s("property"),
            "Reference",
            ref,
            [s("at"), n(x), n(y + 6.35), n(0)],
            [*FONT, [s("hide"), s("yes")]],
        ],
        [s("property"), "Value", "GND", [s("at"), n(x), n(y + 3.81), n(0)], FONT],
        [
            s("property"),
            "Footprint",
            "",
            [s("at"), n(x), n(y), n(0)],
            [*FONT, [s("hide"), s("yes")]],
        ],
        [
            s("property"),
            "Datasheet",
            "",
            [s("at"), n(x), n(y), n(0)],
            [*FONT, [s("hide"), s("yes")]],
        ],
        [
            s("property"),
            "Description",
            "",
            [s("at"), n(x), n(y), n(0)],
            [*FONT, [s("hide"), s("yes")]],
        ],
        [s("pin"), "1", [s("uuid"), stable_uuid("hier", ref, "1")]],
        _instances(path, ref),
    ]


def label(kind: str, name: str, x: float, y: float) -> list:
    node = [s(kind), name]
    if kind != "label":
        node.append([s("shape"), s("passive" if kind == "global_label" else "input")])
    node += [
        [s("at"), n(x), n(y), n(90)],
        [s("fields_autoplaced"), s("yes")],
        [*FONT, [s("justify"), s("left")]],
        [s("uuid"), stable_uuid("hier", kind, name, x, y)],
    ]
    if kind == "global_label":
        node.append(
            [
                s("property"),
                "Intersheetrefs",
                "${INTERSHEET_REFS}",
                [s("at"), n(x), n(y - 5), n(90)],
                [*FONT, [s("justify"), s("left")], [s("hide"), s("yes")]],
            ]
        )
    return node


def wire(x1: float, y1: float, x2: float, y2: float) -> list:
    return [
        s("wire"),
        [s("pts"), [s("xy"), n(x1), n(y1)], [s("xy"), n(x2), n(y2)]],
        [s("stroke"), [s("width"), n(0)], [s("type"), s("default")]],
        [s("uuid"), stable_uuid("hier", "wire", x1, y1, x2, y2)],
    ]


def sheet(
    name: str, file: str, uid: str, x: float, y: float, pin: str, py: float, path: str, page: str
) -> list:
    return [
        s("sheet"),
        [s("at"), n(x), n(y)],
        [s("size"), n(20.32), n(12.7)],
        [s("exclude_from_sim"), s("no")],
        [s("in_bom"), s("yes")],
        [s("on_board"), s("yes")],
        [s("dnp"), s("no")],
        [s("fields_autoplaced"), s("yes")],
        [s("stroke"), [s("width"), n(0.1524)], [s("type"), s("solid")]],
        [s("fill"), [s("color"), n(0), n(0), n(0), n(0.0)]],
        [s("uuid"), uid],
        [
            s("property"),
            "Sheetname",
            name,
            [s("at"), n(x), n(y - 0.7116), n(0)],
            [*FONT, [s("justify"), s("left"), s("bottom")]],
        ],
        [
            s("property"),
            "Sheetfile",
            file,
            [s("at"), n(x), n(y + 13.2834), n(0)],
            [*FONT, [s("justify"), s("left"), s("top")]],
        ],
        [
            s("pin"),
            pin,
            s("input"),
            [s("at"), n(x), n(py), n(180)],
            [*FONT, [s("justify"), s("left")]],
            [s("uuid"), stable_uuid("hier", "sheetpin", name, pin)],
        ],
        [s("instances"), [s("project"), "hier", [s("path"), path, [s("page"), page]]]],
    ]


def schematic(uid: str, body: list, root: bool) -> list:
    tree = [
        s("kicad_sch"),
        [s("version"), n(20231120)],
        [s("generator"), "eeschema"],
        [s("generator_version"), "8.0"],
        [s("uuid"), uid],
        [s("paper"), "A4"],
        [s("lib_symbols"), GND_SYMBOL, R_SYMBOL],
        *body,
    ]
    if root:
        tree.append([s("sheet_instances"), [s("path"), "/", [s("page"), "1"]]])
    return tree


def main() -> None:
    r, p, f = f"/{ROOT}", f"/{ROOT}/{SHEET_P}", f"/{ROOT}/{SHEET_P}/{SHEET_F}"
    root_body = [
        resistor("R1", "10k", 50.8, 50.8, r),
        label("label", "OUT", 50.8, 46.99),
        gnd("#PWR01", 50.8, 54.61, r),
        resistor("R2", "10k", 63.5, 50.8, r),
        label("label", "OUT", 63.5, 46.99),
        label("global_label", "VBUS", 63.5, 54.61),
        resistor("R3", "1k", 76.2, 50.8, r),
        wire(76.2, 46.99, 88.9, 46.99),
        gnd("#PWR02", 76.2, 54.61, r),
        sheet("Power", "power.kicad_sch", SHEET_P, 88.9, 40.64, "VIN", 46.99, r, "2"),
    ]
    power_body = [
        resistor("R4", "4k7", 50.8, 50.8, p),
        label("hierarchical_label", "VIN", 50.8, 46.99),
        gnd("#PWR03", 50.8, 54.61, p),
        resistor("R5", "4k7", 63.5, 50.8, p),
        label("global_label", "VBUS", 63.5, 46.99),
        wire(63.5, 54.61, 76.2, 54.61),
        sheet("Filter", "filter.kicad_sch", SHEET_F, 76.2, 48.26, "SENSE", 54.61, p, "3"),
    ]
    filter_body = [
        resistor("R6", "100k", 50.8, 50.8, f),
        label("hierarchical_label", "SENSE", 50.8, 46.99),
        label("label", "TAP", 50.8, 54.61),
        resistor("R7", "100k", 63.5, 50.8, f),
        label("label", "TAP", 63.5, 46.99),
        gnd("#PWR04", 63.5, 54.61, f),
    ]
    files = {
        "hier.kicad_sch": schematic(ROOT, root_body, True),
        "power.kicad_sch": schematic(stable_uuid("hier", "file-power"), power_body, False),
        "filter.kicad_sch": schematic(stable_uuid("hier", "file-filter"), filter_body, False),
    }
    pads = {
        "R1": ("/OUT", "GND"),
        "R2": ("/OUT", "VBUS"),
        "R3": ("/Power/VIN", "GND"),
        "R4": ("/Power/VIN", "GND"),
        "R5": ("VBUS", "/Power/Filter/SENSE"),
        "R6": ("/Power/Filter/SENSE", "/Power/Filter/TAP"),
        "R7": ("/Power/Filter/TAP", "GND"),
    }
    values = {
        "R1": "10k",
        "R2": "10k",
        "R3": "1k",
        "R4": "4k7",
        "R5": "4k7",
        "R6": "100k",
        "R7": "100k",
    }
    nets = sorted({net for pair in pads.values() for net in pair})
    from pcbinnobench import catalog

    class Spec:  # the fields catalog._pcb_skeleton reads
        name = "hier"

    board = catalog._pcb_skeleton(Spec, nets)  # type: ignore[arg-type]
    board[1] = [s("version"), n(20240108)]
    board[3] = [s("generator_version"), "8.0"]
    for i, (ref, (a, b)) in enumerate(pads.items()):
        codes = {"1": (nets.index(a) + 1, a), "2": (nets.index(b) + 1, b)}
        board.append(
            parts.footprint_node(
                "R_0603", ref, values[ref], 110 + 5 * i, 100, 90, codes, f"hier/{ref}"
            )
        )
    board.append(
        [
            s("gr_rect"),
            [s("start"), n(105), n(95)],
            [s("end"), n(150), n(105)],
            [s("stroke"), [s("width"), n(0.05)], [s("type"), s("default")]],
            [s("fill"), s("no")],
            [s("layer"), "Edge.Cuts"],
            [s("uuid"), stable_uuid("hier", "edge")],
        ]
    )
    files["hier.kicad_pcb"] = board
    for name, tree in files.items():
        (HERE / name).write_text(sexpr.dumps(tree), encoding="utf-8")
    (HERE / "hier.kicad_pro").write_text(
        '{\n  "meta": {"filename": "hier.kicad_pro", "version": 1},\n'
        '  "net_settings": {"classes": '
        '[{"name": "Default", "clearance": 0.2, "track_width": 0.25}],'
        ' "meta": {"version": 3}},\n'
        f'  "sheets": [["{ROOT}", "Root"], ["{SHEET_P}", "Power"], ["{SHEET_F}", "Filter"]]\n}}\n',
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
