"""The package's one exception class: a message a user can act on, naming the file or field."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["PcbBenchError"]


class PcbBenchError(PaperstackError):
    """Bad input to pcbinnobench: a file, task, patch or flag it cannot use (one line)."""
