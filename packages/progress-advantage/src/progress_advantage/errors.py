"""The package's one exception class, so callers and the CLI can tell bad input from bugs."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["ProgressAdvantageError"]


class ProgressAdvantageError(PaperstackError):
    """Bad input to progress-advantage; the one-line message names the file, field or value."""
