"""The s-expression layer and the design model: round trips, bad files, KiCad 6."""

import pytest
from pcbinnobench import design, sexpr
from pcbinnobench.errors import PcbBenchError


def test_every_shipped_file_round_trips_byte_for_byte(tasks):
    seen = 0
    for task in tasks:
        for path in list(task.workspace.glob("*.kicad_*")) + list(
            (task.hidden / "ground_truth").glob("*.kicad_*")
        ):
            if path.suffix == ".kicad_pro":
                continue
            text = path.read_text(encoding="utf-8")
            assert sexpr.dumps(sexpr.loads(text)) == text, path
            seen += 1
    assert seen == 4 * len(tasks)


def test_numbers_keep_their_text_and_edits_write_kicad_numbers():
    tree = sexpr.loads("(kicad_pcb (version 20241229) (at 12.000000 -0.50 90))")
    assert sexpr.dumps(tree).count("12.000000") == 1
    assert sexpr.format_number(105.0) == "105"
    assert sexpr.format_number(-0.0000001) == "0"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("(kicad_pcb (version 20241229)", "unbalanced"),
        ("(kicad_pcb))", ""),
        ("", ""),
        ('(kicad_pcb "unterminated)', ""),
    ],
)
def test_malformed_s_expressions_are_one_error(tmp_path, text, fragment):
    path = tmp_path / "bad.kicad_pcb"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PcbBenchError) as exc:
        design.read_tree(path, "kicad_pcb")
    assert str(path) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_kicad6_board_is_refused_naming_the_format(tmp_path):
    path = tmp_path / "old.kicad_pcb"
    path.write_text(
        "(kicad_pcb (version 20211014) (generator pcbnew)\n"
        '  (footprint "R_0805" (layer "F.Cu") (at 10 10)\n'
        '    (fp_text reference "R1" (at 0 0) (layer "F.SilkS"))))\n',
        encoding="utf-8",
    )
    with pytest.raises(design.DesignError) as exc:
        design.read_tree(path, "kicad_pcb")
    msg = str(exc.value)
    assert "KiCad 6" in msg
    assert "fp_text" in msg
    assert "KiCad 8" in msg


def test_wrong_kind_directory_and_binary_are_one_error(tmp_path, task):
    sch = next(task.workspace.glob("*.kicad_sch"))
    with pytest.raises(design.DesignError, match="expected \\(kicad_pcb"):
        design.read_tree(sch, "kicad_pcb")
    with pytest.raises(design.DesignError, match="is a directory"):
        design.read_tree(tmp_path, "kicad_pcb")
    binary = tmp_path / "b.kicad_pcb"
    binary.write_bytes(b"\xff\xfe\x00(")
    with pytest.raises(design.DesignError, match="UTF-8"):
        design.read_tree(binary, "kicad_pcb")


def test_design_model_reads_pads_nets_and_correspondence(task):
    board = design.load_board(next(task.workspace.glob("*.kicad_pcb")))
    sch = design.load_schematic(next(task.workspace.glob("*.kicad_sch")))
    assert set(board.footprints) == set(sch.parts())
    u1 = board.footprint("U1")
    assert u1.pad("5").net == "+3V3"
    assert u1.pad("2").net == "GND"
    pins = sch.pin_nets()
    assert pins[("U1", "5")] == "+3V3"
    assert pins[("C2", "2")] == "GND"
    for (ref, pad), net in board.pad_nets().items():
        assert pins.get((ref, pad)) == net


def test_patch_selects_by_reference_and_refuses_bad_paths(task):
    pcb = design.read_tree(next(task.workspace.glob("*.kicad_pcb")), "kicad_pcb")
    changed = sexpr.apply_patch(
        pcb, [{"op": "set", "path": "footprint:C2/at", "value": "(at 120 100 90)"}]
    )
    assert changed == 1
    board = design.board_from_tree(pcb, "patched")
    assert (board.footprint("C2").x, board.footprint("C2").y) == (120, 100)
    with pytest.raises(PcbBenchError):
        sexpr.apply_patch(pcb, [{"op": "set", "path": "footprint:C99/at", "value": "(at 1 1)"}])
    with pytest.raises(PcbBenchError):
        sexpr.apply_patch(pcb, [{"op": "set", "path": "footprint:C2/at", "value": "(at 1"}])


def _nested(depth):
    """A board whose first node opens ``depth`` levels (the head counts as one)."""
    return "(kicad_pcb (version 20241229)\n" + "(a " * (depth - 1) + ")" * (depth - 1) + ")\n"


def test_deep_nesting_is_refused_naming_file_line_and_column(tmp_path):
    """Issue #46: thousands of nested '(' were a RecursionError inside sexpdata."""
    path = tmp_path / "deep.kicad_pcb"
    path.write_text(_nested(5000), encoding="utf-8")
    with pytest.raises(sexpr.SexprError) as exc:
        design.read_tree(path, "kicad_pcb")
    assert str(exc.value) == (
        f"{path}: nested deeper than {sexpr.MAX_DEPTH} levels at line 2, column "
        f"{3 * (sexpr.MAX_DEPTH - 1) + 1} (KiCad files nest about ten)"
    )


def test_the_depth_limit_is_inclusive_and_round_trips():
    text = _nested(sexpr.MAX_DEPTH)
    assert sexpr.dumps(sexpr.loads(text)).count("(a") == sexpr.MAX_DEPTH - 1
    with pytest.raises(sexpr.SexprError, match="nested deeper"):
        sexpr.loads(_nested(sexpr.MAX_DEPTH + 1))


@pytest.mark.parametrize(
    ("atom", "needle"),
    [
        ("1e999", "number 1e999 is beyond the float range at line 1, column 37"),
        ("9" * 5000, "a 5000-character number (at most 64) at line 1, column 37"),
    ],
)
def test_non_finite_and_huge_numbers_are_refused(atom, needle):
    with pytest.raises(sexpr.SexprError) as exc:
        sexpr.loads(f"(kicad_pcb (version 20241229) (at 1 {atom}))", source="b.kicad_pcb")
    assert str(exc.value) == f"b.kicad_pcb: {needle}"
