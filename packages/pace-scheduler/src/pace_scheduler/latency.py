"""The step-latency predictor ``T̂(batch)``: what one forward pass of a batch costs.

Pace needs to know, before a step runs, how much longer the step gets when extra branches join it
(the externality). The model is the Vidur-style decomposition of a continuous-batching step into
the parts a GPU (or CPU) actually pays for:

    T̂ = α + max(w, β·n_tok) + γ·Σ_{i∈D} c_i + δ·Σ_{j∈P} p_j·(c_j + p_j/2) + ε·|D|
         + ζ·n_tok·n_kv

- ``α`` fixed per-step overhead (scheduling, sampling, kernel launches);
- ``max(w, β·n_tok)`` the linear layers: reading the weights once (``w = W_bytes / BW``) until the
  batch holds enough tokens (``n_tok = |D| + Σ p_j``) to be compute-bound at ``β`` s/token;
- ``γ·Σ c_i`` reading the KV cache of every decode sequence ``i`` with context ``c_i``;
- ``δ·Σ p_j(c_j + p_j/2)`` prefill attention over chunk ``p_j`` on top of context ``c_j``;
- ``ε·|D|`` per-sequence bookkeeping;
- ``ζ·n_tok·n_kv`` attention through one mask over the whole batch: ``n_tok`` query tokens
  against ``n_kv = Σ_D (c_i + 1) + Σ_P (c_j + p_j)`` keys. transformers' continuous-batching
  engine runs SDPA/eager attention this way (one ``[n_tok, n_kv]`` mask for the concatenated
  batch, so every added sequence costs every other one), which makes a step superlinear in the
  batch; with paged or flash kernels (vLLM, the H200 model) ``ζ = 0``.

The coefficients are fitted by least squares from profiled steps (``fit``), with the knee
``n* = w/β`` found by a one-dimensional search (the ``max`` makes the problem linear once the knee
is fixed), and refitted online from measured step times (``OnlinePredictor``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from pace_scheduler.errors import PaceSchedulerError

__all__ = [
    "FEATURES",
    "H200_QWEN3_32B",
    "N_FEATURES",
    "HardwareSpec",
    "LatencyModel",
    "OnlinePredictor",
    "StepFeatures",
    "add_sequence",
    "as_features",
    "batch_pairs",
    "fit",
    "r_squared",
]

#: Column order of a feature matrix: decode sequences |D|, Σ decode context Σc_i, prefill tokens
#: Σp_j, prefill attention Σ p_j(c_j + p_j/2), prefill context Σc_j. All are sums over the
#: batch, so the features of a batch plus one sequence are the two feature vectors added.
FEATURES = ("n_decode", "sum_ctx", "prefill_tokens", "prefill_attn", "prefill_ctx")
N_FEATURES = len(FEATURES)


def as_features(x: ArrayLike) -> np.ndarray:
    """``x`` as float features with :data:`N_FEATURES` columns (older 4-column profiles and
    views, written before ``prefill_ctx``, get a zero column)."""
    f = np.asarray(x, dtype=np.float64)
    if f.shape[-1] == N_FEATURES - 1:
        f = np.concatenate([f, np.zeros((*f.shape[:-1], 1))], axis=-1)
    return f


def add_sequence(f: np.ndarray, tokens: int, context: int) -> None:
    """Add one sequence of a batch to its features ``f`` (in place): ``tokens`` new tokens on
    ``context`` past ones; one token is a decode, more a prefill chunk."""
    if tokens <= 1:
        f[0] += 1
        f[1] += context
    else:
        f[2] += tokens
        f[3] += tokens * (context + tokens / 2.0)
        f[4] += context


def batch_pairs(f: np.ndarray) -> np.ndarray:
    """``n_tok·n_kv``: query-key pairs of one attention mask over the whole batch."""
    n_tok = f[..., 0] + f[..., 2]
    n_kv = f[..., 1] + f[..., 0] + f[..., 4] + f[..., 2]
    return n_tok * n_kv


@dataclass(frozen=True)
class StepFeatures:
    """What the latency model reads from one batch (all sums over the batch)."""

    n_decode: float = 0.0
    sum_ctx: float = 0.0
    prefill_tokens: float = 0.0
    prefill_attn: float = 0.0
    prefill_ctx: float = 0.0

    def as_array(self) -> np.ndarray:
        return np.array(
            [self.n_decode, self.sum_ctx, self.prefill_tokens, self.prefill_attn, self.prefill_ctx],
            dtype=np.float64,
        )

    @classmethod
    def of(
        cls,
        decode_ctx: ArrayLike = (),
        prefill_chunks: ArrayLike = (),
        prefill_ctx: ArrayLike = (),
    ) -> StepFeatures:
        """Features of a batch from its decode contexts and prefill chunks (with their contexts)."""
        c = np.asarray(decode_ctx, dtype=np.float64)
        p = np.asarray(prefill_chunks, dtype=np.float64)
        pc = np.asarray(prefill_ctx, dtype=np.float64)
        return cls(
            n_decode=float(c.size),
            sum_ctx=float(c.sum()),
            prefill_tokens=float(p.sum()),
            prefill_attn=float((p * (pc + p / 2.0)).sum()),
            prefill_ctx=float(pc.sum()),
        )


@dataclass(frozen=True)
class LatencyModel:
    """``T̂ = α + max(w, β·n_tok) + γ·Σc + δ·Σp(c+p/2) + ε·|D| + ζ·n_tok·n_kv`` (seconds; see
    the module doc).

    ``noise_cv`` is only used by the simulator, which multiplies true step times by lognormal
    noise of that coefficient of variation; the predictor itself is deterministic.
    """

    alpha: float
    weights: float
    beta: float
    gamma: float
    delta: float
    eps: float
    noise_cv: float = 0.0
    name: str = "custom"
    zeta: float = 0.0

    def __post_init__(self) -> None:
        for field in ("alpha", "weights", "beta", "gamma", "delta", "eps", "noise_cv", "zeta"):
            value = getattr(self, field)
            if not np.isfinite(value) or value < 0:
                raise PaceSchedulerError(
                    f"latency model {self.name!r}: field {field!r} must be finite and >= 0, "
                    f"got {value}"
                )

    @property
    def knee(self) -> float:
        """Batch tokens ``n* = w/β`` where decode stops being weight-bandwidth-bound."""
        return self.weights / self.beta if self.beta > 0 else float("inf")

    def predict(self, x: ArrayLike) -> np.ndarray:
        """``T̂`` for one feature vector or an ``(n, 5)`` matrix in :data:`FEATURES` order.

        Vectorised so the controller prices every prefix of its candidate list in one call.
        """
        f = as_features(x)
        linear = f @ np.array([self.eps, self.gamma, 0.0, self.delta, 0.0])
        n_tok = f[..., 0] + f[..., 2]
        out = self.alpha + np.maximum(self.weights, self.beta * n_tok) + linear
        if self.zeta:
            out = out + self.zeta * batch_pairs(f)
        return out

    def step_time(self, features: StepFeatures) -> float:
        return float(self.predict(features.as_array()))

    def scaled(self, factor: float) -> LatencyModel:
        """The same model on a machine ``factor`` times slower (every time term scaled)."""
        if not (np.isfinite(factor) and factor > 0):
            raise PaceSchedulerError(f"latency model: scale factor must be > 0, got {factor}")
        terms = ("alpha", "weights", "beta", "gamma", "delta", "eps", "zeta")
        return replace(self, **{k: getattr(self, k) * factor for k in terms})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "latency model") -> LatencyModel:
        missing = [
            k for k in ("alpha", "weights", "beta", "gamma", "delta", "eps") if k not in data
        ]
        if missing:
            raise PaceSchedulerError(f"{source}: missing field {missing[0]!r}")
        try:
            kwargs = {
                k: float(data[k])
                for k in ("alpha", "weights", "beta", "gamma", "delta", "eps", "noise_cv", "zeta")
                if k in data
            }
        except (TypeError, ValueError):
            raise PaceSchedulerError(f"{source}: coefficients must be numbers") from None
        return cls(**kwargs, name=str(data.get("name", source)))

    @classmethod
    def load(cls, path: str | Path) -> LatencyModel:
        """A model from a ``fit.json`` written by ``pace profile`` (its ``model`` field)."""
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError:
            raise PaceSchedulerError(f"{p}: no such file") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise PaceSchedulerError(f"{p}: not a JSON latency model ({exc})") from None
        if not isinstance(data, dict):
            raise PaceSchedulerError(f"{p}: expected a JSON object")
        model = data.get("model", data)
        if not isinstance(model, dict):
            raise PaceSchedulerError(f"{p}: field 'model' must be an object")
        return cls.from_dict(model, source=str(p))


@dataclass(frozen=True)
class HardwareSpec:
    """Published-ish numbers a latency model is derived from (written down in the README).

    ``bw_efficiency`` and ``mfu`` are the fractions of peak HBM bandwidth and dense BF16 FLOP/s a
    well-tuned engine reaches on decode and prefill.
    """

    name: str
    weight_bytes: float
    hbm_bandwidth: float
    peak_flops: float
    flops_per_token: float
    kv_bytes_per_token: float
    attn_flops_per_pair: float
    hbm_bytes: float
    bw_efficiency: float = 0.85
    mfu: float = 0.6
    step_overhead: float = 1.5e-3
    per_seq_overhead: float = 2e-5
    noise_cv: float = 0.04
    memory_utilization: float = 0.9
    activation_bytes: float = 8e9

    def latency_model(self) -> LatencyModel:
        bw = self.hbm_bandwidth * self.bw_efficiency
        flops = self.peak_flops * self.mfu
        return LatencyModel(
            alpha=self.step_overhead,
            weights=self.weight_bytes / bw,
            beta=self.flops_per_token / flops,
            gamma=self.kv_bytes_per_token / bw,
            delta=self.attn_flops_per_pair / flops,
            eps=self.per_seq_overhead,
            noise_cv=self.noise_cv,
            name=self.name,
        )

    def kv_tokens(self) -> int:
        """Tokens of KV cache that fit beside the weights and activations."""
        free = self.hbm_bytes * self.memory_utilization - self.weight_bytes - self.activation_bytes
        return int(free // self.kv_bytes_per_token)


#: Qwen3-32B in BF16 on one H200. Weights ~64 GB (32.8B parameters x 2 bytes, rounded as in the
#: brief); HBM3e 4.8 TB/s and 141 GB; 989 TFLOP/s dense BF16; 2 FLOPs per parameter per token;
#: KV 64 layers x 8 KV heads x 128 dims x (K,V) x 2 bytes = 256 KiB/token; attention
#: 4 x 64 heads x 128 dims x 64 layers FLOPs per (query, key) pair.
H200_QWEN3_32B = HardwareSpec(
    name="h200-qwen3-32b",
    weight_bytes=64e9,
    hbm_bandwidth=4.8e12,
    peak_flops=989e12,
    flops_per_token=2 * 32e9,
    kv_bytes_per_token=64 * 8 * 128 * 2 * 2,
    attn_flops_per_pair=4 * 64 * 128 * 64,
    hbm_bytes=141e9,
)


# --------------------------------------------------------------------------- fitting


def r_squared(y: ArrayLike, y_hat: ArrayLike) -> float:
    """Coefficient of determination ``R² = 1 − Σ(y−ŷ)² / Σ(y−ȳ)²``."""
    yv = np.asarray(y, dtype=np.float64)
    yh = np.asarray(y_hat, dtype=np.float64)
    ss_tot = float(((yv - yv.mean()) ** 2).sum())
    ss_res = float(((yv - yh) ** 2).sum())
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)


def _design(x: np.ndarray, knee: float) -> np.ndarray:
    """Columns for ``α, β (on max(n*, n_tok)), γ, δ, ε, ζ`` with the knee ``n*`` fixed."""
    n_tok = x[:, 0] + x[:, 2]
    return np.column_stack(
        [np.ones(len(x)), np.maximum(knee, n_tok), x[:, 1], x[:, 3], x[:, 0], batch_pairs(x)]
    )


def _nonneg_lstsq(a: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Least squares with every coefficient >= 0 (a small active-set loop over 5 columns).

    Negative step costs are unphysical and would let the controller believe that adding a branch
    makes a step faster, so a column whose coefficient goes negative is dropped and the rest
    refitted. Columns that are all zero in the data (e.g. no prefill profiled) get 0. Columns
    are scaled to unit norm first: ``ζ`` multiplies products of token counts (1e4-1e6) and
    would otherwise swamp the conditioning of the others.
    """
    if w is not None:
        a = a * w[:, None]
        y = y * w
    norm = np.sqrt((a**2).sum(axis=0))
    active = norm > 0
    scale = np.where(active, norm, 1.0)
    a = a / scale
    coef = np.zeros(a.shape[1])
    for _ in range(a.shape[1]):
        sol, *_ = np.linalg.lstsq(a[:, active], y, rcond=None)
        coef[:] = 0.0
        coef[active] = sol
        if (coef >= 0).all():
            break
        active &= coef > 0
    return np.clip(coef, 0.0, None) / scale


