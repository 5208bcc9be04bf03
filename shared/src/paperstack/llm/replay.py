"""Record every model call to a JSONL cassette, and replay a run later with no model at all.

A paper's numbers should be rebuildable without the GPU or the API budget that produced them.
:class:`Recorder` wraps any :class:`~paperstack.llm.base.ChatModel`: each request is answered from
the cassette when it is there and from the wrapped model otherwise, and every new answer is
appended to the cassette (one fsynced line each, so a killed run keeps what it paid for).

A request is keyed per prompt, not per batch: the key is the SHA-256 of the canonical JSON of
``(method, model name, prompt [, continuation], sampling parameters)``. Per-prompt keys let a
replay regroup prompts into batches of any size, and let a resumed run re-ask only what is
missing. Sampling with no seed is different by design (two identical calls may differ), so such
a request's key also holds its occurrence number within the run: the third unseeded sample of a
prompt replays the third recorded one, and a replayed run sees the same sequence of answers.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from paperstack.llm.base import (
    ChatModel,
    GenerationConfig,
    LLMError,
    Prompt,
    check_pairs,
    check_prompts,
    prompt_to_json,
)
from paperstack.records import JsonlWriter, ResultsFormatError, read_jsonl

__all__ = ["CassetteError", "Mode", "Recorder", "ReplayMissError", "request_key"]

Mode = Literal["record", "replay", "auto"]
_MODES = ("record", "replay", "auto")
_CASSETTE_VERSION = 1


class CassetteError(LLMError):
    """A cassette that cannot be read or used (corrupt line, ambiguous model)."""


class ReplayMissError(LLMError):
    """A request with no recorded answer while replaying; names the cassette and the key."""


def request_key(request: dict[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON of a request (sorted keys, no whitespace)."""
    blob = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class Recorder:
    """A :class:`ChatModel` that answers from a cassette and records what it had to ask ``inner``.

    Modes:

    - ``"auto"``: replay what is recorded, ask ``inner`` for the rest and record it (resuming a
      killed run costs only the missing requests);
    - ``"replay"``: never call a model; a request missing from the cassette raises
      :class:`ReplayMissError`. ``inner`` may be ``None``;
    - ``"record"``: always ask ``inner`` and append the answer (a later line with the same key
      wins on replay), to refresh a cassette.

    ``name`` defaults to ``inner.name``; with no model it is read from the cassette (which must
    then hold a single model's requests).
    """

    def __init__(
        self,
        inner: ChatModel | None,
        cassette: str | os.PathLike[str],
        mode: Mode = "auto",
        *,
        name: str | None = None,
    ) -> None:
        if mode not in _MODES:
            raise LLMError(f"Recorder mode must be one of {', '.join(_MODES)}, got {mode!r}")
        if mode == "record" and inner is None:
            raise LLMError("Recorder mode 'record' needs a model to record from (inner is None)")
        self.inner = inner
        self.mode: Mode = mode
        self.cassette = Path(cassette)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._writer: JsonlWriter | None = None
        self._occurrences: dict[str, int] = {}
        self._entries: dict[str, dict[str, Any]] = {}
        models = self._load()
        if name is None and inner is not None:
            name = inner.name
        if name is None:
            if len(models) != 1:
                found = ", ".join(sorted(models)) or "none"
                raise CassetteError(
                    f"{self.cassette}: cannot tell which model to replay (models recorded: "
                    f"{found}); pass name="
                )
            name = next(iter(models))
        self.name: str = name

    def __repr__(self) -> str:
        return f"Recorder(name={self.name!r}, cassette='{self.cassette}', mode={self.mode!r})"

    # ------------------------------------------------------------------ cassette I/O

    def _load(self) -> set[str]:
        if not self.cassette.exists():
            if self.mode == "replay":
                raise CassetteError(f"{self.cassette}: no such cassette to replay")
            return set()
        try:
            # A torn last line is what a killed recording leaves; it is skipped here and cut off
            # by JsonlWriter before the first new line is appended.
            lines = read_jsonl(self.cassette, allow_torn_tail=True)
        except ResultsFormatError as exc:
            raise CassetteError(str(exc)) from None
        models: set[str] = set()
        for number, entry in enumerate(lines, start=1):
            if not isinstance(entry.get("key"), str) or "response" not in entry:
                raise CassetteError(f"{self.cassette}: line {number}: not a cassette entry")
            self._entries[entry["key"]] = entry
            if isinstance(entry.get("model"), str):
                models.add(entry["model"])
        return models

    def _append(self, entry: dict[str, Any]) -> None:
        if self._writer is None:
            self._writer = JsonlWriter(self.cassette)
        self._writer.write(entry)
        self._entries[entry["key"]] = entry

    def close(self) -> None:
        """Close the cassette file (everything written is already on disk)."""
        with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ lookup

    def _keyed(self, request: dict[str, Any], stochastic: bool) -> tuple[str, dict[str, Any]]:
        if stochastic:
            base = request_key(request)
            occurrence = self._occurrences.get(base, 0)
            self._occurrences[base] = occurrence + 1
            request = {**request, "occurrence": occurrence}
        return request_key(request), request

    def _resolve(
        self, requests: list[dict[str, Any]], stochastic: bool
    ) -> tuple[list[str], list[dict[str, Any]], list[int]]:
        """Keys of the requests, and the indices that must go to the model."""
        keyed = [self._keyed(r, stochastic) for r in requests]
        keys = [k for k, _ in keyed]
        full = [r for _, r in keyed]
        if self.mode == "record":
            todo = list(range(len(keys)))
        else:
            todo = [i for i, k in enumerate(keys) if k not in self._entries]
        if todo and (self.mode == "replay" or self.inner is None):
            first = full[todo[0]]
            raise ReplayMissError(
                f"{self.cassette}: no recorded answer for {first['method']} request "
                f"{keys[todo[0]]} (model {self.name!r}, {len(todo)} of {len(keys)} missing); "
                "record it with mode='auto' and a model"
            )
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        return keys, full, todo

    def _model(self) -> ChatModel:
        assert self.inner is not None  # _resolve refused misses without a model
        return self.inner

    # ------------------------------------------------------------------ ChatModel

    def generate(
        self,
        prompts: Sequence[Prompt],
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        n: int = 1,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[list[str]]:
        """Recorded completions where present; the rest from ``inner`` in one batched call."""
        cfg = GenerationConfig(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            n=n,
            seed=seed,
            stop=tuple(stop) if stop else None,
        )
        checked = check_prompts(prompts)
        params = cfg.to_json()
        requests = [
            {
                "method": "generate",
                "model": self.name,
                "prompt": prompt_to_json(p),
                "params": params,
            }
            for p in checked
        ]
        with self._lock:
            keys, full, todo = self._resolve(requests, cfg.stochastic)
            if todo:
                answers = self._model().generate(
                    [checked[i] for i in todo],
                    max_new_tokens=cfg.max_new_tokens,
                    temperature=cfg.temperature,
                    top_p=cfg.top_p,
                    n=cfg.n,
                    seed=cfg.seed,
                    stop=cfg.stop,
                )
                for i, answer in zip(todo, answers, strict=True):
                    self._append(_entry(keys[i], full[i], [str(a) for a in answer]))
            return [list(self._entries[k]["response"]) for k in keys]

    def logprobs(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[np.ndarray]:
        """Recorded scores where present (bit-exact, same dtype); the rest from ``inner``."""
        checked = check_pairs(prompts, continuations)
        requests = [
            {
                "method": "logprobs",
                "model": self.name,
                "prompt": prompt_to_json(p),
                "continuation": c,
            }
            for p, c in zip(checked, continuations, strict=True)
        ]
        with self._lock:
            keys, full, todo = self._resolve(requests, stochastic=False)
            if todo:
                answers = self._model().logprobs(
                    [checked[i] for i in todo], [continuations[i] for i in todo]
                )
                for i, answer in zip(todo, answers, strict=True):
                    self._append(_entry(keys[i], full[i], _encode_array(np.asarray(answer))))
            return [_decode_array(self._entries[k]["response"], self.cassette) for k in keys]


def _entry(key: str, request: dict[str, Any], response: Any) -> dict[str, Any]:
    return {
        "v": _CASSETTE_VERSION,
        "key": key,
        "method": request["method"],
        "model": request["model"],
        "request": request,
        "response": response,
    }


def _encode_array(values: np.ndarray) -> dict[str, Any]:
    """Floats survive JSON exactly (repr round-trips); -inf and NaN, which JSON lacks, as text."""
    flat = [float(v) if math.isfinite(v) else repr(float(v)) for v in values.ravel().tolist()]
    return {"dtype": values.dtype.str, "shape": list(values.shape), "values": flat}


def _decode_array(response: Any, cassette: Path) -> np.ndarray:
    try:
        values = [float(v) for v in response["values"]]
        return np.asarray(values, dtype=np.dtype(response["dtype"])).reshape(response["shape"])
    except (KeyError, TypeError, ValueError):
        raise CassetteError(f"{cassette}: a logprobs entry is not an encoded array") from None
