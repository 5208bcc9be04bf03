"""The agent's file tools, confined to a sandboxed copy of the task workspace.

An agent acts only through :meth:`Sandbox.execute` with an action ``{"tool": name, "args":
{...}}``; the harness runs it and shows the agent the returned observation text. The
sandbox is a fresh temporary copy of the *agent-visible* workspace alone: the hidden
evaluation package is never copied, and every path an agent names is resolved inside the
sandbox root (absolute paths, ``..``, ``~``, NUL bytes and symbolic links that lead out are
refused), so nothing an agent can call reads the hidden side.

Tools (:data:`TOOLS`): ``list_files``, ``read_file``, ``summary`` (the design as a reviewer
sees it), ``query`` (s-expression nodes by path), ``patch`` (s-expression-aware edits),
``write_file``, ``delete_file``, and the ECAD edits of :mod:`pcbinnobench.edits`:
``place``, ``delete_tracks``, ``add_track``, ``add_via``, ``add_part``, ``set_value``,
``set_footprint``, ``set_pad_net``, ``set_pin_net``; ``done`` ends the episode.
A failed tool call is an observation starting with ``error:``, never an exception.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pcbinnobench import design, edits, sexpr
from pcbinnobench.errors import PcbBenchError

__all__ = ["TOOLS", "Sandbox", "SandboxError", "ToolError", "tool_help", "tree_digest"]

MAX_READ = 6000  # characters one read_file shows (the agent pages with offset)


class SandboxError(PcbBenchError):
    """A path that leaves the sandbox, or a sandbox that cannot be made."""


class ToolError(PcbBenchError):
    """A tool call with bad arguments (shown to the agent as an ``error:`` observation)."""


#: tool -> (arguments, what it does): the text agents are shown.
TOOLS: dict[str, tuple[str, str]] = {
    "list_files": ("{}", "every file in the workspace, with its size"),
    "read_file": ('{"path", "offset"?}', f"a file's text, {MAX_READ} characters from offset"),
    "summary": (
        '{"path"}',
        "a board's footprints, pads and nets, or a schematic's symbols and nets",
    ),
    "query": (
        '{"path", "select"}',
        "the s-expression nodes a path names, e.g. footprint:C4/at or symbol:R2/property:Footprint",
    ),
    "patch": (
        '{"path", "ops": [{"op": "set"|"insert"|"delete", "path", "value"?}]}',
        "s-expression-aware edits of one file",
    ),
    "write_file": ('{"path", "content"}', "replace a whole file"),
    "delete_file": ('{"path"}', "delete a file"),
    "place": ('{"ref", "x", "y", "rotation"?}', "move a footprint on the board (pads follow)"),
    "delete_tracks": ('{"ref"}', "rip up the tracks and vias hanging off a footprint"),
    "add_track": ('{"net", "points": [[x, y], ...], "layer"?, "width"?}', "route copper"),
    "add_via": ('{"net", "x", "y"}', "a through via"),
    "add_part": (
        '{"ref", "part", "value", "x", "y", "rotation"?, "nets": {pad: net}}',
        "a new component in the schematic and on the board",
    ),
    "set_value": ('{"ref", "value"}', "a component's value, in both files"),
    "set_footprint": ('{"ref", "part"}', "swap a component's package, in both files"),
    "set_pad_net": ('{"ref", "pad", "net"}', "assign a board pad to a net"),
    "set_pin_net": ('{"ref", "pin", "net"}', "connect a schematic pin to a net (label)"),
    "done": ("{}", "finish"),
}


def tool_help() -> str:
    """The tool list as agents are shown it."""
    return "\n".join(f"- {name} {args}: {text}" for name, (args, text) in TOOLS.items())


def tree_digest(root: Path) -> dict[str, str]:
    """SHA-256 of every regular file under ``root`` (relative posix path -> hex)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _num(args: dict[str, Any], key: str, default: float | None = None) -> float:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ToolError(f"'{key}' must be a number, got {value!r}")
    return float(value)


def _str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return sexpr.format_number(value)
    if not isinstance(value, str) or not value:
        raise ToolError(f"'{key}' must be a non-empty string")
    return value


