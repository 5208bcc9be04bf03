"""The package's one exception family: every bad input ends as one of these, one line each."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["CycleError", "MinPathError"]


class MinPathError(PaperstackError):
    """Bad input to minpath (a file, a field, a value); the message names it."""


class CycleError(MinPathError):
    """The dependencies given for a chain of thought form a cycle (the message names it)."""
