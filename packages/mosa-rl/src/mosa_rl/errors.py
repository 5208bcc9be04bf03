"""The package's error class: bad input gets one line naming the value at fault."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["MosaError"]


class MosaError(PaperstackError):
    """Bad input to mosa-rl (a K beyond the vocabulary, an empty mask, mismatched models)."""
