"""Selectors as plain JSON descriptions, so the asynchronous worker can rebuild them.

The selector worker (:mod:`pall_lns.worker`) is started as its own module, so it never imports
the user's script (0.1 used a process pool, which re-imports ``__main__``: an unguarded script
died with ``BrokenProcessPool``). It receives the selector as a *spec*: the class and the
arguments it was built with, and rebuilds it. Every built-in selector has a spec; a selector of
your own gets one through ``{"kind": "import", "target": "package.module:Class", "kwargs":
{...}}`` when its class lives in an importable module (not in ``__main__``).
"""

from __future__ import annotations

import importlib
from typing import Any

from pall_lns.errors import PallError

__all__ = ["selector_from_spec", "selector_spec"]


def selector_spec(selector: Any) -> dict[str, Any]:
    """The JSON description of ``selector`` (its constructor arguments, not its learnt state:
    the worker's copy starts fresh and learns from every update it receives)."""
    from pall_lns.selectors import (
        EpsilonGreedySelector,
        Exp3Selector,
        FixedSelector,
        LearnedSelector,
        RandomSelector,
        UCBSelector,
    )

    if hasattr(selector, "to_spec"):
        return dict(selector.to_spec())
    if isinstance(selector, LearnedSelector):
        return {"kind": "learned", "data": selector.to_json()}
    if isinstance(selector, UCBSelector):
        return {"kind": "bandit", "n_ops": int(selector.n.size), "c": selector.c,
                "seed": _seed(selector)}  # fmt: skip
    if isinstance(selector, EpsilonGreedySelector):
        return {"kind": "egreedy", "n_ops": int(selector.n.size), "eps": selector.eps,
                "seed": _seed(selector)}  # fmt: skip
    if isinstance(selector, Exp3Selector):
        return {"kind": "exp3", "n_ops": int(selector.log_w.size), "gamma": selector.gamma,
                "seed": _seed(selector)}  # fmt: skip
    if isinstance(selector, RandomSelector):
        return {"kind": "random", "seed": _seed(selector)}
    if isinstance(selector, FixedSelector):
        return {"kind": "fixed", "op": selector.op}
    cls = type(selector)
    if cls.__module__ == "__main__":
        raise PallError(
            f"selector {cls.__name__}: defined in the script being run, so the asynchronous "
            "worker cannot rebuild it; move it to an importable module and give it a to_spec() "
            "returning {'kind': 'import', 'target': 'module:Class', 'kwargs': {...}}, or run "
            "synchronously (LnsConfig(async_select=False), pall solve --sync)"
        )
    raise PallError(
        f"selector {cls.__module__}.{cls.__name__}: has no to_spec(), so the asynchronous "
        "worker cannot rebuild it (give it one, or run synchronously)"
    )


def _seed(selector: Any) -> int:
    return int(getattr(selector, "seed", 0))


def selector_from_spec(spec: dict[str, Any]) -> Any:
    """Rebuild a selector from :func:`selector_spec`'s description."""
    from pall_lns import selectors as sel

    kind = spec.get("kind")
    if kind == "learned":
        return sel.LearnedSelector.from_json(spec["data"], "selector spec")
    if kind == "bandit":
        return sel.UCBSelector(int(spec["n_ops"]), c=float(spec["c"]), seed=int(spec["seed"]))
    if kind == "egreedy":
        return sel.EpsilonGreedySelector(int(spec["n_ops"]), float(spec["eps"]), int(spec["seed"]))
    if kind == "exp3":
        return sel.Exp3Selector(int(spec["n_ops"]), float(spec["gamma"]), int(spec["seed"]))
    if kind == "random":
        return sel.RandomSelector(int(spec["seed"]))
    if kind == "fixed":
        return sel.FixedSelector(int(spec["op"]))
    if kind == "lm":
        from pall_lns.lm import LMSelector

        return LMSelector.from_spec(spec)
    if kind == "import":
        module, _, name = str(spec.get("target", "")).partition(":")
        try:
            obj: Any = importlib.import_module(module)
            for part in name.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError, ValueError) as exc:
            raise PallError(f"selector spec target {spec.get('target')!r}: {exc}") from None
        return obj(**spec.get("kwargs", {}))
    raise PallError(f"selector spec: unknown kind {kind!r}")
