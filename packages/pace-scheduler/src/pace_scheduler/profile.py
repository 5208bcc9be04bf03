"""Calibration from real steps: profile the serving engine's steps and fit ``T̂`` to them.

Pace prices a branch with the step-latency model, so the model must describe the engine that
serves, not a bare forward pass: :func:`pace_scheduler.engine.profile_engine` runs plain
requests through transformers' continuous-batching engine over a grid of batch sizes and
prompt lengths and records every step (its features and its measured time, thread CPU time on a
CPU). :func:`fit_profile` fits :func:`pace_scheduler.latency.fit` to the records; the fitted
model's noise is the relative spread of its residuals.

On a CPU the model is the toy world's tiny Llama (``paperstack.tiny``'s ``tiny`` preset,
random weights: the weights' values do not change a step's cost); on a GPU pass a real model id
or folder (``--model``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import FEATURES, LatencyModel, features_matrix, fit

__all__ = [
    "FEATURES",
    "QUICK_PROFILE",
    "ProfileConfig",
    "fit_profile",
    "load_model",
    "read_profile",
    "toy_model",
]


@dataclass(frozen=True)
class ProfileConfig:
    """The profiling grid: ``batch_sizes`` x ``contexts`` (prompt tokens), each group of
    requests decoding ``new_tokens`` tokens."""

    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 48)
    contexts: tuple[int, ...] = (16, 64, 160)
    new_tokens: int = 5

    def __post_init__(self) -> None:
        if not self.batch_sizes or not self.contexts or min(self.batch_sizes + self.contexts) < 1:
            raise PaceSchedulerError("profile: batch sizes and contexts must be non-empty and >= 1")
        if self.new_tokens < 2:
            raise PaceSchedulerError(
                f"profile: field 'new_tokens' must be >= 2, got {self.new_tokens}"
            )


#: The grid ``demo --quick`` profiles.
QUICK_PROFILE = ProfileConfig(batch_sizes=(1, 4, 16, 32), contexts=(16, 96), new_tokens=4)


def toy_model(preset: str = "tiny", seed: int = 0, max_positions: int = 2048) -> Any:
    """The toy world's tiny Llama (``paperstack.tiny`` preset, random init, no hub). Its
    config is told it may reach ``max_positions`` (the preset says 512; a branching request's
    join goes further, and Llama's rotary embedding has no table that limits it)."""
    from paperstack import tiny

    model = tiny.build_model(preset, seed=seed)
    model.config.max_position_embeddings = max_positions
    return model.eval()


def load_model(name: str | None, device: str) -> Any:
    """``name`` (a hub id or a local folder, checked: a truncated or corrupt folder is one
    line naming the file) or the toy model, on ``device``."""
    if name is None:
        return toy_model().to(device)
    from transformers import AutoModelForCausalLM

    from paperstack.checkpoint import load_pretrained

    model: Any = load_pretrained(name, AutoModelForCausalLM.from_pretrained, dtype="auto")
    return model.to(device).eval()


def fit_profile(
    records: Iterable[dict[str, Any]], name: str = "fitted", source: str = "profile"
) -> tuple[LatencyModel, float, int]:
    """Fit ``T̂`` to profile records; returns the model (noise from residuals), R², n."""
    rows = list(records)
    if not rows:
        raise PaceSchedulerError(f"{source}: no profiled steps")
    y = np.array([_seconds(r, i, source) for i, r in enumerate(rows)])
    x = features_matrix(rows, source)
    model, r2 = fit(x, y, name=name, source=source)
    rel = y / model.predict(x) - 1.0
    cv = float(min(max(np.std(rel), 0.0), 0.25))
    return LatencyModel(**{**model.to_dict(), "noise_cv": cv}), r2, len(rows)


def _seconds(row: dict[str, Any], i: int, source: str) -> float:
    value = row.get("seconds")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise PaceSchedulerError(
            f"{source}: record {i + 1}: field 'seconds' must be a number > 0, got {value!r}"
        )
    if not math.isfinite(value):
        raise PaceSchedulerError(f"{source}: record {i + 1}: field 'seconds' must be finite")
    return float(value)


def read_profile(path: str | Path) -> list[dict[str, Any]]:
    """Profile records from a JSONL file written by ``pace profile``."""
    from paperstack.records import ResultsFormatError, read_jsonl

    p = Path(path)
    if p.is_dir():
        raise PaceSchedulerError(f"{p}: is a directory, not a profile.jsonl")
    try:
        return read_jsonl(p)
    except ResultsFormatError as exc:
        raise PaceSchedulerError(str(exc)) from None
