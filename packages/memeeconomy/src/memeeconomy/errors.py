"""The one error type of memeeconomy: bad input, reported as one line (exit 2 from the CLI)."""

from __future__ import annotations

from paperstack.errors import PaperstackError


class MemeEconomyError(PaperstackError):
    """Bad input (an event file, a ledger, a configuration): the message names what and where."""
