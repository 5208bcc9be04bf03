"""The reproduction: the analytic setting and the trained learner, one seed at a time.

Protocol (fixed before any claim was looked at; the learner's size and training run, the pool
design and τ were set in exploratory runs on queries that are not reported):

- **Analytic setting** (:mod:`corrective_context.analytic`): per seed, ``analytic_cases``
  (query, context) cases, each a fresh task around the seed's prior, a pool of ``pool``
  candidates of which ``near`` are near-duplicates of the query, and a random subset of a size
  drawn from ``ks``. The theory's regime (noise-free closed form) is compared with the regime
  measured in the attention layer's forward pass on noisy labels.
- **Trained learner** (:mod:`corrective_context.learner`): per seed, a learner trained with that
  seed; ``val_queries`` validation pools choose each baseline's ``k`` from ``ks`` (lowest mean
  squared error; not reported); ``queries`` test pools then give every system's mean squared
  error ``‖ŷ - y*‖²`` and its share of over-corrections. The premise compares the
  ``premise_large`` most similar items with the ``premise_small`` most similar ones.

- **Softmax learner** (``LearnerConfig(attention="softmax")``): the same training run with
  normalised attention, per seed, on the same test pools: no context, the ``premise_small``
  and ``premise_large`` most similar items and all items. Its premise is a row and claim of its
  own, so the premise is not read only off a learner whose unnormalised attention makes more
  aligned items add up by construction.

Rows are per seed (paired over seeds).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corrective_context.analytic import LinearAttentionICL, Pool, sample_pool, sample_task
from corrective_context.baselines import BASELINES
from corrective_context.correction import decompose
from corrective_context.learner import LearnerConfig, LinearTransformer, prior_for
from corrective_context.selector import SelectorConfig, estimate_error, select

SELECTOR = "corrective-selector"
PROBE = "error-probe"  #: no context: ŷ₀ - ê with the selector's own error estimate
TUNED = ("random", "top-k", "bm25", "dpp")


@dataclass(frozen=True)
class DemoConfig:
    queries: int = 300
    val_queries: int = 100
    analytic_cases: int = 600
    pool: int = 24
    near: int = 6
    ks: tuple[int, ...] = (1, 2, 4, 8, 16)
    premise_small: int = 2
    premise_large: int = 8
    eta: float = 1 / 16  #: the analytic layer's step: one near-duplicate corrects ~half the error
    selector: SelectorConfig = field(default_factory=lambda: SelectorConfig(budget=8))
    learner: LearnerConfig = field(default_factory=LearnerConfig)


QUICK = DemoConfig(
    queries=100, val_queries=30, analytic_cases=200, learner=LearnerConfig(steps=600)
)


def analytic_agreement(seed: int, config: DemoConfig) -> dict[str, float]:
    """Share of cases where the theory's regime equals the measured one, and the shares of the
    measured regimes (so a reader sees all three occur)."""
    rng = np.random.default_rng([seed, 1])
    lc = config.learner
    prior = rng.standard_normal((lc.m, lc.d)) / np.sqrt(lc.d)
    layer = LinearAttentionICL(prior, config.eta)
    agree, counts = 0, {"under": 0, "proper": 0, "over": 0}
    for _ in range(config.analytic_cases):
        task = sample_task(rng, prior, lc.spread, lc.noise)
        pool = sample_pool(rng, task, config.pool, config.near)
        k = int(rng.choice(config.ks))
        subset = rng.permutation(len(pool))[:k]
        base = layer.base(pool.query)
        theory = base + layer.closed_form_correction(pool.query, pool.x[subset], task.gap)
        measured = layer.forward(pool.query, pool.x[subset], pool.y[subset])
        predicted = decompose(base, theory, pool.target).regime
        actual = decompose(base, measured, pool.target).regime
        agree += predicted == actual
        counts[actual] += 1
    n = config.analytic_cases
    return {"agreement": agree / n, **{f"share_{r}": c / n for r, c in counts.items()}}


def _zero_shot_errors(model: LinearTransformer, pool: Pool) -> np.ndarray:
    import torch

    with torch.no_grad():
        xs = torch.as_tensor(pool.x, dtype=torch.float32)
        empty = torch.zeros(len(pool), 0, model.d), torch.zeros(len(pool), 0, model.m)
        out = model(*empty, xs)
    assert isinstance(out, torch.Tensor)
    return out.double().numpy() - pool.y


def _pools(seed: int, stream: int, n: int, config: DemoConfig) -> list[Any]:
    rng = np.random.default_rng([seed, stream])
    prior = prior_for(dataclasses.replace(config.learner, seed=seed))
    out = []
    for _ in range(n):
        task = sample_task(rng, prior, config.learner.spread, config.learner.noise)
        out.append(sample_pool(rng, task, config.pool, config.near))
    return out


Selector = Callable[[Pool, np.random.Generator], list[int]]


def _evaluate(
    model: LinearTransformer, pools: list[Pool], systems: dict[str, Selector], seed: int
) -> dict[str, dict[str, float]]:
    """Every system's mean squared error, over-correction share and context size on pools."""
    rng = np.random.default_rng([seed, 3])
    sums: dict[str, dict[str, float]] = {s: {"sq_error": 0.0, "over": 0.0, "size": 0.0}
                                         for s in systems}  # fmt: skip
    for pool in pools:
        base = model.predict_subsets(pool.query, pool.x, pool.y, [[]])[0]
        for name, pick in systems.items():
            chosen = pick(pool, rng)
            y = model.predict_subsets(pool.query, pool.x, pool.y, [chosen])[0] if chosen else base
            sums[name]["sq_error"] += float(np.sum((y - pool.target) ** 2))
            if chosen:
                sums[name]["over"] += decompose(base, y, pool.target).regime == "over"
            sums[name]["size"] += len(chosen)
    return {s: {m: v / len(pools) for m, v in d.items()} for s, d in sums.items()}


