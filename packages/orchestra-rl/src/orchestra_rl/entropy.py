"""The swarm's context entropy H(t): how spread out the agents' latest outputs are.

The Macro-Orchestrator reads one number per round. Each of the N agents' latest outputs is
embedded with all-MiniLM-L6-v2 (:mod:`paperstack.embed`: unit-length rows ``e_i``, width 384),
stacked into ``E`` (N x 384), and the spread is the *spectral (von Neumann) entropy* of their
normalised Gram matrix::

    G = E Eᵀ / N            (trace 1, positive semi-definite: eigenvalues λ_k ≥ 0, Σ λ_k = 1)
    H(t) = −Σ_k λ_k log λ_k / log N     ∈ [0, 1]

H = 0 when every agent said the same thing (G has rank one), H = 1 when the outputs are
mutually orthogonal (all λ_k = 1/N). Unlike a count of distinct answers it needs no parser,
so it works on any output (a patch, a proof, a free-form answer), and it sees agreement in
substance under different wording. ``N = 1`` has no spread: H = 0.

Embeddings are cached by text: a swarm repeats itself a lot (the same answer, the same
rationale), and embedding is the orchestrator's main cost per round (see ``orchestra bench``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

import numpy as np

__all__ = ["CachedEmbedder", "TextEmbedder", "spectral_entropy"]


class TextEmbedder(Protocol):
    """Anything with ``encode(texts) -> (len(texts), d)`` unit-length rows (the core's
    :class:`paperstack.embed.Embedder` is one)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def spectral_entropy(embeddings: np.ndarray) -> np.ndarray:
    """H for one swarm (``(N, d)``) or a batch of swarms (``(B, N, d)``); see the module
    docstring. Rows are re-normalised to unit length (an all-zero row stays zero, and counts as
    an agent that said nothing)."""
    e = np.asarray(embeddings, dtype=np.float64)
    single = e.ndim == 2
    if single:
        e = e[None]
    if e.ndim != 3:
        raise ValueError(f"embeddings must be (N, d) or (B, N, d), got shape {e.shape}")
    n = e.shape[1]
    if n <= 1:
        out = np.zeros(e.shape[0])
        return out[0] if single else out
    norms = np.linalg.norm(e, axis=-1, keepdims=True)
    e = np.divide(e, norms, out=np.zeros_like(e), where=norms > 0)
    gram = e @ np.swapaxes(e, 1, 2)
    trace = np.trace(gram, axis1=1, axis2=2)[:, None]
    lam = np.linalg.eigvalsh(gram / np.where(trace > 0, trace, 1.0)[:, :, None])
    lam = np.clip(lam, 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(lam > 1e-12, -lam * np.log(lam), 0.0)
    h = np.clip(terms.sum(axis=1) / np.log(n), 0.0, 1.0)
    return h[0] if single else h


class CachedEmbedder:
    """An embedder with a text -> vector cache (thread-safe); ``hits`` and ``misses`` count
    lookups, ``seconds`` the time spent in the model."""

    def __init__(self, embedder: TextEmbedder) -> None:
        self.embedder = embedder
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.seconds = 0.0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import time

        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
        if missing:
            started = time.perf_counter()
            vectors = np.asarray(self.embedder.encode(missing), dtype=np.float32)
            with self._lock:
                self.seconds += time.perf_counter() - started
                for text, vector in zip(missing, vectors, strict=True):
                    self._cache[text] = vector
        with self._lock:
            return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 0))

    def __len__(self) -> int:
        return len(self._cache)
