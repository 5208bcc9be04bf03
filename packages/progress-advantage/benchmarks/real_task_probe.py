"""Find a task variant SmolLM2-135M-Instruct solves sometimes at temperature 1 (``demo --real``).

    python benchmarks/real_task_probe.py --out DIR [--variants a,b] [--problems 16] [--k 16]

VALIDATION problems only (seed 100, never a reported seed). For each variant of
:class:`progress_advantage.toy.InstructedArithmetic` (operations, operand range, prompt) it
samples ``k`` completions per problem from the model used as it is, at temperature 1 (the
reference the theorem needs), batched through ``TransformersChat``, and records per-problem
success counts, the pooled success rate with a problem-bootstrap 95% interval, the share of
problems whose success rate lies in [0.1, 0.9] (where RL has signal) with its Wilson interval,
the share of completions in the step format, and the wall time. Writes ``probe.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
from progress_advantage.toy import REAL_VARIANTS, instructed_task

from paperstack import tiny
from paperstack.checkpoint import load_pretrained
from paperstack.llm import TransformersChat, prepare_tokenizer


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    z, p = 1.96, k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--variants", default=",".join(REAL_VARIANTS))
    ap.add_argument("--problems", type=int, default=16)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, tok = load_pretrained("smollm2-135m-instruct", tiny.load)
    prepare_tokenizer(tok, need_chat_template=True, name="smollm2", chat_template="fallback")
    chat = TransformersChat(model, tok, batch_size=args.batch_size, name="probe")
    out: dict[str, object] = {"seed": args.seed, "k": args.k, "problems": args.problems}
    for name in args.variants.split(","):
        task = instructed_task(name)
        # validation problems: the seed is never a reported one
        exs = task.generate(args.problems, seed=args.seed, split="test")
        t0 = time.perf_counter()
        samples = chat.generate(
            [task.messages(e) for e in exs],
            max_new_tokens=args.max_new_tokens,
            temperature=1.0,
            n=args.k,
            seed=args.seed,
        )
        wall = time.perf_counter() - t0
        pairs = list(zip(exs, samples, strict=True))
        wins = [sum(bool(task.verify(e, c)) for c in cs) for e, cs in pairs]
        fmt = [
            sum(task.final_answer(c) is not None and bool(task.check_steps(e, c)) for c in cs)
            for e, cs in zip(exs, samples, strict=False)
        ]
        rates = np.array(wins) / args.k
        rng = np.random.default_rng(0)
        boots = [rates[rng.integers(0, len(rates), len(rates))].mean() for _ in range(2000)]
        mid = int(((rates >= 0.1) & (rates <= 0.9)).sum())
        rec = {
            "prompt_example": exs[0].prompt,
            "sample_example": samples[0][:3],
            "wins_per_problem": wins,
            "success": float(rates.mean()),
            "success_ci95": [float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))],
            "problems_with_rate_in_0.1_0.9": mid,
            "share_in_0.1_0.9": mid / len(rates),
            "share_in_0.1_0.9_wilson95": list(wilson(mid, len(rates))),
            "in_format": sum(fmt) / (args.k * len(exs)),
            "wall_s": wall,
            "completions": args.k * len(exs),
        }
        out[name] = rec
        print(name, json.dumps({k: v for k, v in rec.items() if k != "sample_example"}), flush=True)
        print("  e.g.", repr(samples[0][0]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "probe.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
