"""The append-only JSONL ledger of a market run: header, decisions, round outcomes, rankings.

Every decision is written (and flushed) the moment the agent has answered, before the market
moves on, so a killed run loses nothing that was decided: :meth:`Ledger.open` on an existing
file checks that the header's configuration is the one asked for (a changed configuration is
one clear :class:`MemeEconomyError` naming the first differing field), drops a torn last line
(a write the kill interrupted), and hands back what is already there; the market then resumes
from it without asking any agent again for a decision the ledger holds.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import IO, Any

from memeeconomy.errors import MemeEconomyError, read_text

__all__ = ["LEDGER_VERSION", "Ledger", "config_digest", "read_ledger"]

LEDGER_VERSION = 1


def config_digest(config: dict[str, Any]) -> str:
    blob = json.dumps(config, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _first_difference(old: Any, new: Any, path: str = "") -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if key not in old or key not in new or old[key] != new[key]:
                if key in old and key in new:
                    return _first_difference(old[key], new[key], f"{path}.{key}" if path else key)
                return f"{path}.{key}" if path else key
    return path or "(config)"


def read_ledger(path: str | Path) -> list[dict[str, Any]]:
    """Every complete record of a ledger file (a torn last line is skipped)."""
    p = Path(path)
    text = read_text(p, "a ledger file")
    records = []
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):  # the last line, with no newline: a torn write
                break
            raise MemeEconomyError(f"{p}: line {number}: not a JSON record") from None
    return records


class Ledger:
    """An open ledger: :attr:`records` already on disk, :meth:`append` to add one."""

    def __init__(self, path: Path, records: list[dict[str, Any]], handle: IO[str]) -> None:
        self.path = path
        self.records = records
        self._handle = handle

    @classmethod
    def open(cls, path: str | Path, config: dict[str, Any]) -> Ledger:
        """Open (or create) ``path`` for the run described by ``config``."""
        p = Path(path)
        if p.is_dir():
            raise MemeEconomyError(f"{p}: is a folder, expected a ledger file")
        digest = config_digest(config)
        records: list[dict[str, Any]] = []
        if p.exists() and p.stat().st_size > 0:
            raw = p.read_bytes()
            if not raw.endswith(b"\n"):  # a torn last write: cut it, it is decided again
                cut = raw.rfind(b"\n") + 1
                with p.open("r+b") as f:
                    f.truncate(cut)
            records = read_ledger(p)
            if records:
                header = records[0]
                if header.get("kind") != "header":
                    raise MemeEconomyError(f"{p}: line 1: not a memeeconomy ledger header")
                if header.get("digest") != digest:
                    field = _first_difference(header.get("config", {}), config)
                    raise MemeEconomyError(
                        f"{p}: this ledger was written with a different configuration "
                        f"({field} differs); use a new ledger or the original settings"
                    )
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
        handle = p.open("a", encoding="utf-8")
        ledger = cls(p, records, handle)
        if not records:
            ledger.append(
                {"kind": "header", "version": LEDGER_VERSION, "digest": digest, "config": config}
            )
        return ledger

    def append(self, record: dict[str, Any], *, sync: bool = False) -> None:
        """Write one record as one line, flushed at once (``sync``: also to the disk)."""
        self._handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        self._handle.flush()
        if sync:
            os.fsync(self._handle.fileno())
        self.records.append(record)

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
