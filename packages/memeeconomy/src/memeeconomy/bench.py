"""Speed: market rounds per second and verifier throughput (examples per second).

Timings are taken on whatever machine runs them (the committed ones on a shared 2-core CPU);
each repeat is one value, the rows carry the spread over repeats.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from memeeconomy.agents import population
from memeeconomy.events import shipped_events
from memeeconomy.market import MarketConfig, run_market
from memeeconomy.verifier import (
    KeywordVerifier,
    MiniLMFeatures,
    MiniLMVerifier,
    examples_from_ledger,
)
from paperstack.records import Row

__all__ = ["measure"]


def measure(
    out: Path, *, repeats: int, quick: bool, seed: int = 0
) -> tuple[list[Row], dict[str, Any]]:
    events = shipped_events()
    if quick:
        events = events.subset(events.ids[:16])
    agents = population("survival", 12, seed, events)
    rounds: dict[int, float] = {}
    records: list[Any] = []
    tmp = Path(tempfile.mkdtemp(prefix="memeeconomy-bench-", dir=out))
    try:
        for i in range(repeats):
            config = MarketConfig(seed=seed + i, pressure="high", agents=tuple(agents),
                                  events=tuple(events.ids))  # fmt: skip
            t0 = time.perf_counter()
            result = run_market(config, agents, events, tmp / f"r{i}.jsonl")
            rounds[i] = len(events) / (time.perf_counter() - t0)
            records = result.records
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    examples = examples_from_ledger(records, events, "bench")
    n = min(len(examples), 64 if quick else 256)
    train, test = examples[:n], examples[-n:]
    kw = KeywordVerifier()
    features = MiniLMFeatures()
    minilm = MiniLMVerifier(features, epochs=1, seed=seed)
    minilm.fit(train[: min(64, n)], [])
    thr: dict[str, dict[int, float]] = {"keyword-rules": {}, "memeagent-minilm": {}}
    for i in range(repeats):
        for name, v in (("keyword-rules", kw), ("memeagent-minilm", minilm)):
            features.forget()  # time the encoder too, not only the cached top layer
            t0 = time.perf_counter()
            v.predict(test)
            thr[name][i] = len(test) / (time.perf_counter() - t0)
    rows = [Row.from_seeds("market", "rounds_per_s", rounds, unit="rounds/s (12 agents)")]
    rows += [Row.from_seeds(k, "examples_per_s", v, unit="examples/s") for k, v in thr.items()]
    return rows, {"events": len(events), "agents": 12, "repeats": repeats, "examples": len(test)}
