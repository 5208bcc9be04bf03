"""``orchestra bench``: the orchestrator's overhead per round, on :mod:`paperstack.bench`.

What a round costs with the learned orchestrator against the same round without it: the
baseline ``model-call`` is one call of a tiny local transformers model (the core's ``micro``);
``model-call+orchestrator`` is the same call followed by what the method adds per round,
embedding the ``N`` outputs (MiniLM, fresh texts every call so no cache hit) and the policy's
forward pass that plans the next round. Both are timed by
:func:`paperstack.bench.compare_speed` (one warm-up round, then interleaved repeats in a
shuffled order, one torch thread, set and recorded). The overhead row
``orchestration_per_round_over_one_call`` is the **median** over repeats of
``t_with / t_without - 1`` with its order-statistic 95% interval (a monotone map of the
per-repeat ratio, so the interval maps with it); ``speedup_vs_model-call`` is the same ratio
as the core reports it.

Correctness in the same run: the orchestrator acts after the model call and must not change
it, so the model's reply in the orchestrated round must be identical to the plain round's on
the same prompt and seed, and the policy must return one plan for the one observation; the
difference is the number of those that fail (0 required).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from paperstack.bench import compare_speed, median_ci, set_threads
from paperstack.contract import Report, Run
from paperstack.errors import PaperstackError
from paperstack.records import Claim, Row

__all__ = ["MIN_REPEATS", "N_AGENTS", "run_bench"]

#: Outputs embedded per round (the demo's largest swarm).
N_AGENTS = 8
#: Fewer than six repeats give no 95% order-statistic interval narrower than [min, max].
MIN_REPEATS = 6
THREADS = 1
BASELINE = "model-call"
METHOD = "model-call+orchestrator"


def _check(out: dict[str, Any], ref: dict[str, Any]) -> float:
    """Failures of what must agree: the same reply as the plain call, one plan (see module)."""
    bad = int(out.get("reply") != ref.get("reply"))
    return float(bad + int(out.get("plans", 1) != 1))


def _load_model(show_progress: bool) -> Any:
    from paperstack.llm import TransformersChat
    from paperstack.tiny import pretrained

    tiny_model, tokenizer = pretrained("micro", progress=show_progress)
    return TransformersChat(tiny_model, tokenizer)


def _load_embedder() -> Any:
    from paperstack.embed import Embedder

    return Embedder()


def run_bench(run: Run) -> Report:
    from orchestra_rl.entropy import spectral_entropy
    from orchestra_rl.orchestrator import LearnedOrchestrator
    from orchestra_rl.swarm import Observation
    from orchestra_rl.tasks import KINDS, instance_pool

    repeats = MIN_REPEATS if run.quick else int(run.args.rounds)
    if repeats < MIN_REPEATS:
        raise PaperstackError(
            f"--rounds {repeats}: needs at least {MIN_REPEATS} (a median's 95% interval)"
        )
    threads = set_threads(THREADS)
    model = _load_model(run.show_progress)
    embedder = _load_embedder()
    policy = LearnedOrchestrator(KINDS)
    policy.eval()
    n = N_AGENTS
    inst = instance_pool("addition", 1, "test", run.seed)[0]
    calls = itertools.count()

    def call() -> dict[str, Any]:
        return {"reply": model.generate([inst.prompt], max_new_tokens=16, seed=run.seed)[0][0]}

    def orchestrated() -> dict[str, Any]:
        out = call()
        r = next(calls)
        outputs = [f"{out['reply']} #{r}:{i}" for i in range(n)]  # distinct: no cache hits
        vectors = embedder.encode(outputs)
        obs = Observation(
            inst, 1, 4, 3 * n, 2 * n, list(outputs), [str(i % 3) for i in range(n)],
            [0.5] * n, float(spectral_entropy(vectors)),
        )  # fmt: skip
        policy.begin([], seed=r)
        out["plans"] = len(policy.plan([obs], [0]))
        return out

    run.log(f"timing {repeats} interleaved rounds with and without the orchestrator (N = {n})")
    systems = {BASELINE: call, METHOD: orchestrated}
    cmp = compare_speed(systems, baseline=BASELINE, repeats=repeats, warmup=1, check=_check,
                        tolerance=0.0, seed=run.seed, threads=threads)  # fmt: skip
    rows = cmp.rows()
    overhead = [1.0 / r - 1.0 for r in cmp.ratios(METHOD)]  # t_with / t_without - 1
    med, ci = median_ci(overhead)
    rows.append(Row(system="orchestration_per_round_over_one_call", metric="time_ratio",
                    value=med, ci95=ci, n=len(overhead)))  # fmt: skip
    claims: list[Claim] = [cmp.correctness_claim(METHOD, rows, id="orchestrator_keeps_the_call")]
    assert math.isfinite(med)
    kept = "unchanged" if cmp.matches(METHOD) else "CHANGED"
    summary = (
        f"one orchestration round for N = {n} (MiniLM on {n} outputs + policy) adds "
        f"{med:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}] one tiny-model call (median of {repeats} "
        f"interleaved repeats); the call's reply {kept}"
    )
    intro = (
        "paperstack.bench: one warm-up round, then "
        f"{repeats} interleaved repeats of a round without (one call of the core's `micro` "
        f"tiny model) and with the orchestrator (the same call, then MiniLM on N = {n} fresh "
        f"outputs and the policy's plan), {threads} torch thread(s), shuffled order; the "
        "overhead is the median of per-repeat t_with / t_without - 1 with its order-statistic "
        "95% interval. Checked in the same run: the orchestrated round's reply is identical to "
        "the plain call's and the policy returns one plan. The micro model is far cheaper than "
        "any real LLM call, so against a real model the fraction is small. Timings from a "
        "shared, loaded 2-core CPU."
    )
    return Report(
        rows,
        claims,
        intro=intro,
        summary=summary,
        config={"rounds": repeats, "n": n, "threads": threads, "timing": cmp.to_dict()},
    )
