"""The one exception corrective-context raises for bad input: a line naming the value at fault."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["CorrectiveContextError"]


class CorrectiveContextError(PaperstackError):
    """A candidate pool, context, model or flag corrective-context cannot use; the message says
    which and why."""
