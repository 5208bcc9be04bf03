"""KiCad s-expressions: read with ``sexpdata``, write in KiCad 8/9's own layout, edit by path.

Parsing goes through the maintained generic parser ``sexpdata`` (its :class:`sexpdata.Parser`,
with one extension: a number keeps the text it was written with, so ``12.000000`` is written
back as ``12.000000`` and an unedited file round-trips byte for byte). kiutils 1.4.8 and
kicadfiles 1.0.5 were tried first on a KiCad 9 board and schematic: kiutils drops segment
uuids, footprint property positions and ``(hide yes)`` flags on a round trip; kicadfiles
refuses a KiCad 9 zone (``layers`` instead of ``layer``). A generic tree loses nothing.

The tree is plain Python: a list is a node (``node[0]`` its head :class:`Symbol`), a
:class:`Symbol` is an unquoted atom, a plain ``str`` a quoted string, :class:`Integer` and
:class:`Number` numbers that remember their text. :func:`dumps` writes KiCad's layout (KiCad's
``Prettify``): a list of atoms on one line, a list with sub-lists opens on its own line indented
by one tab per depth with its closing parenthesis on a line of its own, and ``(xy ...)`` points
packed side by side up to column 99.

Paths (:func:`select`) name nodes the way an engineer would: ``footprint:C4/at`` is the ``at``
of the footprint whose reference is C4, ``symbol:R2/property:Footprint`` a schematic field,
``footprint:U1/pad:5`` a pad, ``segment#3`` the fourth segment; :func:`apply_patch` edits with
them (``set``, ``insert``, ``delete``), so an agent never has to count parentheses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import sexpdata

from pcbinnobench.errors import PcbBenchError

__all__ = [
    "MAX_DEPTH",
    "Integer",
    "Node",
    "Number",
    "PatchError",
    "SexprError",
    "Symbol",
    "apply_patch",
    "child",
    "children",
    "dumps",
    "format_number",
    "head",
    "identity",
    "loads",
    "node_text",
    "num",
    "select",
    "sym",
    "text_value",
]

Symbol = sexpdata.Symbol
Node = list  # a KiCad node: [Symbol(head), *items]


class SexprError(PcbBenchError):
    """Text that is not one well-formed s-expression (names the file and the place)."""


class PatchError(PcbBenchError):
    """An edit that cannot be applied: bad path, no or several matches, bad replacement."""


class Integer(int):
    """An integer atom that keeps its source text (``-90``, ``0``)."""

    text: str

    def __new__(cls, text: str) -> Integer:
        obj = super().__new__(cls, int(text))
        obj.text = text
        return obj


class Number(float):
    """A real atom that keeps its source text (``12.000000`` stays ``12.000000``)."""

    text: str

    def __new__(cls, text: str) -> Number:
        obj = super().__new__(cls, float(text))
        obj.text = text
        return obj


_INT = re.compile(r"[-+]?\d+\Z")
_REAL = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?\Z")


#: Deepest nesting :func:`loads` accepts. KiCad 8/9 boards and schematics nest about ten
#: levels; sexpdata's parser (and the writers and validators that walk the tree) recurse once
#: per level, so thousands of ``(`` ended in a RecursionError (issue #46). The limit is checked
#: in the scan that runs before parsing, so the refusal names the file, line and column.
MAX_DEPTH = 100
#: Longest number accepted, in characters (Python reads integers of at most 4300 digits;
#: KiCad writes coordinates with six decimals).
MAX_NUMBER_CHARS = 64


class _BadAtom(Exception):
    """A number atom that cannot stand in a board: non-finite or absurdly long."""

    def __init__(self, token: str, why: str) -> None:
        super().__init__(why)
        self.token = token
        self.why = why


class _KiCadParser(sexpdata.Parser):  # type: ignore[misc]
    """sexpdata's parser with KiCad's atoms: no ``nil``/``t`` booleans, no ``;`` comments, and
    numbers that remember their text. Only decimal numbers are numbers: ``inf``, ``nan`` and
    ``0x0000_ffff`` stay symbols (KiCad writes layer masks like that)."""

    def __init__(self, string: str) -> None:
        super().__init__(string, nil=None, true=None, false=None, line_comment="\x00")

    def atom(self, token: str) -> Any:
        numeric = _INT.match(token) or _REAL.match(token)
        if numeric and len(token) > MAX_NUMBER_CHARS:
            raise _BadAtom(token, f"a {len(token)}-character number (at most {MAX_NUMBER_CHARS})")
        if _INT.match(token):
            return Integer(token)
        if _REAL.match(token):
            value = Number(token)
            if not math.isfinite(value):  # 1e999: a decimal literal beyond the float range
                raise _BadAtom(token, f"number {token} is beyond the float range")
            return value
        return Symbol(token)


def _position(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {col}"


def loads(text: str, source: str = "<text>") -> Node:
    """Parse one KiCad s-expression (a whole file: ``(kicad_pcb ...)``) into a tree.

    Anything else is one :class:`SexprError` naming ``source``: unbalanced parentheses, an
    unterminated string, text after the closing parenthesis, or not a list at all.
    """
    if "\x00" in text:
        raise SexprError(f"{source}: contains a NUL byte (not a text s-expression)")
    stripped = text.strip()
    if not stripped:
        raise SexprError(f"{source}: empty file")
    if not stripped.startswith("("):
        raise SexprError(f"{source}: does not start with '(' (not an s-expression)")
    depth, in_str, esc = 0, False, False
    for i, c in enumerate(text):  # sexpdata's own messages do not say where; find it here
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "(":
            depth += 1
            if depth > MAX_DEPTH:
                raise SexprError(
                    f"{source}: nested deeper than {MAX_DEPTH} levels at {_position(text, i)} "
                    "(KiCad files nest about ten)"
                )
        elif c == ")":
            depth -= 1
            if depth < 0:
                raise SexprError(f"{source}: unbalanced ')' at {_position(text, i)}")
    if in_str:
        raise SexprError(f"{source}: unterminated string")
    if depth > 0:
        raise SexprError(f"{source}: {depth} unclosed '(' at end of file (truncated?)")
    try:
        parsed = _KiCadParser(text).parse()
    except (sexpdata.ExpectClosingBracket, sexpdata.ExpectNothing, sexpdata.ExpectSExp) as exc:
        raise SexprError(f"{source}: malformed s-expression ({exc})") from None
    except _BadAtom as exc:
        at = text.find(exc.token)
        raise SexprError(f"{source}: {exc.why} at {_position(text, max(at, 0))}") from None
    except (IndexError, AttributeError, ValueError) as exc:  # sexpdata on odd escapes
        raise SexprError(f"{source}: malformed s-expression ({type(exc).__name__})") from None
    if len(parsed) != 1:
        raise SexprError(f"{source}: {len(parsed)} top-level expressions, expected one")
    tree = parsed[0]
    if not isinstance(tree, list) or not tree or not isinstance(tree[0], Symbol):
        raise SexprError(f"{source}: the top-level expression has no head symbol")
    return tree


# ----------------------------------------------------------------------------- writing


def format_number(value: float) -> str:
    """A number as KiCad writes it: at most 6 decimals, no trailing zeros, no ``-0``."""
    if isinstance(value, (Integer, Number)):
        return value.text
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise PatchError(f"not a finite number: {value!r}")
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _atom(value: Any) -> str:
    if isinstance(value, Symbol):
        return str(value.value())
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return format_number(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    raise PatchError(f"cannot write {type(value).__name__} {value!r} in an s-expression")


_XY_LIMIT = 99  # KiCad packs (xy ...) points on one line up to this column
_WRAP_COLUMN = 72  # ... and wraps a run of atoms past this one


def _line_length(out: list[str]) -> int:
    n = 0
    for piece in reversed(out):
        if "\n" in piece:
            return n + len(piece.rsplit("\n", 1)[-1])
        n += len(piece)
    return n


def dumps(tree: Node) -> str:
    """The tree as KiCad 8/9 writes it (tabs, one sub-list per line, packed ``xy``), with a
    final newline. Writing what :func:`loads` read from a KiCad 8/9 file gives its bytes."""
    out: list[str] = []
    _write(tree, 0, out)
    out.append("\n")
    return "".join(out)


def _is_xy(node: Any) -> bool:
    return isinstance(node, list) and bool(node) and node[0] == Symbol("xy")


def _write(node: Node, depth: int, out: list[str]) -> None:
    lead = _leading_atoms(node)
    # KiCad breaks a long run of atoms (image data) once the line passes column 72, one more
    # tab in, and then closes the list on a line of its own.
    line = _line_length(out)
    wrapped = False
    parts = ["(" + _atom(lead[0])] if lead else ["("]
    line += len(parts[0])
    for atom in lead[1:]:
        text = _atom(atom)
        if line > _WRAP_COLUMN:
            parts.append("\n" + "\t" * (depth + 1) + text)
            line = depth + 1 + len(text)
            wrapped = True
        else:
            parts.append(" " + text)
            line += 1 + len(text)
    out.append("".join(parts))
    rest = node[len(lead) :]
    if not rest:
        out.append("\n" + "\t" * depth + ")" if wrapped else ")")
        return
    column: int | None = None  # where the line of packed (xy ...) points ends, if it does
    for item in rest:
        if isinstance(item, list) and _is_xy(item):
            text = _inline(item)
            if column is not None and column < _XY_LIMIT:
                out.append(" " + text)
                column += 1 + len(text)
            else:
                out.append("\n" + "\t" * (depth + 1) + text)
                column = depth + 1 + len(text)
        elif isinstance(item, list):
            out.append("\n" + "\t" * (depth + 1))
            _write(item, depth + 1, out)
            column = None
        else:
            out.append(" " + _atom(item))
            column = None
    out.append("\n" + "\t" * depth + ")")


def _leading_atoms(node: Node) -> list[Any]:
    lead = []
    for item in node:
        if isinstance(item, list):
            break
        lead.append(item)
    return lead


def _inline(node: Node) -> str:
    parts = [_inline(x) if isinstance(x, list) else _atom(x) for x in node]
    return "(" + " ".join(parts) + ")"


def node_text(node: Any) -> str:
    """One node in KiCad layout (indented as at depth 0), for showing to an agent."""
    if not isinstance(node, list):
        return _atom(node)
    return dumps(node).rstrip("\n")


# ----------------------------------------------------------------------------- reading helpers


def sym(name: str) -> Any:
    return Symbol(name)


def head(node: Any) -> str | None:
    """The head name of a node, or None for an atom or an empty list."""
    if isinstance(node, list) and node and isinstance(node[0], Symbol):
        return str(node[0].value())
    return None


def children(node: Node, name: str | None = None) -> Iterator[Node]:
    """The sub-lists of ``node`` (with head ``name`` when given), in file order."""
    for item in node[1:]:
        if isinstance(item, list) and (name is None or head(item) == name):
            yield item


def child(node: Node, name: str) -> Node | None:
    """The first sub-list with head ``name``, or None."""
    return next(children(node, name), None)


def text_value(value: Any) -> str:
    """An atom as text: a symbol's name, a string's content, a number's source text."""
    if isinstance(value, Symbol):
        return str(value.value())
    if isinstance(value, (Integer, Number)):
        return value.text
    if isinstance(value, (int, float)):
        return format_number(value)
    return str(value)