def fit(
    x: ArrayLike,
    y: ArrayLike,
    *,
    name: str = "fitted",
    knees: ArrayLike | None = None,
    source: str = "profile",
) -> tuple[LatencyModel, float]:
    """Fit ``α, w, β, γ, δ, ε, ζ`` to profiled steps; return the model and its R² on them.

    ``x`` is ``(n, 5)`` in :data:`FEATURES` order and ``y`` the measured seconds. For each
    candidate knee ``n*`` (``knees``, default a log grid over the profiled batch sizes) the
    model is linear in ``(α, β, γ, δ, ε, ζ)`` with ``w = β·n*``; the knee with the smallest
    relative squared error wins. Errors are weighted by ``1/y`` so that cheap decode steps are
    fitted as carefully as expensive prefills (the controller prices decode steps).
    """
    xa = as_features(x)
    ya = np.asarray(y, dtype=np.float64).ravel()
    if xa.ndim != 2 or xa.shape[1] != N_FEATURES:
        raise PaceSchedulerError(
            f"{source}: features must be (n, {N_FEATURES}), got shape {xa.shape}"
        )
    if xa.shape[0] != ya.shape[0]:
        raise PaceSchedulerError(f"{source}: {xa.shape[0]} feature rows but {ya.shape[0]} times")
    if xa.shape[0] < 8:
        raise PaceSchedulerError(
            f"{source}: {xa.shape[0]} profiled steps are too few to fit 7 coefficients "
            "(need at least 8)"
        )
    if not (np.isfinite(xa).all() and np.isfinite(ya).all()) or (ya <= 0).any() or (xa < 0).any():
        raise PaceSchedulerError(f"{source}: times must be > 0 and features finite and >= 0")
    n_tok = xa[:, 0] + xa[:, 2]
    if np.unique(n_tok).size < 3:
        raise PaceSchedulerError(
            f"{source}: needs steps with at least 3 different batch sizes, got "
            f"{np.unique(n_tok).size}"
        )
    if knees is None:
        lo, hi = max(float(n_tok.min()), 1.0), max(float(n_tok.max()), 2.0)
        grid = np.concatenate([[0.0], np.geomspace(lo, hi, 48)])
    else:
        grid = np.asarray(knees, dtype=np.float64)
    weight = 1.0 / ya
    best: tuple[float, np.ndarray, float] | None = None
    for knee in grid:
        a = _design(xa, float(knee))
        coef = _nonneg_lstsq(a, ya, weight)
        err = float(((((a @ coef) - ya) * weight) ** 2).sum())
        if best is None or err < best[0]:
            best = (err, coef, float(knee))
    assert best is not None
    _, coef, knee = best
    alpha, beta, gamma, delta, eps, zeta = (float(c) for c in coef)
    model = LatencyModel(
        alpha=alpha,
        weights=beta * knee,
        beta=beta,
        gamma=gamma,
        delta=delta,
        eps=eps,
        name=name,
        zeta=zeta,
    )
    return model, r_squared(ya, model.predict(xa))


