"""The one error type of memeeconomy, and the one way it reads a user's text file."""

from __future__ import annotations

from pathlib import Path

from paperstack.errors import PaperstackError


class MemeEconomyError(PaperstackError):
    """Bad input (an event file, a ledger, a configuration): the message names what and where."""


def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of ``path`` (``what`` names the kind of file in the errors): a folder, a
    missing file, bad UTF-8 or an unreadable file is one :class:`MemeEconomyError` line."""
    if path.is_dir():
        raise MemeEconomyError(f"{path}: is a folder, expected {what}")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MemeEconomyError(
            f"{path}: no such {what.removeprefix('an ').removeprefix('a ')}"
        ) from None
    except UnicodeDecodeError as exc:
        raise MemeEconomyError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise MemeEconomyError(f"{path}: cannot read ({exc.strerror})") from None
