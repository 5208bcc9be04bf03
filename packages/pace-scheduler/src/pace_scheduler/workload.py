"""Requests with serial segments and fork points, their arrivals, and the JSONL trace format.

A request is a prompt, then serial segments ``s_0, s_1, …, s_F`` decoded by one sequence, with a
fork point between ``s_f`` and ``s_{f+1}`` that proposes ``b_f`` independent branches (Multiverse
"Map", Hogwild-style workers) of lengths ``l_{f,1..b_f}``. The segment after a fork attends to
every branch's tokens (the join). Its *critical path*, the number of decode steps it needs when
every branch runs concurrently, is ``L_cp = Σ_f s_f + Σ_f max_j l_{f,j}``.

Trace format (JSONL, one object a line, any order)::

    {"kind": "request", "id": "r0", "arrival": 0.12, "prompt_tokens": 512,
     "serial_tokens": [128, 96], "ttft_slo": 1.0, "tpot_slo": 0.045}
    {"kind": "branch", "parent": "r0", "fork": 0, "tokens": 240}

``fork`` ``f`` is the fork between ``serial_tokens[f]`` and ``serial_tokens[f+1]``, so a request
with ``k`` serial segments has forks ``0..k-2``. Times are seconds, lengths tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pace_scheduler.errors import PaceSchedulerError
from paperstack.records import ResultsFormatError, atomic_write, iter_jsonl

__all__ = [
    "MAX_SEQUENCE_TOKENS",
    "MAX_TRACE_TOKENS",
    "RequestSpec",
    "WorkloadConfig",
    "generate",
    "read_trace",
    "write_trace",
]


#: The longest prompt, serial segment or branch a trace may hold (2^20 tokens): past the context
#: of any model served here, and what keeps a replay bounded (the simulator takes one step per
#: decoded token of a critical path, the engine one forward).
MAX_SEQUENCE_TOKENS = 2**20
#: The most tokens (prompts and everything decoded) one trace may hold: 2^24, about 16.8M, a few
#: minutes of simulation at the simulator's measured step rate.
MAX_TRACE_TOKENS = 2**24


def _too_long(where: str, field: str, value: int) -> PaceSchedulerError:
    return PaceSchedulerError(
        f"{where}: field {field!r}: {value} tokens is over the limit of {MAX_SEQUENCE_TOKENS} "
        "(2^20) tokens per prompt, segment or branch"
    )


@dataclass(frozen=True)
class RequestSpec:
    """One request: arrival, prompt, serial segments, the branches of each fork, its SLOs."""

    id: str
    arrival: float
    prompt_tokens: int
    serial_tokens: tuple[int, ...]
    forks: tuple[tuple[int, ...], ...]
    ttft_slo: float
    tpot_slo: float

    def __post_init__(self) -> None:
        where = f"request {self.id!r}"
        if not math.isfinite(self.arrival) or self.arrival < 0:
            raise PaceSchedulerError(f"{where}: field 'arrival' must be >= 0, got {self.arrival}")
        if self.prompt_tokens < 1:
            raise PaceSchedulerError(
                f"{where}: field 'prompt_tokens' must be >= 1, got {self.prompt_tokens}"
            )
        if not self.serial_tokens or min(self.serial_tokens) < 1:
            raise PaceSchedulerError(
                f"{where}: field 'serial_tokens' must be a non-empty list of lengths >= 1, got "
                f"{list(self.serial_tokens)}"
            )
        if len(self.forks) != len(self.serial_tokens) - 1:
            raise PaceSchedulerError(
                f"{where}: {len(self.serial_tokens)} serial segments need "
                f"{len(self.serial_tokens) - 1} forks, got {len(self.forks)}"
            )
        for f, branches in enumerate(self.forks):
            if any(b < 1 for b in branches):
                raise PaceSchedulerError(f"{where}: fork {f}: branch lengths must be >= 1")
            if branches and max(branches) > MAX_SEQUENCE_TOKENS:
                raise _too_long(f"{where}: fork {f}", "tokens", max(branches))
        if self.prompt_tokens > MAX_SEQUENCE_TOKENS:
            raise _too_long(where, "prompt_tokens", self.prompt_tokens)
        if max(self.serial_tokens) > MAX_SEQUENCE_TOKENS:
            raise _too_long(where, "serial_tokens", max(self.serial_tokens))
        for name in ("ttft_slo", "tpot_slo"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise PaceSchedulerError(f"{where}: field {name!r} must be > 0, got {value}")

    @property
    def critical_path(self) -> int:
        """``L_cp``: decode steps with every branch concurrent."""
        return sum(self.serial_tokens) + sum(max(b) for b in self.forks if b)

    @property
    def total_tokens(self) -> int:
        """Every decoded token, branches included: the steps with branches run serially."""
        return sum(self.serial_tokens) + sum(sum(b) for b in self.forks)


@dataclass(frozen=True)
class WorkloadConfig:
    """Distributions of the embedded workload (reasoning requests that fork once).

    Lengths are lognormal with the given means and log-space ``sigma``; the branch count is
    uniform on ``branches``. ``fork_fraction`` of requests fork at all, so plain chat requests
    share every batch with branching ones (the requests that pay the externality).
    ``arrival="bursty"`` draws gamma inter-arrival times with coefficient of variation
    ``burst_cv`` (Poisson has 1).
    """

    rate: float = 4.0
    n_requests: int = 400
    arrival: str = "poisson"
    burst_cv: float = 3.0
    prompt_mean: float = 512.0
    serial_mean: float = 128.0
    branch_mean: float = 256.0
    sigma: float = 0.5
    branches: tuple[int, int] = (2, 8)
    fork_fraction: float = 0.7
    n_forks: int = 1
    ttft_slo: float = 1.0
    tpot_slo: float = 0.045
    max_tokens: int = 4096

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate) and self.rate > 0):
            raise PaceSchedulerError(f"workload: field 'rate' must be > 0, got {self.rate}")
        if self.n_requests < 1:
            raise PaceSchedulerError(
                f"workload: field 'n_requests' must be >= 1, got {self.n_requests}"
            )
        if self.arrival not in ("poisson", "bursty"):
            raise PaceSchedulerError(
                f"workload: field 'arrival' must be 'poisson' or 'bursty', got {self.arrival!r}"
            )
        for name in ("ttft_slo", "tpot_slo"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise PaceSchedulerError(f"workload: field {name!r} must be > 0, got {value}")
        lo, hi = self.branches
        if not 1 <= lo <= hi:
            raise PaceSchedulerError(
                f"workload: field 'branches' must be 1 <= lo <= hi, got {self.branches}"
            )


def _lognormal(rng: np.random.Generator, mean: float, sigma: float, size: Any) -> np.ndarray:
    """Lognormal draws with the given *mean* (not median): ``mu = ln(mean) − σ²/2``."""
    return rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, size)


def arrivals(rng: np.random.Generator, cfg: WorkloadConfig) -> np.ndarray:
    """Arrival times: Poisson (exponential gaps) or bursty (gamma gaps, CV ``burst_cv``)."""
    n = cfg.n_requests
    if cfg.arrival == "poisson":
        gaps = rng.exponential(1.0 / cfg.rate, n)
    else:
        shape = 1.0 / cfg.burst_cv**2
        gaps = rng.gamma(shape, 1.0 / (cfg.rate * shape), n)
    return np.cumsum(gaps)


def generate(cfg: WorkloadConfig, seed: int = 0) -> list[RequestSpec]:
    """Draw ``cfg.n_requests`` requests (all lengths drawn as arrays, then split per request)."""
    rng = np.random.default_rng(seed)
    n, f = cfg.n_requests, cfg.n_forks
    t = arrivals(rng, cfg)
    cap = cfg.max_tokens
    prompt = np.clip(np.rint(_lognormal(rng, cfg.prompt_mean, cfg.sigma, n)), 16, cap).astype(int)
    serial = np.clip(np.rint(_lognormal(rng, cfg.serial_mean, cfg.sigma, (n, f + 1))), 1, cap)
    serial = serial.astype(int)
    forks = rng.random(n) < cfg.fork_fraction
    lo, hi = cfg.branches
    counts = rng.integers(lo, hi + 1, (n, f)) * forks[:, None]
    lengths = np.clip(np.rint(_lognormal(rng, cfg.branch_mean, cfg.sigma, (n, f, hi))), 1, cap)
    lengths = lengths.astype(int)
    out = []
    for i in range(n):
        branch_sets = tuple(tuple(int(v) for v in lengths[i, k, : counts[i, k]]) for k in range(f))
        if not forks[i]:  # a plain request: one serial segment of the same expected length
            segs: tuple[int, ...] = (int(serial[i].sum()),)
            branch_sets = ()
        else:
            segs = tuple(int(v) for v in serial[i])
        out.append(
            RequestSpec(
                id=f"r{i}",
                arrival=float(t[i]),
                prompt_tokens=int(prompt[i]),
                serial_tokens=segs,
                forks=branch_sets,
                ttft_slo=cfg.ttft_slo,
                tpot_slo=cfg.tpot_slo,
            )
        )
    return out


# --------------------------------------------------------------------------- trace files


def write_trace(path: str | Path, requests: Iterable[RequestSpec]) -> Path:
    """Write requests as a JSONL trace (atomically): a ``request`` line, then its ``branch``es."""
    import json

    lines = []
    for r in requests:
        lines.append(
            json.dumps(
                {
                    "kind": "request",
                    "id": r.id,
                    "arrival": r.arrival,
                    "prompt_tokens": r.prompt_tokens,
                    "serial_tokens": list(r.serial_tokens),
                    "ttft_slo": r.ttft_slo,
                    "tpot_slo": r.tpot_slo,
                }
            )
        )
        for f, branches in enumerate(r.forks):
            for tokens in branches:
                lines.append(
                    json.dumps({"kind": "branch", "parent": r.id, "fork": f, "tokens": tokens})
                )
    return atomic_write(path, "\n".join(lines) + "\n")


def _number(obj: dict[str, Any], key: str, where: str, *, integer: bool = False) -> Any:
    if key not in obj:
        raise PaceSchedulerError(f"{where}: missing field {key!r}")
    value = obj[key]
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok:
        kind = "an integer" if integer else "a number"
        raise PaceSchedulerError(f"{where}: field {key!r} must be {kind}, got {value!r}")
    if not integer and not math.isfinite(value):
        raise PaceSchedulerError(f"{where}: field {key!r} must be finite, got {value!r}")
    return value


def read_trace(path: str | Path) -> list[RequestSpec]:
    """Parse and validate a JSONL trace; every error names the file, line and field.

    Checks: valid JSON objects, known ``kind``, required fields and types, unique request ids,
    branches whose ``parent`` is a request of the trace and whose ``fork`` exists, SLOs > 0.
    Requests are returned sorted by arrival.
    """
    p = Path(path)
    requests: dict[str, dict[str, Any]] = {}
    branches: list[tuple[int, dict[str, Any]]] = []
    try:
        records = list(iter_jsonl(p))
    except ResultsFormatError as exc:
        raise PaceSchedulerError(str(exc)) from None
    for line, obj in enumerate(records, start=1):
        where = f"{p}: record {line}"
        kind = obj.get("kind")
        if kind == "request":
            rid = obj.get("id")
            if not isinstance(rid, str) or not rid:
                raise PaceSchedulerError(f"{where}: field 'id' must be a non-empty string")
            if rid in requests:
                raise PaceSchedulerError(f"{where}: field 'id': duplicate request {rid!r}")
            serial = obj.get("serial_tokens")
            if (
                not isinstance(serial, list)
                or not serial
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in serial)
            ):
                raise PaceSchedulerError(
                    f"{where}: field 'serial_tokens' must be a non-empty list of integers"
                )
            for key in ("arrival", "ttft_slo", "tpot_slo"):
                _number(obj, key, where)
            _number(obj, "prompt_tokens", where, integer=True)
            for key in ("ttft_slo", "tpot_slo"):
                if obj[key] <= 0:
                    raise PaceSchedulerError(f"{where}: field {key!r} must be > 0, got {obj[key]}")
            requests[rid] = dict(obj, _line=line)
        elif kind == "branch":
            branches.append((line, obj))
        else:
            raise PaceSchedulerError(
                f"{where}: field 'kind' must be 'request' or 'branch', got {kind!r}"
            )
    if not requests:
        raise PaceSchedulerError(f"{p}: no requests in the trace")
    forks: dict[str, list[list[int]]] = {
        rid: [[] for _ in range(len(r["serial_tokens"]) - 1)] for rid, r in requests.items()
    }
    for line, obj in branches:
        where = f"{p}: record {line}"
        parent = obj.get("parent")
        if parent not in requests:
            raise PaceSchedulerError(f"{where}: field 'parent': unknown request {parent!r}")
        fork = _number(obj, "fork", where, integer=True)
        if not 0 <= fork < len(forks[parent]):
            raise PaceSchedulerError(
                f"{where}: field 'fork': request {parent!r} has forks 0..{len(forks[parent]) - 1}, "
                f"got {fork}"
            )
        tokens = _number(obj, "tokens", where, integer=True)
        if tokens < 1:
            raise PaceSchedulerError(f"{where}: field 'tokens' must be >= 1, got {tokens}")
        if tokens > MAX_SEQUENCE_TOKENS:
            raise _too_long(where, "tokens", tokens)
        forks[parent][fork].append(tokens)
    out = []
    for rid, r in requests.items():
        try:
            out.append(
                RequestSpec(
                    id=rid,
                    arrival=float(r["arrival"]),
                    prompt_tokens=int(r["prompt_tokens"]),
                    serial_tokens=tuple(r["serial_tokens"]),
                    forks=tuple(tuple(b) for b in forks[rid]),
                    ttft_slo=float(r["ttft_slo"]),
                    tpot_slo=float(r["tpot_slo"]),
                )
            )
        except PaceSchedulerError as exc:
            raise PaceSchedulerError(f"{p}: record {r['_line']}: {exc}") from None
    total = sum(q.prompt_tokens + q.total_tokens for q in out)
    if total > MAX_TRACE_TOKENS:
        raise PaceSchedulerError(
            f"{p}: {total} tokens in the trace is over the limit of {MAX_TRACE_TOKENS} (2^24)"
        )
    out.sort(key=lambda q: q.arrival)
    return out


def summarize(requests: Sequence[RequestSpec]) -> dict[str, float]:
    """Mean lengths of a workload (for reports and load scaling)."""
    total = np.array([r.total_tokens for r in requests], dtype=float)
    cp = np.array([r.critical_path for r in requests], dtype=float)
    branches = [b for r in requests for fork in r.forks for b in fork]
    return {
        "mean_branch_tokens": float(np.mean(branches)) if branches else 0.0,
        "requests": float(len(requests)),
        "mean_total_tokens": float(total.mean()),
        "mean_critical_path": float(cp.mean()),
        "mean_prompt": float(np.mean([r.prompt_tokens for r in requests])),
        "fork_fraction": float(np.mean([bool(r.forks and any(r.forks)) for r in requests])),
    }
