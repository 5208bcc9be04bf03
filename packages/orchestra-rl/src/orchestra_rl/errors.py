"""The package's own error: bad input a user can act on, reported in one line by the CLI."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["OrchestraError"]


class OrchestraError(PaperstackError):
    """Bad input to a swarm (a budget below the number of agents, an unknown topology, a
    policy built for another swarm size...): the message names the value and what to change."""
