"""The error every paperstack package raises for bad input, and the CLI guard that prints it.

A user who hands a package a bad file, field or value gets one line that names it and a
non-zero exit, never a traceback from deep inside a library. Each package subclasses
:class:`PaperstackError` for its own errors and wraps its ``main`` in :func:`cli_guard`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TypeVar

__all__ = ["EXIT_USAGE", "PaperstackError", "cli_guard"]

#: Exit status for bad input (the same number argparse uses for a bad command line).
EXIT_USAGE = 2

F = TypeVar("F", bound=Callable[..., object])


class PaperstackError(Exception):
    """Bad input or an unusable resource, with a message a user can act on.

    The message is a single line: it names the file, field or value at fault.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


def cli_guard(prog: str) -> Callable[[F], F]:
    """Turn :class:`PaperstackError` and Ctrl-C in a CLI entry point into one line and an exit code.

    ``prog`` prefixes the message (``nf12: error: ...``) so the user sees which tool spoke.
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: object, **kwargs: object) -> object:
            try:
                return func(*args, **kwargs)
            except PaperstackError as exc:
                print(f"{prog}: error: {exc}", file=sys.stderr)
                raise SystemExit(EXIT_USAGE) from None
            except KeyboardInterrupt:
                print(f"{prog}: interrupted", file=sys.stderr)
                raise SystemExit(130) from None

        return wrapper  # type: ignore[return-value]

    return decorate