def baseline(name: str, k: int) -> Selector:
    fn = BASELINES[name]
    return lambda pool, rng: fn(pool.query, pool.x, k, rng)


def corrective(model: LinearTransformer, config: SelectorConfig) -> Selector:
    def pick(pool: Pool, rng: np.random.Generator) -> list[int]:
        def answer(subsets: list[list[int]]) -> np.ndarray:
            return model.predict_subsets(pool.query, pool.x, pool.y, subsets)

        errors = _zero_shot_errors(model, pool)
        return select(pool.query, pool.x, errors, answer, config).chosen

    return pick


def _error_probe(
    model: LinearTransformer, pools: list[Pool], config: SelectorConfig
) -> dict[str, float]:
    """The control that isolates the selector's error estimate from its selection: answer
    ``ŷ₀ - ê`` directly (no context), with the selector's own ridge-probe estimate ``ê``."""
    sq, over = 0.0, 0.0
    for pool in pools:
        base = model.predict_subsets(pool.query, pool.x, pool.y, [[]])[0]
        e_hat = estimate_error(pool.query, pool.x, _zero_shot_errors(model, pool), config.ridge)
        sq += float(np.sum((base - e_hat - pool.target) ** 2))
        over += decompose(base, base - e_hat, pool.target).regime == "over"
    return {"sq_error": sq / len(pools), "over": over / len(pools), "size": 0.0}


def _best_k(results: dict[str, dict[str, float]], name: str, ks: tuple[int, ...]) -> int:
    """The ``k`` with the lowest validation squared error (the smallest on a tie)."""
    return min(ks, key=lambda k: (results[f"{name}@{k}"]["sq_error"], k))


def softmax_seed(
    seed: int, config: DemoConfig, model: LinearTransformer
) -> dict[str, dict[str, float]]:
    """The premise on the softmax-attention learner: the test pools of :func:`learner_seed`,
    no context, the ``premise_small``/``premise_large`` most similar items and all items."""
    test = _pools(seed, 20, config.queries, config)
    systems: dict[str, Selector] = {
        "no-context": lambda pool, rng: [],
        f"top-{config.premise_small}": baseline("top-k", config.premise_small),
        f"top-{config.premise_large}": baseline("top-k", config.premise_large),
        "all-items": baseline("all-items", 0),
    }
    return _evaluate(model, test, systems, seed)


def learner_seed(
    seed: int, config: DemoConfig, model: LinearTransformer
) -> tuple[dict[str, dict[str, float]], dict[str, int], float]:
    """One seed of the trained-learner experiment: per-system metrics on the test pools, the
    ``k`` chosen per baseline on the validation pools, and the share of the query's attention
    mass that lands on near-duplicates when the whole pool is in context."""
    val = _pools(seed, 10, config.val_queries, config)
    grid = {f"{n}@{k}": baseline(n, k) for n in TUNED for k in config.ks}
    val_res = _evaluate(model, val, grid, seed)
    chosen_k = {n: _best_k(val_res, n, config.ks) for n in TUNED}
    test = _pools(seed, 20, config.queries, config)
    systems: dict[str, Selector] = {n: baseline(n, chosen_k[n]) for n in TUNED}
    systems["all-items"] = baseline("all-items", 0)
    systems["no-context"] = lambda pool, rng: []
    systems[f"top-{config.premise_small}"] = baseline("top-k", config.premise_small)
    systems[f"top-{config.premise_large}"] = baseline("top-k", config.premise_large)
    systems[SELECTOR] = corrective(model, config.selector)
    res = _evaluate(model, test, systems, seed)
    res[PROBE] = _error_probe(model, test, config.selector)
    mass = []
    for pool in test:
        attn = np.abs(model.attention(pool.query, pool.x, pool.y))
        mass.append(float(attn[pool.near].sum() / max(attn.sum(), 1e-12)))
    return res, chosen_k, float(np.mean(mass))
