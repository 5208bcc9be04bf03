"""The package's one exception class: bad input gets a one-line message a user can act on."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["MetaPrefError"]


class MetaPrefError(PaperstackError):
    """Bad input to meta-learning or adaptation: a language with no pairs, a pair whose chosen
    and rejected responses are identical, an unknown language code, a JSONL line that is not a
    pair. The message names the file, line, field, language or value at fault."""
