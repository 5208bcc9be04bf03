"""Scoring cost: progress advantage (policy + reference passes) against a confidence baseline
(policy pass only), timed interleaved on :mod:`paperstack.bench`, with an output check.

The method needs one extra forward pass of a model of the same size, so its cost should be
about twice the confidence pass, not more. Models have random weights (speed does not depend
on what the weights know): a ``paperstack.tiny`` preset on a CPU, or ``0.5b``, a Llama-style
model of Qwen2-0.5B's shape (24 layers, width 896, 14 query / 2 key-value heads, MLP 4864, a
151,936-token vocabulary), for a GPU. The character tokenizer only uses the first ids of that
vocabulary, which does not change the cost: every position still projects onto, and
log-softmaxes over, all 151,936 logits.

Timing: :func:`paperstack.bench.compare_speed` warms both systems up, then runs ``repeats``
rounds that each score the same trajectories once with each system in a shuffled order; the
cost ratio of a round is ``t_pa / t_conf`` and the reported ``time_ratio`` is the **median** of
those ratios with its order-statistic 95% interval (the ``speedup_vs_confidence`` row is the
same thing the other way up). Threads are set (one on a CPU) and recorded.

Output check: the two systems legitimately differ (progress advantage adds the reference's
log-probabilities), so what must agree is stated instead: the policy pass inside progress
advantage is the confidence pass, so its per-token policy log-probabilities must be
**bit-identical** to the confidence system's on the same input, and every reference
log-probability it adds must be finite. :func:`output_difference` returns the largest policy
log-probability difference (``inf`` when a reference value is not finite), judged exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from paperstack.bench import repeats_for
from paperstack.contract import Report, Run
from paperstack.records import Claim, Row
from progress_advantage.errors import ProgressAdvantageError

__all__ = ["SHAPES", "build_bench_model", "run_bench"]

PA_SYSTEM = "progress-advantage (policy + reference)"
CONF_SYSTEM = "confidence (policy only)"

#: Model shapes beyond the tiny presets: Qwen2-0.5B's (config.json of Qwen/Qwen2-0.5B).
SHAPES: dict[str, dict[str, Any]] = {
    "0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "vocab_size": 151_936,
        "tie_word_embeddings": True,
    }
}


def build_bench_model(shape: str, tokenizer: Any, seed: int) -> Any:
    """A random-weight causal LM of ``shape`` (a tiny preset or a name in :data:`SHAPES`)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from paperstack import tiny

    if shape in tiny.PRESETS:
        return tiny.build_model(shape, tokenizer, seed)
    if shape not in SHAPES:
        known = ", ".join([*tiny.PRESETS, *SHAPES])
        raise ProgressAdvantageError(f"--shape {shape}: unknown; known: {known}")
    torch.manual_seed(seed)
    config = LlamaConfig(
        **SHAPES[shape],
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config).eval()


def _trajectories(n: int, steps: int, seed: int) -> list[Any]:
    """``n`` arithmetic solutions of ``steps`` lines (long chains, so the passes dominate)."""
    from paperstack import tasks
    from progress_advantage.trajectory import Trajectory

    task = tasks.get("arithmetic", min_ops=steps, max_ops=steps)
    return [
        Trajectory.from_lines(e.prompt, e.answer) for e in task.generate(n, seed=seed, split="test")
    ]


def output_difference(pa: Sequence[Any], conf: Sequence[Any]) -> float:
    """What must agree between the two systems' outputs (lists of ``TokenScores``): the largest
    absolute difference of the policy log-probabilities (0.0 when bit-identical), ``inf`` when
    a trajectory's scored tokens differ or a reference log-probability of ``pa`` is not finite
    (the added pass must produce a log-ratio on every scored token)."""
    import numpy as np

    if len(pa) != len(conf):
        return math.inf
    worst = 0.0
    for a, b in zip(pa, conf, strict=True):
        if a.policy_logp.shape != b.policy_logp.shape or not np.array_equal(a.step, b.step):
            return math.inf
        if not np.all(np.isfinite(a.reference_logp)):
            return math.inf
        if a.policy_logp.size:
            worst = max(worst, float(np.max(np.abs(a.policy_logp - b.policy_logp))))
    return worst


