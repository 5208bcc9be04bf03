"""The error every paperstack package raises for bad input, and the CLI guard that prints it.

A user who hands a package a bad file, field or value gets one line that names it and a
non-zero exit, never a traceback from deep inside a library. Each package subclasses
:class:`PaperstackError` for its own errors and wraps its ``main`` in :func:`cli_guard`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TypeVar

__all__ = [
    "EXIT_NO_SPACE",
    "EXIT_USAGE",
    "PaperstackError",
    "SignalState",
    "Terminated",
    "cli_guard",
    "disk_error_text",
    "sigterm_as_interrupt",
]

#: Exit status for bad input (the same number argparse uses for a bad command line).
EXIT_USAGE = 2
#: Exit status when the disk (or a quota, or a read-only file system) stopped a write.
EXIT_NO_SPACE = 1
#: Exit status after SIGTERM (128 + 15, what a shell reports for a process it terminated).
EXIT_TERMINATED = 143

#: The write failures a user fixes outside the program (free space, a quota, a mount), reported
#: in one line rather than as a traceback from whichever writer met them first.
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}

F = TypeVar("F", bound=Callable[..., object])


class PaperstackError(Exception):
    """Bad input or an unusable resource, with a message a user can act on.

    The message is a single line: it names the file, field or value at fault.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, like Ctrl-C's :class:`KeyboardInterrupt`.

    A subclass of ``KeyboardInterrupt`` on purpose: every ``except KeyboardInterrupt`` and
    ``finally`` that saves resumable state, removes a temporary file or reaps worker processes
    on Ctrl-C then does the same when a scheduler, ``timeout`` or CI kills the run, and nothing
    needs a second code path.
    """


@dataclasses.dataclass
class SignalState:
    """What :func:`sigterm_as_interrupt` saw: whether SIGTERM arrived while it was active."""

    received: bool = False


#: Seconds after which a SIGTERM that arrived inside a finalizer is delivered again.
_REDELIVER_AFTER = 0.05


def _in_finalizer(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside an object's ``__del__`` (at any depth below it), where
    Python reports and swallows every exception instead of propagating it."""
    depth = 0
    while frame is not None and depth < 200:
        if frame.f_code.co_name == "__del__":
            return True
        frame, depth = frame.f_back, depth + 1
    return False


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[SignalState]:
    """While active (main thread only), SIGTERM raises :class:`Terminated` in the main thread.

    The previous handler is restored on exit. A second SIGTERM while the first is being handled
    raises again, so a clean-up that hangs can still be stopped. A SIGTERM that lands inside an
    object's ``__del__`` (where Python would print and drop the exception, and the run would
    go on) is delivered again 50 ms later, outside it. The yielded state records that
    the signal came, so a caller can report it even when a library turned the exception into
    another one on its way up (an import interrupted half-way, say).
    """
    state = SignalState()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    owner = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:
            # A forked worker inherited this handler: die of the signal as it would have,
            # rather than raise into a pool's loop (the parent does the cleaning up).
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        state.received = True
        if _in_finalizer(frame):
            # Raised inside ``__del__`` (a library object freed at the wrong moment), the
            # exception would be printed as "Exception ignored in ..." and dropped, and the run
            # would go on as if no signal had come. Deliver it again in a moment instead, once
            # the finalizer has returned.
            timer = threading.Timer(_REDELIVER_AFTER, os.kill, args=(owner, signum))
            timer.daemon = True
            timer.start()
            return
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):  # pragma: no cover - no signals here (embedded interpreters)
        yield state
        return
    try:
        yield state
    finally:
        signal.signal(signal.SIGTERM, previous)


def disk_error_text(exc: BaseException) -> str | None:
    """One line for a write the disk refused (full, over quota, file too large, read-only),
    naming the file where the error carries it; ``None`` for anything else.

    Libraries that write through their own C code do not raise ``OSError``: safetensors says
    "No space left on device (os error 28)" in a ``SafetensorError``, torch's zip writer
    "file write failed" in a ``RuntimeError``; those are recognised by their text (searched
    down the exception's ``__cause__``/``__context__`` chain too).
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _DISK_ERRNOS:
            where = f" writing {current.filename}" if getattr(current, "filename", None) else ""
            reason = current.strerror or errno.errorcode.get(current.errno or 0, "write failed")
            return f"{reason}{where}: free space (or fix the mount) and run again"
        text = str(current)
        if "No space left on device" in text or "os error 28" in text:
            return "No space left on device: free space and run again"
        if "file write failed" in text or "PytorchStreamWriter failed writing" in text:
            return "a file write failed (is the disk full?): free space and run again"
        current = current.__cause__ or current.__context__
    return None


def cli_guard(prog: str) -> Callable[[F], F]:
    """Turn :class:`PaperstackError`, a full disk, Ctrl-C and SIGTERM in a CLI entry point into
    one line and an exit code (2 bad input, 1 disk, 130 Ctrl-C, 143 SIGTERM).

    ``prog`` prefixes the message (``nf12: error: ...``) so the user sees which tool spoke.
    SIGTERM is raised as :class:`Terminated` (a ``KeyboardInterrupt``) while the command runs,
    so whatever a package does on Ctrl-C it also does when killed.
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: object, **kwargs: object) -> object:
            state = SignalState()
            try:
                with sigterm_as_interrupt() as state:
                    return func(*args, **kwargs)
            except SystemExit:
                raise
            except BaseException as exc:
                if state.received or isinstance(exc, Terminated):
                    print(f"{prog}: terminated (SIGTERM)", file=sys.stderr)
                    raise SystemExit(EXIT_TERMINATED) from None
                if isinstance(exc, PaperstackError):
                    print(f"{prog}: error: {exc}", file=sys.stderr)
                    raise SystemExit(EXIT_USAGE) from None
                if isinstance(exc, KeyboardInterrupt):
                    print(f"{prog}: interrupted", file=sys.stderr)
                    raise SystemExit(130) from None
                text = disk_error_text(exc) if isinstance(exc, Exception) else None
                if text is None:
                    raise
                print(f"{prog}: error: {text}", file=sys.stderr)
                raise SystemExit(EXIT_NO_SPACE) from None

        return wrapper  # type: ignore[return-value]

    return decorate
