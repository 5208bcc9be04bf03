"""The package's own error: bad traces, SLOs, profiles and options end in one line, exit 2."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["PaceSchedulerError"]


class PaceSchedulerError(PaperstackError):
    """Bad input to pace-scheduler; the message names the file, field or value at fault."""
