"""The one exception numuon raises for bad input, so the CLI can print it as one line."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["NumuonError"]


class NumuonError(PaperstackError):
    """Bad input to numuon (a rank schedule, a parameter, a gradient, a file); the message names
    the value at fault."""