class OnlinePredictor:
    """``T̂`` refitted online from measured step times, around a fixed knee.

    Keeps the profiled steps as a prior and a ring buffer of the latest ``window`` measured
    steps; every ``refit_every`` observations it refits ``(α, β, γ, δ, ε)`` by non-negative least
    squares on both (the knee stays the profiled one: live batches rarely span it). Prediction is
    a handful of multiply-adds, so the controller can price hundreds of candidate sets per step.
    """

    def __init__(
        self,
        model: LatencyModel,
        prior_x: ArrayLike | None = None,
        prior_y: ArrayLike | None = None,
        *,
        window: int = 512,
        refit_every: int = 128,
    ) -> None:
        if window < 8 or refit_every < 1:
            raise PaceSchedulerError(
                f"online predictor: window must be >= 8 and refit_every >= 1, got {window}, "
                f"{refit_every}"
            )
        self.model = model
        self.window = window
        self.refit_every = refit_every
        self._prior_x = np.zeros((0, N_FEATURES)) if prior_x is None else as_features(prior_x)
        self._prior_y = np.zeros(0) if prior_y is None else np.asarray(prior_y, float).ravel()
        self._x = np.zeros((window, N_FEATURES))
        self._y = np.zeros(window)
        self._count = 0
        self.refits = 0

    def predict(self, x: ArrayLike) -> np.ndarray:
        return self.model.predict(x)

    def observe(self, features: ArrayLike, seconds: float) -> None:
        """Record one measured step; refit when due."""
        if not np.isfinite(seconds) or seconds <= 0:
            return
        i = self._count % self.window
        self._x[i] = as_features(features)
        self._y[i] = seconds
        self._count += 1
        if self._count % self.refit_every == 0:
            self.refit()

    def refit(self) -> None:
        n = min(self._count, self.window)
        x = np.concatenate([self._prior_x, self._x[:n]])
        y = np.concatenate([self._prior_y, self._y[:n]])
        if len(y) < 8:
            return
        knee = self.model.knee if np.isfinite(self.model.knee) else 0.0
        coef = _nonneg_lstsq(_design(x, knee), y, 1.0 / y)
        alpha, beta, gamma, delta, eps, zeta = (float(c) for c in coef)
        if beta <= 0:  # keep the old compute term rather than a knee at infinity
            beta = self.model.beta
        self.model = replace(
            self.model,
            alpha=alpha,
            weights=beta * knee,
            beta=beta,
            gamma=gamma,
            delta=delta,
            eps=eps,
            zeta=zeta,
        )
        self.refits += 1


def features_matrix(rows: Sequence[Mapping[str, Any]], source: str) -> np.ndarray:
    """``(n, 5)`` features from profile records, naming the first bad record (a missing
    feature is 0)."""
    out = np.zeros((len(rows), N_FEATURES))
    for i, row in enumerate(rows):
        for k, name in enumerate(FEATURES):
            value = row.get(name, 0.0)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise PaceSchedulerError(
                    f"{source}: record {i + 1}: field {name!r} must be a number >= 0, got {value!r}"
                )
            out[i, k] = float(value)
    return out
