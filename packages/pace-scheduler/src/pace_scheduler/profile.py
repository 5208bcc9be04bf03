"""Calibration from real steps: time decode and prefill steps of a transformers model, fit ``T̂``.

On a CPU the model is a tiny Qwen3-style causal LM built from a config (random weights, no
download); on a GPU pass a real model id or path. For every (batch size ``b``, context ``c``)
of the grid the profiler times single-token decode steps of ``b`` sequences on a ``c``-token KV
cache (a decode sample: ``|D| = b``, ``Σc_i = b·c``; the cache holds random keys and values,
which a decode step reads exactly like real ones) and, where ``b·c`` stays within the largest
context, a prefill of ``b`` prompts of ``c`` tokens (``b·c`` tokens, attention ``b·c·c/2``);
each time is the median of ``repeats``. The samples are fitted with
:func:`pace_scheduler.latency.fit`; the fitted model's noise is the relative spread of the
residuals.

Needs the ``torch`` extra (``pip install "pace-scheduler[torch]"``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import FEATURES, LatencyModel, features_matrix, fit

__all__ = ["ProfileConfig", "fit_profile", "profile_model", "read_profile", "tiny_qwen"]


@dataclass(frozen=True)
class ProfileConfig:
    """The grid and the tiny model's shape (a Qwen3 layout: GQA, q/k norms, SwiGLU)."""

    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    contexts: tuple[int, ...] = (32, 128, 512, 1024, 2048)
    repeats: int = 5
    hidden_size: int = 128
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 384
    vocab: int = 1024
    threads: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.batch_sizes or not self.contexts or min(self.batch_sizes + self.contexts) < 1:
            raise PaceSchedulerError("profile: batch sizes and contexts must be non-empty and >= 1")
        if self.repeats < 1:
            raise PaceSchedulerError(f"profile: field 'repeats' must be >= 1, got {self.repeats}")


#: The grid ``demo --quick`` profiles (seconds on two cores, still 3 batch sizes x 3 contexts).
QUICK_PROFILE = ProfileConfig(batch_sizes=(1, 4, 16), contexts=(32, 256, 1024), repeats=3)


def tiny_qwen(cfg: ProfileConfig) -> Any:
    """A random-init Qwen3-style causal LM built from a config (no hub access)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(cfg.seed)
    config = Qwen3Config(
        vocab_size=cfg.vocab,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.kv_heads,
        head_dim=cfg.hidden_size // cfg.heads,
        max_position_embeddings=max(cfg.contexts) + 64,
        tie_word_embeddings=True,
    )
    return Qwen3ForCausalLM(config).eval()


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _cache_kw(model: Any) -> str:
    """The forward argument that takes the KV cache (``cache`` in transformers 5, else
    ``past_key_values``)."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _random_cache(model: Any, batch: int, context: int, device: str) -> Any:
    """A KV cache of ``batch`` x ``context`` random keys/values: decode steps read it exactly as
    they read a real one, without paying a prefill per grid point."""
    import torch
    from transformers import DynamicCache

    cfg = model.config
    try:
        cache = DynamicCache(config=cfg)
    except TypeError:  # older transformers
        cache = DynamicCache()
    heads = int(getattr(cfg, "num_key_value_heads", cfg.num_attention_heads))
    head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
    dtype = next(model.parameters()).dtype
    for layer in range(int(cfg.num_hidden_layers)):
        k = torch.randn(batch, heads, context, head_dim, device=device, dtype=dtype)
        cache.update(k, torch.randn_like(k), layer)
    return cache


def profile_model(
    model: Any,
    cfg: ProfileConfig,
    device: str = "cpu",
    progress: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Time decode steps over ``cfg``'s (batch, context) grid and prefills over its contexts.

    Decode: one new token for ``b`` sequences on a ``c``-token cache, the median of
    ``cfg.repeats`` steps. Prefill: one prompt of ``c`` tokens, and ``b`` prompts of ``c``
    tokens while ``b·c`` stays within the largest context (bounded prefill cost on a CPU).
    Records carry the :data:`~pace_scheduler.latency.FEATURES` of the step, ``seconds``,
    ``kind``, ``batch`` and ``context``.
    """
    import torch

    vocab = int(model.config.vocab_size)
    gen = torch.Generator().manual_seed(cfg.seed)
    kw = _cache_kw(model)
    records: list[dict[str, Any]] = []
    previous = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(cfg.threads)
    budget = max(cfg.contexts)

    def timed(call: Callable[[], Any]) -> float:
        times = []
        for _ in range(cfg.repeats):
            _sync(device)
            t0 = time.perf_counter()
            call()
            _sync(device)
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    try:
        with torch.inference_mode():
            # throw-away steps so lazy initialisation is not timed
            warm = torch.zeros((1, 8), dtype=torch.long, device=device)
            for _ in range(2):
                model(warm, use_cache=False, logits_to_keep=1)
            for b in cfg.batch_sizes:
                for c in cfg.contexts:
                    token = torch.randint(0, vocab, (b, 1), generator=gen).to(device)
                    cache = _random_cache(model, b, c, device)
                    seconds = timed(
                        functools.partial(
                            model, token, use_cache=True, logits_to_keep=1, **{kw: cache}
                        )
                    )
                    records.append(_record("decode", b, c, seconds))
                    if b * c <= budget:
                        ids = torch.randint(0, vocab, (b, c), generator=gen).to(device)
                        seconds = timed(
                            functools.partial(model, ids, use_cache=False, logits_to_keep=1)
                        )
                        records.append(_record("prefill", b, c, seconds))
                    if progress:
                        progress()
    finally:
        torch.set_num_threads(previous)
    return records


def _record(kind: str, b: int, c: int, seconds: float) -> dict[str, Any]:
    decode = kind == "decode"
    return {
        "kind": kind,
        "batch": b,
        "context": c,
        "n_decode": b if decode else 0,
        "sum_ctx": b * c if decode else 0,
        "prefill_tokens": 0 if decode else b * c,
        "prefill_attn": 0.0 if decode else b * c * c / 2,
        "seconds": seconds,
    }


def fit_profile(
    records: Iterable[dict[str, Any]], name: str = "cpu-fitted", source: str = "profile"
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
    return float(value)


def read_profile(path: str | Path) -> list[dict[str, Any]]:
    """Profile records from a JSONL file written by ``pace profile``."""
    from paperstack.records import ResultsFormatError, read_jsonl

    try:
        return read_jsonl(path)
    except ResultsFormatError as exc:
        raise PaceSchedulerError(str(exc)) from None


__all__ += ["FEATURES", "QUICK_PROFILE"]
