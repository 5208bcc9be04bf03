"""Resumable parts of a long run: a value computed once per (code, flags, key), kept on disk.

A real-model arm on a CPU is hours of independent pieces (one seed's training and evaluation
each). ``run.resumable(f"seed-{seed}", lambda: run_seed(seed))`` writes the piece's value into
the parts folder (``--parts DIR``, default ``<out>/.parts``) the moment it is computed, and a
rerun of the same command with the same flags at the same git revision loads it instead of
computing it again. So a run killed after three of five seeds resumes at the fourth, and two
processes given disjoint ``--seeds`` and one ``--parts`` folder split the work between them;
a run with every seed then assembles the result from the folder in seconds.

A part is reused only when its *fingerprint* matches: the distribution and its version, the
command, every flag except the seed list, ``--out``, ``--parts`` and ``--no-progress``, the
git revision, and the key. Two conditions follow for the caller:

- the key names everything else the value depends on: the seed, and anything derived from the
  run's first seed or from the whole seed list (a value computed from all seeds is not a part);
- the value is JSON (dicts, lists, numbers, strings). It is returned as JSON whether computed
  or loaded (tuples become lists, numpy scalars floats), so the code after it sees the same
  thing either way and a resumed run writes the numbers an uninterrupted one writes.

Only a committed tree pins the code, so a run from a tree with uncommitted changes, or outside
git, keeps no parts (it computes everything, as before). The manifest lists the parts a run
loaded (``Manifest.resumed``: the key, when and on which host each was computed, its
seconds), and ``paperstack.preregistration.changes_since`` counts a run as started when its
first part did.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import platform
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from paperstack.errors import PaperstackError

__all__ = ["PARTS_DIRNAME", "Parts", "fingerprint"]

#: The parts folder inside ``--out`` when ``--parts`` is not given.
PARTS_DIRNAME = ".parts"
#: Flags that do not change what a part computes.
_NOT_FINGERPRINTED = frozenset({"command", "out", "parts", "no_progress", "seed", "seeds"})
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def fingerprint(
    dist: str, version: str, command: str, flags: Mapping[str, Any], revision: str | None
) -> dict[str, Any]:
    """What a part's value depends on besides its key (see the module docstring)."""
    kept = {k: v for k, v in sorted(flags.items()) if k not in _NOT_FINGERPRINTED}
    return {
        "dist": dist,
        "version": version,
        "command": command,
        "flags": json.loads(json.dumps(kept, default=str)),
        "revision": revision,
    }


class Parts:
    """The parts folder of one run (``Run.resumable`` delegates here).

    ``revision`` is the run's git revision; None or one ending in ``-dirty`` turns keeping off
    (:attr:`kept` is False): every part is computed and nothing is written or read.
    """

    def __init__(
        self,
        folder: str | Path,
        dist: str,
        version: str,
        command: str,
        flags: Mapping[str, Any],
        revision: str | None,
        log: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.folder = Path(folder)
        self.fingerprint = fingerprint(dist, version, command, flags, revision)
        self.kept = bool(revision) and not str(revision).endswith("-dirty")
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
                    "parts: not kept (uncommitted changes or no git revision: nothing pins "
                    "the code a part would be reused with)"
                )
                self._told = True
            return _as_json(compute(), key)
        path = self.path(key)
        if path.exists():
            stored = _read(path)
            if stored.get("fingerprint") == self.fingerprint and stored.get("key") == key:
                self.resumed.append({k: stored[k] for k in ("key", "started", "seconds", "host")})
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