def num(value: Any, what: str = "value") -> float:
    """An atom as a float, or a :class:`SexprError` naming ``what``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise SexprError(f"{what}: expected a number, got {text_value(value)!r}")


def _property(node: Node, name: str) -> str | None:
    for prop in children(node, "property"):
        if len(prop) > 2 and text_value(prop[1]) == name:
            return text_value(prop[2])
    return None


def identity(node: Node) -> str | None:
    """What a path's ``:key`` matches for this node: a footprint's or symbol's reference
    (KiCad 8/9 ``property "Reference"``; KiCad 6/7 ``fp_text reference``), a property's name,
    a pad's or pin's number, a board net's name, else the uuid, else the first atom."""
    h = head(node)
    if h in ("footprint", "symbol", "module"):
        ref = _property(node, "Reference")
        if ref is None:
            for t in children(node, "fp_text"):
                if len(t) > 2 and text_value(t[1]) == "reference":
                    ref = text_value(t[2])
        if ref is not None:
            return ref
        if len(node) > 1 and not isinstance(node[1], list):
            return text_value(node[1])  # lib_symbols entries: (symbol "Device:C" ...)
    if h == "net" and len(node) > 2:
        return text_value(node[2])
    if h in ("property", "pad", "pin", "net_class", "layer", "label", "global_label"):
        return text_value(node[1]) if len(node) > 1 and not isinstance(node[1], list) else None
    uuid = child(node, "uuid")
    if uuid is not None and len(uuid) > 1:
        return text_value(uuid[1])
    if len(node) > 1 and not isinstance(node[1], list):
        return text_value(node[1])
    return None


