"""The package's one exception class: bad input gets a one-line message a user can act on."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["OPCTError"]


class OPCTError(PaperstackError):
    """Bad input to consistency training: a pair with an empty prompt, a JSONL line that is not
    a pair, a teacher whose tokenizer differs from the student's, a prompt plus response longer
    than the model's context. The message names the file, line, field or value at fault."""
