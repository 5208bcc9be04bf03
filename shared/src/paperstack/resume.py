"""Resumable parts of a long run: a value computed once per (code, flags, key), kept on disk.

A real-model arm on a CPU is hours of independent pieces (one seed's training and evaluation
each). ``run.resumable(f"seed-{seed}", lambda: run_seed(seed))`` writes the piece's value into
the parts folder (``--parts DIR``, default ``<out>/.parts``) the moment it is computed, and a
rerun of the same command with the same flags and the same code loads it instead of
computing it again. So a run killed after three of five seeds resumes at the fourth, and two
processes given disjoint ``--seeds`` and one ``--parts`` folder split the work between them;
a run with every seed then assembles the result from the folder in seconds.

A part is reused only when its *fingerprint* matches: the distribution and its version, the
command, every flag except the seed list, ``--out``, ``--parts`` and ``--no-progress``, the
*code* (:func:`code_identity`: the git tree of the core's and the command's package folders),
and the key. Two conditions follow for the caller:

- the key names everything else the value depends on: the seed, and anything derived from the
  run's first seed or from the whole seed list (a value computed from all seeds is not a part);
- the value is JSON (dicts, lists, numbers, strings). It is returned as JSON whether computed
  or loaded (tuples become lists, numpy scalars floats), so the code after it sees the same
  thing either way and a resumed run writes the numbers an uninterrupted one writes.

The code is pinned by the trees of the folders the run imports, not by the commit: a commit
that changes nothing the part ran (a report, a README, another package, the parts themselves)
keeps it valid, so parts computed in one session can be committed and resumed at a later
commit in the next, while any change to the package's or the core's source computes every part
again. Code with uncommitted changes there, or outside git (an installed wheel), keeps no parts
(it computes everything, as before). A part file records the commit it was computed at, for
provenance. The manifest lists the parts a run loaded (``Manifest.resumed``: the key, when,
on which host and at which commit each was computed, its seconds), and
``paperstack.preregistration.changes_since`` counts a run as started when its first part did.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import platform
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from paperstack.errors import PaperstackError

__all__ = ["PARTS_DIRNAME", "Parts", "code_identity", "fingerprint"]

#: The parts folder inside ``--out`` when ``--parts`` is not given.
PARTS_DIRNAME = ".parts"
#: Flags that do not change what a part computes.
_NOT_FINGERPRINTED = frozenset({"command", "out", "parts", "no_progress", "seed", "seeds"})
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def code_identity(folders: list[Path]) -> tuple[dict[str, str] | None, str]:
    """The git tree id of each folder of code (``{repository path: tree}``), or None and why.

    None when a folder is outside a git work tree or not committed there, or has uncommitted
    changes (untracked files that git does not ignore included): then nothing pins the code a
    part would be reused with. Trees rather than the commit, so that a commit touching nothing
    under these folders keeps the parts computed before it (see the module docstring).
    """
    code: dict[str, str] = {}
    for folder in folders:
        try:
            prefix = _git(folder, "rev-parse", "--show-prefix")
            tree = _git(folder, "rev-parse", "HEAD:./")
            changed = _git(folder, "status", "--porcelain", "--untracked-files=normal", "--", ".")
        except (OSError, subprocess.SubprocessError):
            return None, f"{folder} is not code committed to a git repository"
        if changed:
            return None, f"{folder} has uncommitted changes"
        code[prefix.rstrip("/") or "."] = tree
    return code, ""


def _git(folder: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10, check=True
    )
    return out.stdout.strip()


def fingerprint(
    dist: str,
    version: str,
    command: str,
    flags: Mapping[str, Any],
    code: Mapping[str, str] | None,
) -> dict[str, Any]:
    """What a part's value depends on besides its key (see the module docstring)."""
    kept = {k: v for k, v in sorted(flags.items()) if k not in _NOT_FINGERPRINTED}
    return {
        "dist": dist,
        "version": version,
        "command": command,
        "flags": json.loads(json.dumps(kept, default=str)),
        "code": dict(sorted(code.items())) if code else None,
    }


