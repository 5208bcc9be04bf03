"""One run at a time in an ``--out`` folder, and no file of an earlier run left beside a new one.

Two ``pace demo`` runs into one ``--out`` used to interleave: run 1's ``fit.json`` beside run
2's ``results.json``. :func:`claim_out_dir` takes an exclusive ``flock`` on ``DIR/.pace.lock``
(refusing, with one line, a second run while the first holds it) and then removes the artefacts
an earlier run of the command left there, so whatever the folder holds afterwards comes from
this run (each file is written atomically by the core). ``flock`` locks die with the process,
so a killed run never leaves the folder locked.

The core writes ``results.json`` and ``report.md`` after the command's function returns, so
the lock is held until the process exits or starts its next run (a CLI process runs one
command), not released when the function returns.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from pace_scheduler.errors import PaceSchedulerError

__all__ = ["LOCK_NAME", "claim_out_dir", "release_out_dirs"]

#: The lock file's name inside ``--out``.
LOCK_NAME = ".pace.lock"

_HELD: dict[Path, int] = {}  # folder -> the open, locked descriptor of this process


def release_out_dirs() -> None:
    """Release every folder this process holds (at exit, and before this process's next run)."""
    for folder, fd in list(_HELD.items()):
        with contextlib.suppress(OSError):
            (folder / LOCK_NAME).unlink()
            os.close(fd)
        _HELD.pop(folder, None)


atexit.register(release_out_dirs)


def claim_out_dir(out: Path, command: str, artefacts: Iterable[str]) -> None:
    """Lock ``out`` for this process's run of ``command`` and remove ``artefacts`` (file names,
    ``*`` globs allowed) an earlier run left there. A folder locked by another live process is
    refused with one line naming it and that process."""
    release_out_dirs()  # this process's previous run is over (one command at a time)
    out = Path(out).resolve()
    path = out / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise PaceSchedulerError(
            f"--out {out}: cannot create {LOCK_NAME}: {exc.strerror}"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = (os.pread(fd, 64, 0).decode(errors="replace").split() or ["?"])[0]
        os.close(fd)
        raise PaceSchedulerError(
            f"--out {out}: another pace run (pid {holder}) is writing there; wait for it or "
            "choose another folder"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
    _HELD[out] = fd
    for pattern in artefacts:
        for stale in out.glob(pattern):
            if stale.is_file() and stale.name != LOCK_NAME:
                stale.unlink(missing_ok=True)
