"""The errors probe-audit raises: one line each, naming the file, field, tool or turn at fault."""

from __future__ import annotations

from paperstack.errors import PaperstackError

__all__ = [
    "DatabaseError",
    "PolicyError",
    "ProbeError",
    "TargetError",
    "ToolCrash",
    "ToolError",
]


class ProbeError(PaperstackError):
    """Bad input to probe-audit (a domain, scenario, auditor, target or setting)."""


class PolicyError(ProbeError):
    """A policy (its rules or their parameters) that cannot be used as written."""


class DatabaseError(ProbeError):
    """A domain database that fails its schema."""


class TargetError(ProbeError):
    """A target answered with something the game cannot act on (a tool call that is not JSON)."""


class ToolCrash(ProbeError):
    """A tool raised an exception that is not a :class:`ToolError`: a bug in the tool itself."""


class ToolError(Exception):
    """Raised by a tool for an expected failure (unknown order, wrong status): the message goes
    back to the target as the tool's result, as tau2-bench does, and the episode goes on."""
