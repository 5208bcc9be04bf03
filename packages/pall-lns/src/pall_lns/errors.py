"""The one exception pall-lns raises for bad input, missing solvers and unusable models."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = ["PallError"]


class PallError(PaperstackError):
    """Bad input (unreadable, infeasible or unbounded model, bad option) or a missing solver.

    The message is one line naming the file, field or value, so ``pall`` can print it and exit 2.
    """