class Parts:
    """The parts folder of one run (``Run.resumable`` delegates here).

    ``code`` is :func:`code_identity`'s; None turns keeping off (:attr:`kept` is False, and
    ``why_not`` is logged once): every part is computed and nothing is written or read.
    ``revision``, the commit checked out, is recorded in each part written (provenance only).
    """

    def __init__(
        self,
        folder: str | Path,
        dist: str,
        version: str,
        command: str,
        flags: Mapping[str, Any],
        code: Mapping[str, str] | None,
        log: Callable[[str], None] = lambda _: None,
        *,
        revision: str | None = None,
        why_not: str = "",
    ) -> None:
        self.folder = Path(folder)
        self.fingerprint = fingerprint(dist, version, command, flags, code)
        self.kept = bool(code)
        self.revision = revision
        self._why_not = why_not or "no git tree pins the code"
        self.resumed: list[dict[str, Any]] = []
        self._log = log
        self._told = False
        digest = json.dumps(self.fingerprint, sort_keys=True, separators=(",", ":"))
        self._tag = hashlib.sha256(digest.encode()).hexdigest()[:12]

    def path(self, key: str) -> Path:
        """The file of the part ``key`` for this fingerprint."""
        return self.folder / f"{key}-{self._tag}.json"

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        """The part ``key``: loaded when a matching one is on disk, else computed and written."""
        if not isinstance(key, str) or not _KEY.match(key):
            raise PaperstackError(
                f"resumable part key {key!r}: letters, digits, '.', '_' and '-' only (<= 100)"
            )
        if not self.kept:
            if not self._told:
                self._log(
                    f"parts: not kept ({self._why_not}: nothing pins the code a part would "
                    "be reused with)"
                )
                self._told = True
            return _as_json(compute(), key)
        path = self.path(key)
        if path.exists():
            stored = _read(path)
            if stored.get("fingerprint") == self.fingerprint and stored.get("key") == key:
                kept = ("key", "started", "seconds", "host", "revision")
                self.resumed.append({k: stored[k] for k in kept if k in stored})
                self.resumed[-1]["file"] = path.name
                self._log(f"part {key}: resumed from {path} (computed {stored['started']})")
                return stored["value"]
            self._log(f"part {key}: {path} is from another run; computing it again")
        started = _now()
        t0 = time.perf_counter()
        value = _as_json(compute(), key)
        record = {
            "key": key,
            "fingerprint": self.fingerprint,
            "started": started,
            "seconds": round(time.perf_counter() - t0, 1),
            "host": platform.node(),
            "revision": self.revision,
            "value": value,
        }
        from paperstack.records import atomic_write

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # NaN stays NaN (Python's JSON reads it back): a part holds what was computed.
            atomic_write(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise PaperstackError(f"--parts {self.folder}: cannot write part {key}: {exc}") from exc
        return value


def _as_json(value: Any, key: str) -> Any:
    try:
        text = json.dumps(value, allow_nan=True, default=_scalar)
    except (TypeError, ValueError) as exc:
        raise PaperstackError(f"resumable part {key}: its value is not JSON: {exc}") from None
    return json.loads(text)


def _scalar(obj: Any) -> Any:
    """numpy scalars and 0-d arrays as Python numbers (``item()``); anything else refused."""
    item = getattr(obj, "item", None)
    if callable(item) and getattr(obj, "ndim", 0) == 0:
        return item()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PaperstackError(
            f"{path}: unreadable part ({exc}); remove it to compute the part again"
        ) from None
    missing = [k for k in ("key", "fingerprint", "started", "seconds", "host", "value")
               if not isinstance(data, dict) or k not in data]  # fmt: skip
    if missing:
        raise PaperstackError(
            f"{path}: not a part (no {', '.join(missing)}); remove it to compute it again"
        )
    return data


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
