"""Speed on :mod:`paperstack.bench`: a market tournament, and the verifiers' throughput.

Two interleaved comparisons (:func:`paperstack.bench.compare_speed`: warm-up, then repeats in
which every system runs once in a shuffled order, one torch thread, set and recorded); each
speed row is the **median** of per-repeat ratios with its order-statistic 95% interval, and each
system's output is checked against its reference's in the same run:

1. **Market**: a live tournament (``survival`` population of 12 scripted agents, ``high``
   pressure, every decision and round written to a fresh JSONL ledger) against the same
   tournament **resumed from its complete ledger** (what ``simulate`` does after a crash). The
   market has no method-free variant to time it against, so its natural reference is its own
   replay: the check is **bit-exact** on what a run reports (final balances, ranking, eliminated
   agents, decisions, parse failures), i.e. resuming changes nothing; the difference is the
   number of those fields that differ. ``rounds_per_s`` rows keep
   the market's throughput.
2. **Verifiers**: MemeAgent-MiniLM (its encoder re-run on every call: the cached top-layer
   inputs are dropped first) against the keyword-rules verifier on the same held-out examples.
   Their verdicts legitimately differ (a learned model against rules: the demo measures how
   much), so the check states what must agree: one verdict from :data:`LABELS` for every example
   the rules verified, in the same order, and MiniLM's verdicts identical to those of an untimed
   call that read the cached states, so a timed call that skipped or corrupted the encoder pass
   fails. The difference is the number of examples that break this (0 required).

Timings come from whatever machine runs them (the committed ones from a shared, loaded 2-core
CPU): read the ratios, not the absolute rates.
"""

from __future__ import annotations

import itertools
import math
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memeeconomy.agents import population
from memeeconomy.events import shipped_events
from memeeconomy.market import MarketConfig, MarketResult, run_market
from memeeconomy.verifier import (
    LABELS,
    KeywordVerifier,
    MiniLMFeatures,
    MiniLMVerifier,
    examples_from_ledger,
)
from paperstack.bench import SpeedComparison, compare_speed, median_ci, set_threads
from paperstack.errors import PaperstackError
from paperstack.records import Claim, Row

__all__ = ["MIN_REPEATS", "THREADS", "measure"]

#: One torch thread: the committed timings come from a shared 2-core CPU.
THREADS = 1
#: Fewer than six repeats give no 95% order-statistic interval narrower than [min, max].
MIN_REPEATS = 6


def _summary(result: MarketResult) -> dict[str, Any]:
    """What a tournament reports, for the bit-exact comparison of a live run and its replay."""
    return {
        "balances": [result.balances[a] for a in sorted(result.balances)],
        "ranking": list(result.ranking),
        "eliminated": list(result.eliminated),
        "decisions": result.decisions,
        "failures": result.failures,
    }


def _fields_differing(out: dict[str, Any], ref: dict[str, Any]) -> float:
    """How many of a tournament's reported fields differ (0 for a bit-identical report).

    ``check="exact"`` of :func:`paperstack.bench.compare_speed` goes through ``max_abs_diff``,
    which cannot compare the names in a ranking (strings); ``==`` on floats and lists of
    names is the same bit-exact test."""
    if set(out) != set(ref):
        return math.inf
    return float(sum(1 for k in ref if out[k] != ref[k]))


def _verdict_check(reference: Sequence[str | None]) -> Any:
    """The verifiers' check (see the module docstring): ``f(out, rules) -> violations``, the
    number of examples whose verdict is not a label or differs from ``reference`` (MiniLM's
    untimed verdicts); ``inf`` when ``out`` does not cover the rules' examples one for one."""

    def check(out: Sequence[str | None], rules: Sequence[str | None]) -> float:
        if len(out) != len(rules) or len(out) != len(reference):
            return math.inf
        bad = sum(1 for o, r in zip(out, reference, strict=True) if o not in LABELS or o != r)
        return float(bad + sum(1 for r in rules if r is not None and r not in LABELS))

    return check


def _rate_row(cmp: SpeedComparison, system: str, count: int, metric: str, unit: str) -> Row:
    ts = cmp.times[system]
    med, ci = median_ci([count / t for t in ts])
    return Row(system=system, metric=metric, value=med, ci95=ci, n=len(ts), unit=unit)


def measure(
    out: Path, *, repeats: int, quick: bool, seed: int = 0
) -> tuple[list[Row], list[Claim], dict[str, Any]]:
    """The bench's rows, its correctness claims and its configuration (timings included)."""
    if repeats < MIN_REPEATS:
        raise PaperstackError(
            f"--repeats {repeats}: needs at least {MIN_REPEATS} (a median's 95% interval)"
        )
    threads = set_threads(THREADS)
    events = shipped_events()
    if quick:
        events = events.subset(events.ids[:16])
    agents = population("survival", 12, seed, events)
    config = MarketConfig(seed=seed, pressure="high", agents=tuple(agents),
                          events=tuple(events.ids))  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="memeeconomy-bench-", dir=out))
    try:
        fresh = (tmp / f"live{i}.jsonl" for i in itertools.count())
        complete = tmp / "complete.jsonl"
        records = run_market(config, agents, events, complete).records

        def live() -> dict[str, Any]:
            return _summary(run_market(config, agents, events, next(fresh)))

        def resume() -> dict[str, Any]:
            return _summary(run_market(config, agents, events, complete))

        market = compare_speed(
            {"market": live, "market-resume": resume},
            baseline="market",
            repeats=repeats,
            warmup=1,
            check=_fields_differing,
            tolerance=0.0,
            seed=seed,
            threads=threads,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    examples = examples_from_ledger(records, events, "bench")
    n = min(len(examples), 64 if quick else 256)
    train, test = examples[:n], examples[-n:]
    kw = KeywordVerifier()
    features = MiniLMFeatures()
    minilm = MiniLMVerifier(features, epochs=1, seed=seed)
    minilm.fit(train[: min(64, n)], [])
    minilm.predict(test)  # caches the test examples' top-layer inputs
    cached = minilm.predict(test)  # the untimed reference: read from the cache

    def rules() -> list[str | None]:
        return kw.predict(test)

    def encoder() -> list[str | None]:
        features.forget()  # time the encoder too, not only the cached top layer
        return minilm.predict(test)

    verifiers = compare_speed(
        {"keyword-rules": rules, "memeagent-minilm": encoder},
        baseline="keyword-rules",
        repeats=repeats,
        warmup=1,
        check=_verdict_check(cached),
        tolerance=0.0,
        seed=seed,
        threads=threads,
    )
    rows = market.rows() + verifiers.rows()
    rows += [
        _rate_row(market, s, len(events), "rounds_per_s", "rounds/s (12 agents)")
        for s in market.times
    ]
    rows += [_rate_row(verifiers, s, len(test), "examples_per_s", "examples/s")
             for s in verifiers.times]  # fmt: skip
    claims = [
        market.correctness_claim("market-resume", rows, id="market_resume_identical"),
        Claim.compare(
            "minilm_verdicts_consistent",
            "memeagent-minilm gives one valid verdict for every example the keyword rules "
            "verified, identical to its untimed verdicts from cached states (the verifiers' "
            "verdicts themselves legitimately differ)",
            rows,
            ("memeagent-minilm", "matches_keyword-rules"),
            "ge",
            1.0,
            exact=True,
        ),
    ]
    measured: dict[str, Any] = {
        "events": len(events),
        "agents": 12,
        "repeats": repeats,
        "examples": len(test),
        "threads": threads,
        "market_timing": market.to_dict(),
        "verifier_timing": verifiers.to_dict(),
    }
    return rows, claims, measured
