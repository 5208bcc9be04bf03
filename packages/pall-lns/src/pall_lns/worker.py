"""The selector worker: ``python -m pall_lns.worker``, driven by :class:`AsyncSelector`.

Started as its own module (never a re-import of the user's script), it rebuilds the selector
from its spec (:mod:`pall_lns.specs`), then answers one JSON line per request on its protocol
channel (the stdout it was started with; anything a library prints goes to stderr instead):

- ``{"op": "select", "id": n, "ctx": {...}}`` -> ``{"id": n, "choice": o, "latency_s": s,
  "cpu_s": s}`` (the selector's own decision time, and the worker's CPU time so far);
- ``{"op": "update", "ctx": {...}, "choice": o, "reward": r}`` -> nothing (applied in order,
  so a stateful selector has every reward before it answers the next request);
- ``{"op": "reset"}`` -> ``{"ready": true, ...}``: a fresh selector for the next run (the
  worker is reused across runs; an LM stays loaded);
- ``{"op": "close"}``.

The first line it writes is ``{"ready": true, "startup_s": s}`` once the selector (an LM
included) is loaded; a failure anywhere is one ``{"error": "..."}`` line, then exit 1.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from pall_lns.context import context_from_json

__all__ = ["main"]


def main() -> int:
    start = time.perf_counter()
    proto = os.fdopen(os.dup(1), "w", buffering=1)  # the protocol channel
    os.dup2(2, 1)  # stray prints of libraries must not corrupt it
    sys.stdout = sys.stderr

    def say(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj, allow_nan=False) + "\n")
        proto.flush()

    try:
        init = json.loads(sys.stdin.readline() or "{}")
        if init.get("threads"):
            os.environ.setdefault("OMP_NUM_THREADS", str(init["threads"]))
        from pall_lns.specs import selector_from_spec

        spec = init["spec"]
        selector = selector_from_spec(spec)
        say({"ready": True, "startup_s": time.perf_counter() - start, "name": selector.name,
             "cpu_s": time.process_time()})  # fmt: skip
        for line in sys.stdin:
            msg = json.loads(line)
            op = msg.get("op")
            if op == "close":
                break
            if op == "reset":  # a new run: a fresh selector (an LM's weights stay loaded)
                selector = selector_from_spec(spec)
                say({"ready": True, "startup_s": 0.0, "cpu_s": time.process_time()})
                continue
            ctx = context_from_json(msg["ctx"])
            if op == "update":
                selector.update(ctx, int(msg["choice"]), float(msg["reward"]))
            elif op == "select":
                t = time.perf_counter()
                choice = int(selector.select(ctx))
                say(
                    {
                        "id": msg["id"],
                        "choice": choice,
                        "latency_s": time.perf_counter() - t,
                        "cpu_s": time.process_time(),
                    }
                )
    except Exception as exc:  # reported to the LNS as one line; the worker then stops
        text = " ".join(str(exc).split()) or type(exc).__name__
        say({"error": f"{type(exc).__name__}: {text}"})
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
