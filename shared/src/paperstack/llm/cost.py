"""What a run spent talking to models: calls, tokens as the server counted them, retries, time.

Agent papers report their budget (calls per instance, tokens), and a reader comparing two
systems needs to see that they spent the same. Every :class:`~paperstack.llm.http.OpenAIChat`
keeps a :class:`CostLedger` (pass one ledger to several backends to add them up); a package
writes it beside its results as ``cost_card.json`` with :meth:`CostLedger.write`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from paperstack.records import atomic_write_json

__all__ = ["CostLedger"]


class CostLedger:
    """Thread-safe running totals of a backend's requests.

    ``calls`` counts answered requests; ``failed`` the requests that ended in an error after
    their retries; ``retries`` every extra attempt. Token counts are the server's own
    (``usage`` in its answers); ``unmetered`` counts answers that carried no usage, so a total
    is never silently low.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.failed = 0
        self.retries = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.unmetered = 0
        self.seconds = 0.0
        self.by_model: dict[str, dict[str, int]] = {}

    def record(
        self,
        *,
        model: str,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        retries: int,
        seconds: float,
        failed: bool = False,
    ) -> None:
        """Add one request (with all its attempts)."""
        with self._lock:
            self.retries += retries
            self.seconds += seconds
            if failed:
                self.failed += 1
                return
            self.calls += 1
            per = self.by_model.setdefault(
                model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
            )
            per["calls"] += 1
            if prompt_tokens is None or completion_tokens is None:
                self.unmetered += 1
            self.prompt_tokens += prompt_tokens or 0
            self.completion_tokens += completion_tokens or 0
            per["prompt_tokens"] += prompt_tokens or 0
            per["completion_tokens"] += completion_tokens or 0

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": self.calls,
                "failed": self.failed,
                "retries": self.retries,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "unmetered_calls": self.unmetered,
                "request_seconds": round(self.seconds, 3),
                "by_model": {k: dict(v) for k, v in sorted(self.by_model.items())},
            }

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the totals atomically as JSON (``path`` may be a directory: its
        ``cost_card.json``)."""
        p = Path(path)
        if p.is_dir():
            p = p / "cost_card.json"
        return atomic_write_json(p, self.to_json())

    def __repr__(self) -> str:
        return (
            f"CostLedger(calls={self.calls}, prompt_tokens={self.prompt_tokens}, "
            f"completion_tokens={self.completion_tokens}, retries={self.retries})"
        )