def run_bench(run: Run) -> Report:
    import torch

    from paperstack import tiny
    from paperstack.bench import compare_speed, median_ci, set_threads
    from progress_advantage.scoring import LogRatioScorer

    args = run.args
    repeats = repeats_for(run, default=9, quick=6)
    n = min(args.trajectories, 16) if run.quick else args.trajectories
    if not 1 <= args.steps <= 20:
        raise ProgressAdvantageError(f"--steps {args.steps}: must be 1..20 (solution lines)")
    if repeats < 2:
        raise ProgressAdvantageError(f"--repeats {repeats}: needs at least 2 (paired repeats)")
    # One thread on a CPU: the shared machine's second core would otherwise be contended.
    threads = set_threads(1) if run.device == "cpu" else None
    tok = tiny.build_tokenizer(model_max_length=4096)
    policy = build_bench_model(args.shape, tok, run.seed).to(run.device)
    reference = build_bench_model(args.shape, tok, run.seed + 1).to(run.device)
    if run.device != "cpu":
        policy, reference = policy.to(torch.bfloat16), reference.to(torch.bfloat16)
    trajs = _trajectories(n, args.steps, run.seed)
    scorer = LogRatioScorer(policy, reference, tok, batch_size=64)
    tokens = sum(int(ts.step.size) for ts in scorer.score(trajs, with_reference=False))

    def sync() -> None:
        if run.device.startswith("cuda"):
            torch.cuda.synchronize()

    with run.progress(1, "bench (warm-up + interleaved repeats)") as bar:
        cmp = compare_speed(
            {
                CONF_SYSTEM: lambda: scorer.score(trajs, with_reference=False),
                PA_SYSTEM: lambda: scorer.score(trajs),
            },
            baseline=CONF_SYSTEM,
            repeats=repeats,
            warmup=1,
            check=output_difference,
            tolerance=0.0,
            sync=sync,
            seed=run.seed,
        )
        bar.advance()
    rows = cmp.rows()
    cost = [s / b for s, b in zip(cmp.times[PA_SYSTEM], cmp.times[CONF_SYSTEM], strict=True)]
    med, (lo, hi) = median_ci(cost)
    rows.append(Row(system=PA_SYSTEM, metric="time_ratio", value=med, ci95=(lo, hi),
                    n=len(cost), unit="x the confidence pass (median)"))  # fmt: skip
    for name in (CONF_SYSTEM, PA_SYSTEM):
        rate, (rlo, rhi) = median_ci([tokens / t for t in cmp.times[name]])
        rows.append(Row(system=name, metric="tokens_per_s", value=rate, ci95=(rlo, rhi),
                        n=len(cost), unit="scored tok/s (median)"))  # fmt: skip
    claims = [
        Claim.compare(
            "pa_cost_about_two_passes",
            "Scoring with progress advantage costs at most about twice a single-model "
            "confidence pass (median per-repeat time ratio <= 2.25, interleaved repeats).",
            rows,
            (PA_SYSTEM, "time_ratio"),
            "le",
            2.25,
        ),
        cmp.correctness_claim(PA_SYSTEM, rows, id="pa_policy_pass_matches_confidence"),
    ]
    summary = (
        f"{med:.2f}x [{lo:.2f}, {hi:.2f}] the confidence pass's time (median of {len(cost)} "
        f"interleaved repeats, {tokens} scored tokens, shape {args.shape}, {run.device}); "
        f"policy log-probs {'bit-identical' if cmp.matches(PA_SYSTEM) else 'DIFFER'}"
    )
    intro = (
        f"Scoring cost on `{args.shape}`-shaped random-weight models ({run.device}): {n} "
        f"arithmetic solutions of {args.steps} lines ({tokens} scored tokens), the confidence "
        "pass (policy only) and progress advantage (policy + reference) warmed up, then timed "
        f"interleaved (shuffled order) in each of {len(cost)} repeats; `time_ratio` is the median "
        "of the per-repeat ratios with its order-statistic 95% interval. Output check in the "
        "same run: the policy log-probabilities inside progress advantage must be bit-identical "
        "to the confidence pass's, and every added reference log-probability finite."
        + ("" if run.device != "cpu" else
           f" CPU, {threads} torch thread, on a shared 2-core machine loaded by other jobs.")
    )  # fmt: skip
    config = {"shape": args.shape, "trajectories": n, "repeats": repeats, "steps": args.steps,
              "threads": threads, "timing": cmp.to_dict()}  # fmt: skip
    return Report(rows, claims, intro=intro, config=config, summary=summary)