_STEP = re.compile(r"(?P<head>[A-Za-z_][\w.]*)(?::(?P<key>[^#/]+))?(?:#(?P<index>\d+))?\Z")


def _steps(path: str) -> list[tuple[str, str | None, int | None]]:
    steps = []
    for part in [p for p in path.strip().split("/") if p]:
        m = _STEP.match(part.strip())
        if m is None:
            raise PatchError(f"bad path step {part!r} (use head, head:key or head#index)")
        index = m.group("index")
        steps.append((m.group("head"), m.group("key"), None if index is None else int(index)))
    return steps


def select(tree: Node, path: str) -> list[tuple[Node, Node]]:
    """Every ``(parent, node)`` the path names, in file order; ``""`` names the root.

    A step is ``head`` (every child list with that head), ``head:key`` (those whose
    :func:`identity` is ``key``) or either with ``#i`` (the i-th of those, from 0).
    """
    current: list[tuple[Node, Node]] = [(tree, tree)]
    for h, key, index in _steps(path):
        found: list[tuple[Node, Node]] = []
        for _, node in current:
            matches = [c for c in children(node, h) if key is None or identity(c) == key.strip()]
            if index is not None:
                matches = matches[index : index + 1]
            found.extend((node, m) for m in matches)
        current = found
    return current


