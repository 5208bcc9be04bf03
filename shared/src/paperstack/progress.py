"""Progress a person can see, wherever the output goes.

On a terminal a rich progress bar on stderr; when stderr is not a terminal (CI, ``nohup``, a
pipe, a log file) a plain line every ``interval`` seconds, so a long run is never silent and a log
never fills with bar redraws or blank lines. Progress never goes to stdout, which is kept for
results. ``quiet_libraries`` turns off the progress bars of the Hugging Face libraries (weight
loading, downloads, datasets maps) so they do not leak into a package's output.
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType
from typing import Any, TextIO

__all__ = ["Progress", "quiet_libraries"]


def quiet_libraries() -> None:
    """Silence the progress bars of transformers, huggingface_hub and datasets.

    Set through the environment before those libraries are imported (transformers reads the
    hub's switch at import), and through their APIs when they already are.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if "transformers" in sys.modules:
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except Exception:  # pragma: no cover - an odd transformers must not stop a run
            pass
    if "datasets" in sys.modules:
        try:
            import datasets

            datasets.disable_progress_bars()
        except Exception:  # pragma: no cover
            pass


class Progress:
    """``with Progress(total, "training") as bar: bar.advance(loss=0.3)``.

    ``enabled=False`` shows nothing. ``stream`` defaults to stderr; a bar is drawn only when it
    is a terminal, else a line such as ``training: 40/100 (40%), 12 s, ~18 s left, loss 0.31``
    is printed at most every ``interval`` seconds, and once at the end.
    """

    def __init__(
        self,
        total: int | None,
        description: str,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = 10.0,
    ) -> None:
        self.total = total
        self.description = description
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.completed = 0
        self.fields: dict[str, Any] = {}
        self._bar: Any = None
        self._task: Any = None
        self._start = 0.0
        self._last = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def __enter__(self) -> Progress:
        self._start = self._last = time.monotonic()
        if self.enabled and self._tty:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=self.total, info="")
        return self

    def advance(self, steps: int = 1, **fields: Any) -> None:
        """Count ``steps`` more done; ``fields`` (``loss=0.31``) are shown beside the count."""
        self.completed += steps
        self.fields.update(fields)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.completed, info=self._info())
            return
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._line(now)

    def _info(self) -> str:
        return ", ".join(
            f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in self.fields.items()
        )

    def _line(self, now: float) -> None:
        elapsed = now - self._start
        text = f"{self.description}: {self.completed}"
        if self.total:
            text += f"/{self.total} ({100 * self.completed / self.total:.0f}%)"
        text += f", {elapsed:.0f} s"
        if self.total and 0 < self.completed < self.total:
            text += f", ~{elapsed * (self.total - self.completed) / self.completed:.0f} s left"
        info = self._info()
        if info:
            text += f", {info}"
        print(text, file=self.stream, flush=True)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
        elif self.enabled and exc_type is None and self.completed:
            self._line(time.monotonic())
