"""The one exception proofrank raises for bad input: a line naming the file, field or value."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["ProofRankError"]


class ProofRankError(PaperstackError):
    """A problem set, proof file, judge answer or flag proofrank cannot use; the message says
    which and why."""
