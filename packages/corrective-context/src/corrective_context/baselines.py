"""The selection baselines of the paper's comparison, in one harness: random, top-k similarity,
BM25, DPP diversity, and all items.

Every selector takes the query's key, the candidates' keys (any vectors: a toy's inputs, MiniLM
sentence embeddings from :func:`embed_texts`, a model's own states) and a budget ``k``, and
returns candidate indices in the order it picked them.

BM25 is the standard Okapi formula, implemented here (no library):

    score(D, Q) = Σ_{t∈Q} IDF(t) · f(t, D)(k₁ + 1) / (f(t, D) + k₁(1 - b + b·|D|/avgdl)),
    IDF(t) = ln((N - n_t + 0.5)/(n_t + 0.5) + 1),   k₁ = 1.5, b = 0.75,

over word tokens for text, and over quantised coordinates (``"j:bin"``) for vector items. DPP
diversity is greedy MAP inference (add the item that raises ``log det L_S`` most) on the kernel
``L = diag(r) K diag(r)``, ``K_ij`` the cosine similarity of the candidates and ``r_i =
exp(cos(i, q))`` their relevance to the query (the OpenICL DPP retriever's quality-diversity
kernel).

For *text* items (a demonstration pool, RAG passages, memories) :func:`rank_texts` runs each
method by name on the texts themselves: top-k and DPP over all-MiniLM-L6-v2 sentence
embeddings (:func:`embed_texts`, extra ``embed``), BM25 over :func:`word_tokens`, random with a
seed, all items in pool order. :data:`METHODS` adds the theory-guided selector (``corrective``),
which needs the model and runs in :func:`corrective_context.measure.select_items`.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from corrective_context.errors import CorrectiveContextError

__all__ = [
    "BASELINES",
    "METHODS",
    "all_items",
    "bm25_scores",
    "check_method",
    "dpp_greedy",
    "embed_texts",
    "quantise",
    "random_k",
    "rank_texts",
    "top_k",
    "word_tokens",
]

K1, B = 1.5, 0.75


def check_pool(keys: np.ndarray, k: int) -> np.ndarray:
    """Refuse an empty candidate pool or an impossible budget with one line."""
    keys = np.asarray(keys, dtype=np.float64)
    if keys.ndim != 2 or keys.shape[0] == 0:
        raise CorrectiveContextError("the candidate pool is empty: nothing to select from")
    if k < 0:
        raise CorrectiveContextError(f"k: must be >= 0, got {k}")
    return keys


def _cosine(query: np.ndarray, keys: np.ndarray) -> np.ndarray:
    qn = query / max(float(np.linalg.norm(query)), 1e-12)
    kn = keys / np.maximum(np.linalg.norm(keys, axis=1, keepdims=True), 1e-12)
    return kn @ qn


def random_k(query: np.ndarray, keys: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """``k`` candidates uniformly at random."""
    keys = check_pool(keys, k)
    return [int(i) for i in rng.permutation(keys.shape[0])[:k]]


def top_k(query: np.ndarray, keys: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """The ``k`` candidates most cosine-similar to the query (KATE-style retrieval)."""
    keys = check_pool(keys, k)
    return [int(i) for i in np.argsort(-_cosine(query, keys), kind="stable")[:k]]


def all_items(query: np.ndarray, keys: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """Every candidate (the budget is ignored): "just put everything in the context"."""
    keys = check_pool(keys, k)
    return list(range(keys.shape[0]))


def word_tokens(text: str) -> list[str]:
    """Lower-cased word tokens for BM25 on text."""
    return re.findall(r"\w+", text.lower())


def quantise(x: np.ndarray, step: float = 0.5) -> list[str]:
    """A vector as BM25 terms: coordinate ``j`` rounded to a multiple of ``step`` -> ``"j:bin"``."""
    return [f"{j}:{round(float(v) / step)}" for j, v in enumerate(np.asarray(x).ravel())]


def bm25_scores(query: Sequence[str], documents: Sequence[Sequence[str]]) -> np.ndarray:
    """Okapi BM25 of every document for the query (module docstring)."""
    if not documents:
        raise CorrectiveContextError("the candidate pool is empty: nothing to select from")
    n = len(documents)
    avgdl = sum(len(doc) for doc in documents) / n or 1.0
    df = Counter(t for doc in documents for t in set(doc))
    scores = np.zeros(n)
    for i, doc in enumerate(documents):
        tf = Counter(doc)
        norm = K1 * (1 - B + B * len(doc) / avgdl)
        for t in query:
            if tf[t]:
                idf = math.log((n - df[t] + 0.5) / (df[t] + 0.5) + 1)
                scores[i] += idf * tf[t] * (K1 + 1) / (tf[t] + norm)
    return scores


def bm25_vectors(
    query: np.ndarray, keys: np.ndarray, k: int, rng: np.random.Generator
) -> list[int]:
    """The ``k`` best candidates by BM25 over quantised coordinates (ties by index)."""
    keys = check_pool(keys, k)
    scores = bm25_scores(quantise(query), [quantise(x) for x in keys])
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


def dpp_greedy(query: np.ndarray, keys: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """Greedy MAP of the quality-diversity DPP (module docstring), up to ``k`` items; stops
    early when no item raises the determinant (the kernel's rank is exhausted)."""
    keys = check_pool(keys, k)
    kn = keys / np.maximum(np.linalg.norm(keys, axis=1, keepdims=True), 1e-12)
    relevance = np.exp(_cosine(query, keys))
    kernel = relevance[:, None] * (kn @ kn.T) * relevance[None, :]
    kernel += 1e-6 * np.eye(len(keys))
    chosen: list[int] = []
    current = 0.0
    for _ in range(min(k, len(keys))):
        best, best_val = -1, -np.inf
        for i in range(len(keys)):
            if i in chosen:
                continue
            idx = [*chosen, i]
            sign, logdet = np.linalg.slogdet(kernel[np.ix_(idx, idx)])
            if sign > 0 and logdet > best_val:
                best, best_val = i, logdet
        if best < 0 or (chosen and best_val <= current - 30):
            break
        chosen.append(best)
        current = best_val
    return chosen


#: name -> selector, as the demo and the bench run them
BASELINES = {
    "random": random_k,
    "top-k": top_k,
    "bm25": bm25_vectors,
    "dpp": dpp_greedy,
    "all-items": all_items,
}


@functools.lru_cache(maxsize=1)
def _embedder() -> Any:
    """One MiniLM per process: loading it takes about a second."""
    from paperstack.embed import Embedder

    return Embedder()


def _embed_extra_installed() -> bool:
    """Whether what ``corrective-context[embed]`` installs is there (the MiniLM model package,
    torch, transformers), without importing any of it."""
    import importlib.util

    return all(
        importlib.util.find_spec(name) is not None
        for name in ("all_minilm_l6_v2", "torch", "transformers")
    )


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """MiniLM (all-MiniLM-L6-v2, offline, ``paperstack.embed``) keys for text items; needs the
    ``embed`` extra."""
    from paperstack.embed import EmbedError

    if not texts:
        raise CorrectiveContextError("the candidate pool is empty: nothing to embed")
    try:
        embedder = _embedder()
    except EmbedError as exc:
        if not _embed_extra_installed():  # the base install: say which extra brings it
            raise CorrectiveContextError(
                f"MiniLM keys need the embed extra: pip install 'corrective-context[embed]' ({exc})"
            ) from None
        # Installed but unusable (a damaged cache entry, an unwritable cache): the core's one
        # line names the file and the fix; "install the extra" would send the user astray.
        raise
    return np.asarray(embedder.encode(list(texts)), dtype=np.float64)


#: the selection methods for text items, by name (``select_items``, ``corrective-context select``)
METHODS = ("corrective", "top-k", "bm25", "dpp", "random", "all-items")


def check_method(name: str) -> str:
    """``name`` if it is one of :data:`METHODS`, else one line listing them."""
    if name not in METHODS:
        raise CorrectiveContextError(
            f"method {name!r}: unknown; choose one of {', '.join(METHODS)}"
        )
    return name


def rank_texts(method: str, query: str, texts: Sequence[str], k: int, seed: int = 0) -> list[int]:
    """The indices of the texts a baseline picks for the query, in its order (module
    docstring): ``top-k`` and ``dpp`` over MiniLM embeddings, ``bm25`` over word tokens,
    ``random`` (seeded), ``all-items`` (every text, ``k`` ignored). Deterministic for a seed."""
    if check_method(method) == "corrective":
        raise CorrectiveContextError(
            "method 'corrective' needs the model: use corrective_context.measure.select_items"
        )
    if not texts:
        raise CorrectiveContextError("the candidate pool is empty: nothing to select from")
    rng = np.random.default_rng(seed)
    if method in ("top-k", "dpp"):
        vectors = embed_texts([query, *texts])
        return BASELINES[method](vectors[0], vectors[1:], k, rng)
    if method == "bm25":
        check_pool(np.zeros((len(texts), 1)), k)
        scores = bm25_scores(word_tokens(query), [word_tokens(t) for t in texts])
        return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]
    return BASELINES[method](np.zeros(1), np.zeros((len(texts), 1)), k, rng)