# ----------------------------------------------------------------------------- editing


def _parse_fragment(value: str, what: str) -> Node:
    if not isinstance(value, str):
        raise PatchError(f"{what}: value must be s-expression text like '(at 1 2 0)'")
    try:
        node = loads(value, source=what)
    except SexprError as exc:
        raise PatchError(str(exc)) from None
    return node


def _one(tree: Node, path: str, op: str) -> tuple[Node, Node]:
    found = select(tree, path)
    if not found:
        raise PatchError(f"{op} {path!r}: no node matches")
    if len(found) > 1:
        raise PatchError(f"{op} {path!r}: {len(found)} nodes match; add #i to pick one")
    return found[0]


def apply_patch(tree: Node, ops: Sequence[dict[str, Any]] | Iterable[dict[str, Any]]) -> int:
    """Apply s-expression-aware edits to ``tree`` in place; returns how many nodes changed.

    Each op is a dict: ``{"op": "set", "path": P, "value": "(at 1 2 90)"}`` replaces the one
    node at P; ``{"op": "insert", "path": P, "value": "(...)"}`` adds the node as a child of
    the one node at P (``""``: the root), after the last sibling with the same head;
    ``{"op": "delete", "path": P}`` removes the one node at P (``"all": true``: every match).
    All ops are checked against the tree as it is when they run; a failing op raises
    :class:`PatchError` and leaves the ops before it applied (callers work on a copy).
    """
    changed = 0
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise PatchError(f"op {i}: must be an object with 'op' and 'path'")
        kind, path = op.get("op"), op.get("path", "")
        if not isinstance(path, str):
            raise PatchError(f"op {i}: 'path' must be a string")
        if kind == "set":
            parent, node = _one(tree, path, "set")
            new = _parse_fragment(op.get("value", ""), f"op {i} value")
            if node is tree:
                raise PatchError(f"op {i}: cannot replace the whole file with set")
            parent[_index_of(parent, node)] = new
            changed += 1
        elif kind == "insert":
            _, node = _one(tree, path, "insert")
            new = _parse_fragment(op.get("value", ""), f"op {i} value")
            same = [j for j, c in enumerate(node) if j > 0 and head(c) == head(new)]
            node.insert((same[-1] + 1) if same else len(node), new)
            changed += 1
        elif kind == "delete":
            found = select(tree, path)
            if not path.strip():
                raise PatchError(f"op {i}: cannot delete the whole file")
            if not found:
                raise PatchError(f"delete {path!r}: no node matches")
            if len(found) > 1 and not op.get("all"):
                raise PatchError(f"delete {path!r}: {len(found)} nodes match; add #i or all")
            for parent, node in found:
                del parent[_index_of(parent, node)]
                changed += 1
        else:
            raise PatchError(f"op {i}: unknown op {kind!r} (set, insert, delete)")
    return changed


def _index_of(parent: Node, node: Node) -> int:
    for j, c in enumerate(parent):
        if c is node:
            return j
    raise PatchError("internal: node not found in its parent")  # pragma: no cover
