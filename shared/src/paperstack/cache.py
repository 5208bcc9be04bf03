"""Where paperstack keeps what it builds once and reuses: trained tiny models, extracted weights.

One root for every package, so a user clears or relocates it in one place: ``cache_dir`` when a
caller passes one, else ``$PAPERSTACK_CACHE``, else the platform's user cache directory
(``~/.cache/paperstack`` on Linux). Entries are written to a temporary sibling and renamed into
place by their writers, so a killed run never leaves a half-written entry here.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache root: ``cache_dir``, else ``$PAPERSTACK_CACHE``, else the user cache directory."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("PAPERSTACK_CACHE")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("paperstack"))
