"""The analysis benchmark: the vectorised transition analysis against the per-debate loop.

``debate-ledger bench`` simulates ``--debates`` debates (3 agents, rounds 0..2, 4 options),
checks that the vectorised analysis and the plain-Python oracle agree on every field, and times
both ``--repeats`` times, alternating, in the same process. Each repeat gives one speed-up ratio
(loop time / vectorised time, the loop timed on a slice of at most 5,000 debates and scaled per
debate), so the claim is judged on ratios paired within a repeat, never on absolute times of a
shared machine.
"""

from __future__ import annotations

import time

import numpy as np

from debate_ledger.families import Profile, simulate
from debate_ledger.ledger import reference_transitions, transitions
from paperstack.contract import Report, Run
from paperstack.errors import PaperstackError
from paperstack.records import Claim, Row

__all__ = ["run_bench"]

LOOP_SLICE = 5_000
FIELDS = ("collapse", "correction", "onset", "flip_round", "flip_agent")


def run_bench(run: Run) -> Report:
    debates = int(run.args.debates)
    repeats = min(3, int(run.args.repeats)) if run.quick else int(run.args.repeats)
    if run.quick:
        debates = min(debates, 20_000)
    if debates < 100:
        raise PaperstackError(f"--debates {debates}: needs at least 100")
    rng = np.random.default_rng(run.seed)
    fam = Profile("bench", accuracy=0.6, conformity=0.5, parse_fail=0.02)
    answers = simulate(fam, debates, 3, 2, 4, rng)
    gold = np.zeros(debates, dtype=np.int64)
    n_ref = min(debates, LOOP_SLICE)
    tr = transitions(answers, gold)
    ref = reference_transitions(answers[:n_ref], gold[:n_ref])
    for key in FIELDS:
        if not np.array_equal(np.asarray(getattr(tr, key))[:n_ref].astype(int), ref[key]):
            raise PaperstackError(f"vectorised and reference analyses disagree on {key}")
    speedup: dict[int, float] = {}
    vec_rate: dict[int, float] = {}
    loop_rate: dict[int, float] = {}
    with run.progress(repeats, "bench repeats") as bar:
        for rep in range(repeats):
            t0 = time.perf_counter()
            transitions(answers, gold)
            t_vec = time.perf_counter() - t0
            t0 = time.perf_counter()
            reference_transitions(answers[:n_ref], gold[:n_ref])
            t_loop = (time.perf_counter() - t0) * debates / n_ref
            speedup[rep] = t_loop / t_vec
            vec_rate[rep] = debates / t_vec
            loop_rate[rep] = debates / t_loop
            bar.advance(speedup=speedup[rep])
    rows = [
        Row.from_seeds("vectorised", "debates_per_s", vec_rate, unit="debates/s"),
        Row.from_seeds("per-debate-loop", "debates_per_s", loop_rate, unit="debates/s"),
        Row.from_seeds("vectorised", "speedup_vs_loop", speedup, unit="x"),
    ]
    claims = [
        Claim.compare(
            "vectorised_faster",
            "The vectorised transition analysis is faster than the per-debate loop (speed-up "
            "ratio > 1, paired within each repeat).",
            rows,
            ("vectorised", "speedup_vs_loop"),
            "gt",
            1.0,
        )
    ]
    intro = (
        f"{debates:,} simulated debates (3 agents, rounds 0..2), {repeats} alternating repeats "
        f"in one process; the loop is timed on {n_ref:,} debates and scaled per debate. Both "
        "analyses agree on every field before timing. Timings from a shared CPU: read the "
        "ratios, not the absolute rates."
    )
    mean = float(np.mean(list(speedup.values())))
    return Report(
        rows,
        claims,
        title="debate-ledger: bench",
        intro=intro,
        config={"debates": debates, "repeats": repeats, "loop_slice": n_ref},
        summary=f"{mean:.0f}x the per-debate loop",
    )
