"""The task format: an agent-visible package and a hidden evaluation package, kept apart.

On disk a task set is two sibling trees::

    tasks/<id>/task.json              id, title, board, kind, the two prompt files
    tasks/<id>/prompts/objective.md   the objective alone
    tasks/<id>/prompts/guided.md      the objective plus an expert trajectory of ECAD edits
    tasks/<id>/workspace/             the KiCad 9 project and references/ (what agents see)
    hidden/<id>/validators.json       the checks (see pcbinnobench.validators)
    hidden/<id>/solution.json         the expert trajectory as tool actions (the oracle's patch)
    hidden/<id>/original/             the workspace's design files as shipped
    hidden/<id>/ground_truth/         the design files after the expert's edits

An agent works in a sandboxed copy of ``workspace/`` only (:class:`pcbinnobench.tools.Sandbox`);
nothing under ``hidden/`` is copied or reachable from it. The shipped set lives in the
paperstack cache, built from :mod:`pcbinnobench.catalog` on first use
(``pcbinnobench build-tasks --out DIR`` writes it anywhere); ``--tasks DIR`` points the
commands at another set with the same layout.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pcbinnobench.errors import PcbBenchError

__all__ = ["LEVELS", "Task", "TaskSetError", "default_root", "load_tasks"]

#: prompt levels: the objective alone, or the objective with the expert trajectory
LEVELS = ("objective", "guided")


class TaskSetError(PcbBenchError):
    """A task folder that is missing a file or has a malformed task.json."""


@dataclass(frozen=True)
class Task:
    """One task. ``workspace`` and the prompts are what an agent may see; ``hidden`` is the
    evaluation package, read by the validators and (explicitly privileged) the oracle."""

    id: str
    title: str
    board: str
    kind: str
    workspace: Path
    prompts: dict[str, str]
    hidden: Path

    def prompt(self, level: str) -> str:
        try:
            return self.prompts[level]
        except KeyError:
            raise TaskSetError(f"task {self.id}: no prompt level {level!r} ({LEVELS})") from None

    def solution(self) -> list[dict[str, Any]]:
        """The expert trajectory (hidden side: only the oracle agent gets it)."""
        path = self.hidden / "solution.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TaskSetError(f"{path}: unreadable solution ({exc})") from None
        if not isinstance(data, list):
            raise TaskSetError(f"{path}: a solution is a list of actions")
        return data


def _catalog_digest() -> str:
    """SHA-256 of the code the shipped task set is built from (so a change rebuilds it)."""
    h = hashlib.sha256()
    for name in (
        "catalog.py",
        "parts.py",
        "edits.py",
        "sexpr.py",
        "design.py",
        "drc.py",
        "tools.py",
        "tasks.py",
    ):
        h.update((resources.files("pcbinnobench") / name).read_bytes())
    return h.hexdigest()[:16]


def default_root(cache_dir: str | Path | None = None) -> Path:
    """The shipped task set, built from :mod:`pcbinnobench.catalog` into the paperstack cache
    once per version of the code that writes it (a temporary sibling renamed into place, so
    two processes or a killed run never leave half a task set)."""
    from paperstack.cache import cache_root
    from pcbinnobench.catalog import build_all

    root = cache_root(cache_dir) / "pcbinnobench" / f"tasks-{_catalog_digest()}"
    if (root / "complete").is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tasks-", dir=root.parent))
    try:
        build_all(tmp)
        (tmp / "complete").write_text("ok\n", encoding="utf-8")
        try:
            os.replace(tmp, root)
        except OSError:
            if not (root / "complete").is_file():  # another writer's half-built folder
                shutil.rmtree(root, ignore_errors=True)
                os.replace(tmp, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def _read_json(path: Path) -> Any:
    if path.is_dir():
        raise TaskSetError(f"{path}: is a directory, expected a JSON file")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskSetError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskSetError(f"{path}: unreadable ({exc})") from None
    except ValueError as exc:
        raise TaskSetError(f"{path}: not JSON ({exc})") from None


def load_tasks(root: str | Path | None = None, ids: list[str] | None = None) -> list[Task]:
    """Every task under ``root/tasks`` with its hidden package under ``root/hidden``
    (``ids``: only those, in that order)."""
    base = Path(root) if root is not None else default_root()
    if not base.is_dir():
        raise TaskSetError(f"{base}: no such task-set directory")
    public, hidden = base / "tasks", base / "hidden"
    for d in (public, hidden):
        if not d.is_dir():
            raise TaskSetError(f"{base}: no {d.name}/ folder (a task set has tasks/ and hidden/)")
    found = sorted(p.name for p in public.iterdir() if p.is_dir())
    if ids is not None:
        unknown = [i for i in ids if i not in found]
        if unknown:
            raise TaskSetError(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(found)}")
        found = list(ids)
    tasks = []
    for tid in found:
        folder = public / tid
        meta = _read_json(folder / "task.json")
        if not isinstance(meta, dict):
            raise TaskSetError(f"{folder / 'task.json'}: must be an object")
        for key in ("task_id", "prompts", "workspace"):
            if key not in meta:
                raise TaskSetError(f"{folder / 'task.json'}: missing field {key!r}")
        prompts = {}
        for level in LEVELS:
            rel = meta["prompts"].get(level) if isinstance(meta["prompts"], dict) else None
            if not isinstance(rel, str):
                raise TaskSetError(f"{folder / 'task.json'}: prompts.{level} missing")
            p = folder / rel
            if not p.is_file():
                raise TaskSetError(f"{p}: missing prompt file")
            prompts[level] = p.read_text(encoding="utf-8")
        workspace = folder / str(meta["workspace"])
        if not workspace.is_dir():
            raise TaskSetError(f"{workspace}: missing workspace folder")
        hid = hidden / tid
        if not (hid / "validators.json").is_file():
            raise TaskSetError(f"{hid}: no hidden evaluation package (validators.json)")
        tasks.append(
            Task(
                tid,
                str(meta.get("title", tid)),
                str(meta.get("board", "")),
                str(meta.get("kind", "")),
                workspace,
                prompts,
                hid,
            )
        )
    if not tasks:
        raise TaskSetError(f"{public}: no tasks")
    return tasks
