"""Where paperstack keeps what it builds once and reuses: trained tiny models, extracted weights.

One root for every package, so a user clears or relocates it in one place: ``cache_dir`` when a
caller passes one, else ``$PAPERSTACK_CACHE``, else the platform's user cache directory
(``~/.cache/paperstack`` on Linux).

:func:`build_once` is how an entry gets there, for every package that trains or extracts
something worth keeping (a tiny base model, a fine-tuned selector, a learner's weights). The
three things each of them needs, and that are easy to get subtly wrong one package at a time:

- *once across processes*: two demos (or two CI workers) asking for the same entry train it
  once; the second waits on a file lock beside the entry and then reads what the first wrote;
- *never half-written*: the builder writes into a fresh temporary sibling, which one
  ``os.replace`` moves into place, so a killed run (Ctrl-C, OOM, a CI timeout) leaves either
  no entry or a complete one, and its lock is released by the operating system;
- *complete means marked*: an entry counts only when its marker file exists (the record a
  report quotes the training cost from), so a stale folder from an older layout is rebuilt,
  not loaded.

Keys are the caller's business: put everything the entry depends on (recipe, data, the digest
of the code that builds it) into the entry's name, so a change rebuilds instead of reusing.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from paperstack.errors import PaperstackError

__all__ = ["CacheError", "build_once", "cache_root", "read_record"]

MARKER = "paperstack-entry.json"


class CacheError(PaperstackError, RuntimeError):
    """A cache entry that cannot be read, a cache root that cannot be used, or a builder that
    did not complete its entry: one line for the user (a :class:`PaperstackError`), still a
    ``RuntimeError`` for callers written against 0.2."""


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache root: ``cache_dir``, else ``$PAPERSTACK_CACHE``, else the user cache directory."""
    if cache_dir is not None:
        root, what = Path(cache_dir), f"cache directory {cache_dir}"
    elif os.environ.get("PAPERSTACK_CACHE"):
        value = os.environ["PAPERSTACK_CACHE"]
        root, what = Path(value).expanduser(), f"PAPERSTACK_CACHE={value}"
    else:
        import platformdirs

        root = Path(platformdirs.user_cache_dir("paperstack"))
        what = f"the cache directory {root}"
    if root.exists() and not root.is_dir():
        raise CacheError(f"{what}: exists and is not a directory")
    if root.is_symlink() and not root.exists():
        raise CacheError(f"{what}: a dangling symbolic link")
    return root


def build_once(
    path: str | os.PathLike[str],
    build: Callable[[Path], Mapping[str, Any] | None],
    *,
    marker: str = MARKER,
) -> Path:
    """The cache entry at ``path``, built now by ``build`` unless it is already complete.

    ``build(tmp)`` writes the entry's files into the empty folder ``tmp`` (a sibling of
    ``path``). If it returns a mapping, that is written as JSON to ``tmp / marker`` (the
    entry's record: key, training seconds, final loss); if it returns ``None`` it must have
    written ``marker`` itself (say ``config.json`` from ``save_pretrained``). Then ``tmp`` is
    renamed to ``path`` in one ``os.replace``; a folder already at ``path`` without its marker
    (left by an older layout) is removed first. The build runs under a file lock at
    ``<path>.lock``, and the marker is checked again once the lock is held, so concurrent
    callers build once. An exception in ``build`` leaves no entry and propagates unchanged.
    """
    from filelock import FileLock

    path = Path(path)
    if (path / marker).is_file():
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CacheError(
            f"{path.parent}: cannot create the cache folder ({exc.strerror})"
        ) from None
    with FileLock(str(path.parent / f"{path.name}.lock")):
        if (path / marker).is_file():  # another process built it while we waited
            return path
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        try:
            record = build(tmp)
            if record is not None:
                text = json.dumps(dict(record), indent=2, sort_keys=True, default=str)
                (tmp / marker).write_text(text + "\n")
            if not (tmp / marker).is_file():
                raise CacheError(
                    f"{path}: the builder wrote no {marker}, so the entry is incomplete"
                )
            if path.exists():
                shutil.rmtree(path)
            os.replace(tmp, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def read_record(
    path: str | os.PathLike[str],
    marker: str = MARKER,
    error: type[Exception] = CacheError,
) -> dict[str, Any]:
    """The JSON record :func:`build_once` wrote for the entry at ``path``, or one ``error``
    naming the file when it is missing or not a JSON object."""
    file = Path(path) / marker
    try:
        record = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{file}: no readable cache record ({exc})") from None
    if not isinstance(record, dict):
        raise error(f"{file}: the cache record is not a JSON object")
    return record
