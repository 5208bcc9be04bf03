"""The two shipped domains (retail and airline), each with its policy as code and a rule agent
with planted bugs; :func:`get` and :func:`rule_target` find them by name."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from probe_audit.domains import airline, retail
from probe_audit.environment import Domain
from probe_audit.errors import ProbeError
from probe_audit.targets import RuleTarget

__all__ = ["NAMES", "airline", "get", "retail", "rule_target"]

NAMES = ("retail", "airline")
_MODULES = {"retail": retail, "airline": airline}


def _module(name: str) -> Any:
    try:
        return _MODULES[name]
    except KeyError:
        raise ProbeError(f"unknown domain {name!r}; known: {', '.join(NAMES)}") from None


def get(name: str, policy: Mapping[str, Any] | None = None) -> Domain:
    """The domain called ``name``, its policy numbers overridden by ``policy``."""
    return _module(name).domain(policy)  # type: ignore[no-any-return]


def rule_target(
    name: str, bugs: Collection[str] | None = None, policy: Mapping[str, Any] | None = None
) -> RuleTarget:
    """The domain's rule agent with ``bugs`` planted (None: all of them; ``()``: none)."""
    module = _module(name)
    pol = module.domain(policy)  # validates the policy
    del pol
    cls = module.RetailAgent if name == "retail" else module.AirlineAgent
    policy_cls = module.RetailPolicy if name == "retail" else module.AirlinePolicy
    return cls(bugs, policy=policy_cls.model_validate(dict(policy or {})))  # type: ignore[no-any-return]
