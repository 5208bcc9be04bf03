"""Scoring cost: progress advantage (policy + reference passes) against a confidence baseline
(policy pass only), in one run, as a time ratio paired per repeat.

The method needs one extra forward pass of a model of the same size, so its cost should be
about twice the confidence pass, not more. Models have random weights (speed does not depend
on what the weights know): a ``paperstack.tiny`` preset on a CPU, or ``0.5b``, a Llama-style
model of Qwen2-0.5B's shape (24 layers, width 896, 14 query / 2 key-value heads, MLP 4864, a
151,936-token vocabulary), for a GPU. The character tokenizer only uses the first ids of that
vocabulary, which does not change the cost: every position still projects onto, and
log-softmaxes over, all 151,936 logits.
"""

from __future__ import annotations

import time
from typing import Any

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


def run_bench(run: Run) -> Report:
    import torch

    from paperstack import tiny
    from progress_advantage.scoring import LogRatioScorer

    args = run.args
    repeats = 2 if run.quick else args.repeats
    n = min(args.trajectories, 16) if run.quick else args.trajectories
    if not 1 <= args.steps <= 20:
        raise ProgressAdvantageError(f"--steps {args.steps}: must be 1..20 (solution lines)")
    if repeats < 2:
        raise ProgressAdvantageError(f"--repeats {repeats}: needs at least 2 (paired repeats)")
    if run.device == "cpu":
        torch.set_num_threads(1)
    tok = tiny.build_tokenizer(model_max_length=4096)
    policy = build_bench_model(args.shape, tok, run.seed).to(run.device)
    reference = build_bench_model(args.shape, tok, run.seed + 1).to(run.device)
    if run.device != "cpu":
        policy, reference = policy.to(torch.bfloat16), reference.to(torch.bfloat16)
    trajs = _trajectories(n, args.steps, run.seed)
    scorer = LogRatioScorer(policy, reference, tok, batch_size=64)
    tokens = sum(int(ts.step.size) for ts in scorer.score(trajs, with_reference=False))  # warm-up

    def sync() -> None:
        if run.device.startswith("cuda"):
            torch.cuda.synchronize()

    ratio: dict[int, float] = {}
    pa_rate: dict[int, float] = {}
    conf_rate: dict[int, float] = {}
    with run.progress(repeats, "bench repeats") as bar:
        for i in range(repeats):
            sync()
            t0 = time.perf_counter()
            scorer.score(trajs, with_reference=False)
            sync()
            t1 = time.perf_counter()
            scorer.score(trajs)
            sync()
            t2 = time.perf_counter()
            conf_rate[i] = tokens / (t1 - t0)
            pa_rate[i] = tokens / (t2 - t1)
            ratio[i] = (t2 - t1) / (t1 - t0)
            bar.advance()
    rows = [
        Row.from_seeds(CONF_SYSTEM, "tokens_per_s", conf_rate, unit="scored tok/s"),
        Row.from_seeds(PA_SYSTEM, "tokens_per_s", pa_rate, unit="scored tok/s"),
        Row(system=CONF_SYSTEM, metric="time_ratio", value=1.0, n=repeats),
        Row.from_seeds(PA_SYSTEM, "time_ratio", ratio, unit="x the confidence pass"),
    ]
    claims = [
        Claim.compare(
            "pa_cost_about_two_passes",
            "Scoring with progress advantage costs at most about twice a single-model "
            "confidence pass (time ratio <= 2.25, paired over repeats).",
            rows,
            (PA_SYSTEM, "time_ratio"),
            "le",
            2.25,
        )
    ]
    summary = (
        f"{rows[3].value:.2f}x the confidence pass's time ({tokens} scored tokens, "
        f"{repeats} repeats, shape {args.shape}, {run.device})"
    )
    intro = (
        f"Scoring cost on `{args.shape}`-shaped random-weight models ({run.device}): {n} "
        f"arithmetic solutions of {args.steps} lines ({tokens} scored tokens), the confidence "
        "pass (policy only) and progress advantage (policy + reference) timed back to back in "
        f"each of {repeats} repeats; the ratio is paired per repeat."
        + ("" if run.device != "cpu" else " CPU, one torch thread, on a shared 2-core machine.")
    )
    config = {"shape": args.shape, "trajectories": n, "repeats": repeats, "steps": args.steps}
    return Report(rows, claims, intro=intro, config=config, summary=summary)
