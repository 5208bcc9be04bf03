"""A measurement, not a claim: every selection method on text demonstrations for a real (tiny,
trained) transformers model.

The model is paperstack.tiny's cached ``tiny`` Llama trained 1000 steps on 2-digit addition
(reversed, padded: ``"240+713="`` -> ``"9530"``). Each of ``--queries`` test problems gets a pool
of ``--pool`` solved training problems as chat-formatted demonstrations; every method of
``corrective_context.baselines.METHODS`` picks up to ``--budget`` of them through
``select_items``; the model then reads the chosen demonstrations before the query. Per query:
the squared error ``‖ŷ - y*‖²`` and the log-probability of the answer's first token (answer
probability space), and, from ``measure``, the regime of every single demonstration's
correction. Rows are per query (``Row.from_items``); there are no claims: the design (model,
task, sizes, budget) was fixed before the run and nothing was tuned on it.

    python benchmarks/text_methods.py --out ../../reports/corrective-context/text-methods

Needs the ``embed`` extra (top-k and DPP use MiniLM). CPU, one thread.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--pool", type=int, default=8)
    p.add_argument("--budget", type=int, default=2)
    args = p.parse_args()

    import numpy as np
    import torch
    from corrective_context import SelectorConfig, __version__
    from corrective_context.baselines import METHODS
    from corrective_context.measure import measure, select_items

    from paperstack import tiny
    from paperstack.progress import quiet_libraries
    from paperstack.records import Manifest, Results, Row, atomic_write, write_results
    from paperstack.tasks import Addition

    quiet_libraries()
    torch.set_num_threads(1)
    model, tokenizer = tiny.pretrained("tiny", ("addition",), steps=1000, seed=0, progress=False)
    task = Addition()
    queries = task.generate(args.queries, seed=0, split="test")
    demos = task.generate(args.queries * args.pool, seed=1, split="train")
    bos = tokenizer.bos_token or ""

    def chat(prompt: str, answer: str | None = None) -> str:
        turns = [{"role": "user", "content": prompt}]
        if answer is not None:
            turns.append({"role": "assistant", "content": answer})
        text = tokenizer.apply_chat_template(
            turns, add_generation_prompt=answer is None, tokenize=False
        )
        return text[len(bos) :] if bos and text.startswith(bos) else text  # measure adds BOS

    config = SelectorConfig(budget=args.budget)
    per: dict[str, dict[str, dict[int, float]]] = {}
    regimes = {"under": 0, "proper": 0, "over": 0}
    sizes: dict[str, list[int]] = {m: [] for m in METHODS}
    start = time.perf_counter()
    for q, query in enumerate(queries):
        pool = demos[q * args.pool : (q + 1) * args.pool]
        texts = [chat(d.prompt, d.answer) for d in pool]
        inputs = [chat(d.prompt) for d in pool]
        answers = [d.answer for d in pool]
        prompt = chat(query.prompt)
        single = measure(model, tokenizer, prompt, texts, query.answer)
        for item in single.items:
            regimes[item.probability.regime] += 1
        base = single.items[0].probability
        per.setdefault("no-context", {}).setdefault("sq_error", {})[q] = base.error_norm**2
        per["no-context"].setdefault("answer_logprob", {})[q] = single.base_logprob
        for method in METHODS:
            sel = select_items(model, tokenizer, prompt, texts, inputs, answers,
                               method=method, config=config, seed=q)  # fmt: skip
            sizes[method].append(len(sel.chosen))
            if sel.chosen:
                context = "\n".join(texts[i] for i in sel.chosen)
                c = measure(model, tokenizer, prompt, [context], query.answer).items[0]
                sq, lp = c.probability.error_after**2, c.answer_logprob
            else:
                sq, lp = base.error_norm**2, single.base_logprob
            per.setdefault(method, {}).setdefault("sq_error", {})[q] = sq
            per[method].setdefault("answer_logprob", {})[q] = lp
    seconds = time.perf_counter() - start

    rows = [
        Row.from_items(system, metric, values, split="addition-icl")
        for system, metrics in per.items()
        for metric, values in metrics.items()
    ]
    n = sum(regimes.values())
    rows += [
        Row.proportion("single-demonstration", f"share_{r}", k, n, split="addition-icl")
        for r, k in regimes.items()
    ]
    record = tiny.training_record(tiny.pretrained_path("tiny", ("addition",), 1000, 0))
    manifest = Manifest.collect(
        "corrective-context",
        __version__,
        seed=0,
        config={
            "model": "paperstack.tiny tiny preset, addition, 1000 steps, seed 0",
            "model_final_loss": record.get("final_loss"),
            "task": "addition (2 digits, reversed, padded)",
            "queries": args.queries,
            "pool": args.pool,
            "budget": args.budget,
            "mean_chosen": {m: float(np.mean(s)) for m, s in sizes.items()},
            "seconds": seconds,
        },
    )
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(args.out / "results.json", Results(manifest=manifest.finish(), rows=rows))
    lines = [
        "| system | squared error | answer log-prob | items |",
        "|---|---|---|---|",
    ]
    for system in per:
        sq = next(r for r in rows if r.system == system and r.metric == "sq_error")
        lp = next(r for r in rows if r.system == system and r.metric == "answer_logprob")
        items = 0.0 if system == "no-context" else float(np.mean(sizes[system]))
        lines.append(
            f"| {system} | {sq.value:.3g} [{sq.ci95[0]:.3g}, {sq.ci95[1]:.3g}] | "  # type: ignore[index]
            f"{lp.value:.3g} [{lp.ci95[0]:.3g}, {lp.ci95[1]:.3g}] | {items:.1f} |"  # type: ignore[index]
        )
    shares = ", ".join(f"{r} {k / n:.2f}" for r, k in regimes.items())
    lines.append(f"\nSingle-demonstration regimes ({n} demonstrations): {shares}.")
    lines.append(f"{args.queries} queries, {seconds:.0f} s on a shared 2-core CPU.")
    atomic_write(args.out / "table.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
