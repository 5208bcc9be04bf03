"""The one exception nf12 raises for bad input, so the CLI can print it as one line."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["Nf12Error"]


class Nf12Error(PaperstackError):
    """Bad input to nf12: a non-BF16 tensor, a corrupted or truncated file, a checksum mismatch.

    The message names the file, tensor or field at fault; a user can act on it without a traceback.
    """
