"""The package's one exception class: bad input gets a one-line message a user can act on."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["UnlearnError"]


class UnlearnError(PaperstackError):
    """Bad input to an unlearning run: an empty or unusable data set, a layer index out of
    range, a model without the modules a method needs. The message names the file, field or
    value at fault (``retain set is empty``, ``layer 9: the model has 4 layers``)."""