class Sandbox:
    """A temporary copy of a workspace, and the tools that act on it.

    ``Sandbox(workspace)`` copies the directory (regular files only; symbolic links are not
    copied, so none can point at the hidden package). ``root`` is the copy; ``close()``
    (or the context manager) removes it unless ``keep``.
    """

    def __init__(self, workspace: str | os.PathLike[str], keep: bool = False) -> None:
        src = Path(workspace)
        if not src.is_dir():
            raise SandboxError(f"{src}: not a workspace directory")
        self._tmp = Path(tempfile.mkdtemp(prefix="pcbinnobench-sandbox-"))
        self.root = (self._tmp / "workspace").resolve()
        self.root.mkdir()
        for p in sorted(src.rglob("*")):
            rel = p.relative_to(src)
            if p.is_symlink():
                continue
            if p.is_dir():
                (self.root / rel).mkdir(parents=True, exist_ok=True)
            elif p.is_file():
                (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, self.root / rel)
        self.keep = keep
        self.done = False
        #: set when the files changed between two tool calls (an edit from outside the tools)
        self.tampered = False
        self.last_digest = tree_digest(self.root)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self.keep:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # ------------------------------------------------------------------ paths

    def resolve(self, path: object) -> Path:
        """A path inside the sandbox, or :class:`SandboxError`."""
        if not isinstance(path, str) or not path.strip():
            raise SandboxError("path must be a non-empty string")
        if "\x00" in path:
            raise SandboxError("path contains a NUL byte")
        if path.startswith(("/", "\\", "~")) or (len(path) > 1 and path[1] == ":"):
            raise SandboxError(f"{path}: outside the workspace (paths are relative to it)")
        target = (self.root / path).resolve()
        if target != self.root and self.root not in target.parents:
            raise SandboxError(f"{path}: outside the workspace")
        return target

    def _file(self, suffix: str) -> Path:
        found = sorted(self.root.glob(f"*{suffix}"))
        if len(found) != 1:
            raise ToolError(f"expected one {suffix} file in the workspace, found {len(found)}")
        return found[0]

    def _tree(self, path: Path, kind: str) -> sexpr.Node:
        return design.read_tree(path, kind)

    def _save(self, path: Path, tree: sexpr.Node) -> None:
        path.write_text(sexpr.dumps(tree), encoding="utf-8")

    # ------------------------------------------------------------------ tools

    def execute(self, action: object) -> str:
        """Run one action; the observation text (``error: ...`` when it failed). Files that
        changed since the last tool call mark the sandbox :attr:`tampered`."""
        if tree_digest(self.root) != self.last_digest:
            self.tampered = True
        try:
            if not isinstance(action, dict):
                raise ToolError('an action is {"tool": name, "args": {...}}')
            name = action.get("tool")
            args = action.get("args", {})
            if not isinstance(args, dict):
                raise ToolError("'args' must be an object")
            handler = self._handlers().get(name)  # type: ignore[arg-type]
            if handler is None:
                raise ToolError(f"unknown tool {name!r}; tools: {', '.join(TOOLS)}")
            result = handler(args)
        except (PcbBenchError, OSError) as exc:
            result = f"error: {exc}"
        self.last_digest = tree_digest(self.root)
        return result

    def _handlers(self) -> dict[str, Callable[[dict[str, Any]], str]]:
        return {
            "list_files": self._list,
            "read_file": self._read,
            "summary": self._summary,
            "query": self._query,
            "patch": self._patch,
            "write_file": self._write,
            "delete_file": self._delete,
            "place": self._board_edit(
                lambda pcb, a: edits.place(
                    pcb,
                    _str(a, "ref"),
                    _num(a, "x"),
                    _num(a, "y"),
                    None if a.get("rotation") is None else _num(a, "rotation"),
                )
            ),
            "delete_tracks": self._board_edit(
                lambda pcb, a: f"removed {edits.delete_tracks(pcb, _str(a, 'ref'))} items"
            ),
            "add_track": self._board_edit(
                lambda pcb, a: edits.add_track(
                    pcb,
                    _str(a, "net"),
                    a.get("points", []),
                    str(a.get("layer", "F.Cu")),
                    _num(a, "width", 0.25),
                )
            ),
            "add_via": self._board_edit(
                lambda pcb, a: edits.add_via(pcb, _str(a, "net"), _num(a, "x"), _num(a, "y"))
            ),
            "set_pad_net": self._board_edit(
                lambda pcb, a: edits.set_pad_net(
                    pcb, _str(a, "ref"), _str(a, "pad"), _str(a, "net")
                )
            ),
            "add_part": self._both_edit(
                lambda pcb, sch, a: edits.add_part(
                    pcb,
                    sch,
                    _str(a, "ref"),
                    _str(a, "part"),
                    _str(a, "value"),
                    _num(a, "x"),
                    _num(a, "y"),
                    _num(a, "rotation", 0.0),
                    _nets(a),
                )
            ),
            "set_value": self._both_edit(
                lambda pcb, sch, a: edits.set_value(pcb, sch, _str(a, "ref"), _str(a, "value"))
            ),
            "set_footprint": self._both_edit(
                lambda pcb, sch, a: edits.set_footprint(pcb, sch, _str(a, "ref"), _str(a, "part"))
            ),
            "set_pin_net": self._sch_edit(
                lambda sch, a: edits.set_pin_net(
                    sch, _str(a, "ref"), _str(a, "pin"), _str(a, "net")
                )
            ),
            "done": self._done,
        }

    def _list(self, args: dict[str, Any]) -> str:
        rows = [
            f"{p.relative_to(self.root).as_posix()} ({p.stat().st_size} bytes)"
            for p in sorted(self.root.rglob("*"))
            if p.is_file()
        ]
        return "\n".join(rows) or "(empty workspace)"

    def _read(self, args: dict[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        if not path.is_file():
            raise ToolError(f"{args.get('path')}: no such file")
        offset = int(_num(args, "offset", 0))
        text = path.read_text(encoding="utf-8", errors="replace")
        chunk = text[max(0, offset) : max(0, offset) + MAX_READ]
        more = len(text) - (offset + len(chunk))
        return chunk + (
            f"\n[... {more} more characters; offset={offset + len(chunk)}]" if more > 0 else ""
        )

    def _summary(self, args: dict[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        if path.suffix == ".kicad_pcb":
            board = design.load_board(path)
            lines = [
                f"board {path.name}: {len(board.footprints)} footprints, nets: "
                + ", ".join(board.nets)
            ]
            f = sexpr.format_number
            for fp in board.footprints.values():
                pads = " ".join(f"{p.number}@({f(p.x)},{f(p.y)})={p.net or '-'}" for p in fp.pads)
                lines.append(
                    f"{fp.ref} {fp.value} {fp.lib_id} at ({f(fp.x)}, {f(fp.y)}, "
                    f"{f(fp.rotation)}) pads {pads}"
                )
            lines.append(f"{len(board.tracks)} track segments, {len(board.vias)} vias")
            return "\n".join(lines)
        if path.suffix == ".kicad_sch":
            sch = design.load_schematic(path)
            lines = [f"schematic {path.name}: {len(sch.symbols)} symbols"]
            for sym in sch.symbols.values():
                lines.append(f"{sym.ref} {sym.value} {sym.lib_id} footprint {sym.footprint}")
            for name, members in sorted(sch.nets.items()):
                lines.append(f"net {name}: " + " ".join(f"{r}.{p}" for r, p in sorted(members)))
            return "\n".join(lines)
        raise ToolError(f"{args.get('path')}: summary reads .kicad_pcb and .kicad_sch files")

    def _kind(self, path: Path) -> str:
        kinds = {".kicad_pcb": "kicad_pcb", ".kicad_sch": "kicad_sch"}
        if path.suffix not in kinds:
            raise ToolError(f"{path.name}: query and patch edit .kicad_pcb / .kicad_sch files")
        return kinds[path.suffix]

    def _query(self, args: dict[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        tree = self._tree(path, self._kind(path))
        found = sexpr.select(tree, str(args.get("select", "")))
        if not found:
            return f"no node matches {args.get('select')!r}"
        shown = "\n".join(sexpr.node_text(node) for _, node in found[:10])
        extra = f"\n[{len(found) - 10} more matches]" if len(found) > 10 else ""
        return (shown + extra)[:MAX_READ]

    def _patch(self, args: dict[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        kind = self._kind(path)
        tree = self._tree(path, kind)
        ops = args.get("ops")
        if not isinstance(ops, list):
            raise ToolError("'ops' must be a list of edits")
        changed = sexpr.apply_patch(tree, ops)
        design.check_tree(tree, kind, path.name)
        self._save(path, tree)
        return f"patched {path.name}: {changed} node(s) changed"

    def _write(self, args: dict[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolError("'content' must be a string")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return f"wrote {path.relative_to(self.root).as_posix()} ({len(content)} characters)"

    def _delete(self, args: dict[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        if not path.is_file():
            raise ToolError(f"{args.get('path')}: no such file")
        path.unlink()
        return f"deleted {path.relative_to(self.root).as_posix()}"

    def _done(self, args: dict[str, Any]) -> str:
        self.done = True
        return "done"

    def _board_edit(
        self, fn: Callable[[sexpr.Node, dict[str, Any]], Any]
    ) -> Callable[[dict[str, Any]], str]:
        def run(args: dict[str, Any]) -> str:
            path = self._file(".kicad_pcb")
            tree = self._tree(path, "kicad_pcb")
            result = fn(tree, args)
            self._save(path, tree)
            return result if isinstance(result, str) else f"ok: {path.name} updated"

        return run

    def _sch_edit(
        self, fn: Callable[[sexpr.Node, dict[str, Any]], Any]
    ) -> Callable[[dict[str, Any]], str]:
        def run(args: dict[str, Any]) -> str:
            path = self._file(".kicad_sch")
            tree = self._tree(path, "kicad_sch")
            fn(tree, args)
            self._save(path, tree)
            return f"ok: {path.name} updated"

        return run

    def _both_edit(
        self, fn: Callable[[sexpr.Node, sexpr.Node, dict[str, Any]], Any]
    ) -> Callable[[dict[str, Any]], str]:
        def run(args: dict[str, Any]) -> str:
            pcb_path, sch_path = self._file(".kicad_pcb"), self._file(".kicad_sch")
            pcb, sch = self._tree(pcb_path, "kicad_pcb"), self._tree(sch_path, "kicad_sch")
            fn(pcb, sch, args)
            self._save(pcb_path, pcb)
            self._save(sch_path, sch)
            return f"ok: {pcb_path.name} and {sch_path.name} updated"

        return run


def _nets(args: dict[str, Any]) -> dict[str, str]:
    nets = args.get("nets", {})
    if not isinstance(nets, dict):
        raise ToolError("'nets' must be an object {pad: net}")
    return {str(k): str(v) for k, v in nets.items()}


def action_json(action: dict[str, Any]) -> str:
    """An action as the one-line JSON agents write."""
    return json.dumps(action, separators=(", ", ": "))
