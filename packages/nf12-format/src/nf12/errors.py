"""The exceptions nf12 raises for bad input, so the CLI can print them as one line."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["Nf12Error", "TooManyEscapesError"]


class Nf12Error(PaperstackError):
    """Bad input to nf12: a non-BF16 tensor, a corrupted or truncated file, a checksum mismatch.

    The message names the file, tensor or field at fault; a user can act on it without a traceback.
    """


class TooManyEscapesError(Nf12Error):
    """A matrix has more escaped groups than the 24-bit escape index can address.

    The one encode failure that is a property of the data rather than of the input's form: a file
    writer may store such a tensor verbatim instead. Every other encode error is the caller's.
    """
