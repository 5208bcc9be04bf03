"""The package's one exception: bad input (a budget, a shape, a checkpoint) as one line."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["MageError"]


class MageError(PaperstackError):
    """A request mage-attention cannot serve; the message names the value and what to change."""
