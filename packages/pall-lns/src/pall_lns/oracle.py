"""Hindsight-oracle labels: fork every operator from sampled search states.

At each visited state the search is forked: every operator of the ensemble solves its sub-MIP
from the same incumbent with the same budget ``tau``, and gets the reward
``r_o = (f(x_t) - f(x_o)) / max(|f(x_t)|, eps) / time_o``; the label is ``argmax_o r_o`` and the
whole reward vector is kept for a cost-sensitive loss. The search rolls forward with the oracle's
choice (the forks of the other operators are not charged to the search clock, so the context's
``progress`` is what a deployed selector would see). Records are JSONL lines with the feature
vector, the prompt text, the rewards and the label; :func:`export_sft` turns them into a
conversational dataset for trl's ``SFTTrainer`` (answer ``OP=<id>``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pall_lns.context import context_to_json
from pall_lns.errors import PallError
from pall_lns.lns import LnsConfig, _Search
from pall_lns.operators import OperatorSpec
from paperstack.records import JsonlWriter, read_jsonl

__all__ = ["collect", "export_sft"]


def collect(
    paths: Sequence[str | Path],
    ops: list[OperatorSpec],
    time_limit: float,
    out: str | Path,
    *,
    states: int = 20,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> int:
    """Oracle records for up to ``states`` states per instance into JSONL ``out``."""
    n = 0
    with JsonlWriter(out, fsync=False) as writer:
        for j, path in enumerate(paths):
            cfg = LnsConfig(time_limit, seed=seed + j)
            s = _Search(path, ops, cfg, time.perf_counter())
            try:
                n = _label(s, len(ops), cfg, states, n, path, writer)
            finally:
                s.solver.close()  # stops its freeing thread (reduced sub-MIPs)
            if log:
                log(f"{Path(path).name}: {s.iteration} oracle states")
    return n


def _label(
    s: _Search, n_ops: int, cfg: LnsConfig, states: int, n: int, path: Any, writer: Any
) -> int:
    """Label up to ``states`` states of one instance's search; returns the running count."""
    s.start()
    if s.x is None:
        return n
    for _ in range(states):
        if s.now() >= cfg.time_limit - 0.05:
            break
        ctx = s.context()
        tau = min(cfg.tau, cfg.time_limit - s.now())
        fork_start = time.perf_counter()
        results = []
        for o in range(n_ops):
            res, sec = s.try_op(o, tau)
            results.append((res, sec))
        rewards = [
            (s.f - (r.obj if r.x is not None else s.f)) / max(abs(s.f), 1e-9) / max(sec, 1e-3)
            for r, sec in results
        ]
        best = int(np.argmax(rewards))
        spent = time.perf_counter() - fork_start
        s.uncharged += spent - results[best][1]
        s.apply(best, results[best][0], results[best][1], tau)
        writer.write(
            {
                "instance": Path(path).name,
                "state": n,
                "context": context_to_json(ctx),
                "features": ctx.features().tolist(),
                "prompt": ctx.prompt(),
                "text": ctx.text(),
                "rewards": rewards,
                "label": best,
            }
        )
        n += 1
    return n


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Oracle records; ``features`` and ``prompt`` are rebuilt from ``context`` where a record
    carries only that (the shipped records do, to stay small)."""
    from pall_lns.context import context_from_json

    if Path(path).is_dir():
        raise PallError(f"{path}: is a directory, not a JSONL file")
    records = read_jsonl(path)
    for i, r in enumerate(records):
        if "context" in r and ("features" not in r or "prompt" not in r):
            try:
                ctx = context_from_json(r["context"])
            except (TypeError, ValueError) as exc:
                raise PallError(f"{path}: line {i + 1}: field 'context': {exc}") from None
            r.setdefault("features", ctx.features().tolist())
            r.setdefault("prompt", ctx.prompt())
        for key in ("features", "rewards", "label"):
            if key not in r:
                raise PallError(f"{path}: line {i + 1}: field {key!r} is missing")
    if not records:
        raise PallError(f"{path}: no oracle records")
    return records


def export_sft(data: str | Path, out: str | Path) -> int:
    """(context, best operator) pairs as ``{"messages": [user prompt, assistant OP=<id>]}``."""
    records = load_records(data)
    with JsonlWriter(out, fsync=False) as writer:
        for r in records:
            writer.write(
                {
                    "messages": [
                        {"role": "user", "content": r["prompt"]},
                        {"role": "assistant", "content": f"OP={r['label']}"},
                    ]
                }
            )
    return len(records)
