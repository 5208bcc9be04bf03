"""Validation probe for the real-model arm: can RA^2 reach the forget level on SmolLM2 above
the declared learning-rate grid?

The declared `demo --real` (grid 1e-4, 3e-4, 1e-3 for every method) found RA^2 never below
forget accuracy 0.8 on validation seed 1000, where RMU reached 0.2 at 3e-4. RA^2's loss pulls
layer-l states toward real retain states (a short distance), RMU's toward a random vector of
norm 250, so one absolute grid may sit below RA^2's scale. This probe runs RA^2 at larger
learning rates on the **validation half** of the countries (`country_split()[0]`, never
reported) and a validation seed, with the arm's own splits, budget and forget checks, and
writes what it measured. It is not a reported run and judges no claim.

    python benchmarks/real_ra2_strength_probe.py --out benchmarks/validation/real_ra2_strength

``--attract value --lrs 1e-4,3e-4,1e-3`` (2026-12-06, after the reported run): RA^2 attracting
only the positions that predict the capital's tokens (the model's own sentence carries "The
capital of France is" as well), on the declared grid.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import torch
from ra2_unlearn.demo import _ForgetCheck
from ra2_unlearn.modules import default_layer
from ra2_unlearn.real import (
    REAL,
    country_split,
    known_examples,
    make_splits,
    real_examples,
    real_scores,
)
from ra2_unlearn.trainer import load_model, unlearn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="output stem (.json and .md)")
    ap.add_argument("--lrs", default="3e-3,1e-2", help="RA^2 learning rates, weakest first")
    ap.add_argument("--seed", type=int, default=1001, help="validation training seed")
    ap.add_argument(
        "--attract",
        choices=("carrying", "value"),
        default="carrying",
        help="RA^2's attracted positions (value: only those before the capital)",
    )
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    torch.manual_seed(0)
    started = time.perf_counter()
    model, tok = load_model(REAL.model, "cpu")
    settings = replace(REAL, layer=default_layer(model))
    validation, _ = country_split()
    known, _ = known_examples(model, tok, real_examples(validation))
    splits = make_splits(known, settings.n_forget, settings.n_retain, settings.split_seed)
    results = []
    for lr in (float(x) for x in args.lrs.split(",")):
        check = _ForgetCheck(tok, splits.forget, settings.eval_every, settings.forget_target,
                             score=real_scores)  # fmt: skip
        t0 = time.perf_counter()
        config = replace(settings.config("ra2"), attract=args.attract)
        trained = unlearn(model, tok, splits.forget, splits.retain, config,
                          steps=settings.steps, lr=lr, batch_size=settings.batch_size,
                          seed=args.seed, device="cpu", callbacks=[check]).model  # fmt: skip
        adjacent = real_scores(trained, tok, splits.adjacent).accuracy
        retain = real_scores(trained, tok, splits.retain_eval).accuracy
        results.append({"lr": lr, "checks": check.checks, "adjacent_acc": adjacent,
                        "retain_acc": retain, "seconds": time.perf_counter() - t0})  # fmt: skip
        print(json.dumps(results[-1]), flush=True)
        del trained
        if check.checks and check.checks[-1][1] <= settings.forget_target:
            break
    record = {
        "what": "RA^2 on SmolLM2, validation half of the countries, above the declared grid",
        "seed": args.seed,
        "attract": args.attract,
        "countries_forgotten": list(splits.forget_entities),
        "sizes": {
            "forget": len(splits.forget),
            "adjacent": len(splits.adjacent),
            "retain_eval": len(splits.retain_eval),
        },
        "budget": {
            "steps": settings.steps,
            "batch_size": settings.batch_size,
            "eval_every": settings.eval_every,
            "target": settings.forget_target,
        },
        "runs": results,
        "wall_seconds": time.perf_counter() - started,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    lines = [
        "# RA^2 above the declared grid on SmolLM2 (validation probe, not reported)",
        "",
        f"Validation half, seed {args.seed}, attract={args.attract}; forget "
        f"{len(splits.forget)} capitals "
        f"({', '.join(splits.forget_entities)}), adjacent {len(splits.adjacent)}, retain-eval "
        f"{len(splits.retain_eval)}; batch {settings.batch_size}, at most {settings.steps} "
        f"steps, forget checked every {settings.eval_every}.",
        "",
        "| lr | forget accuracy at each check (step: acc) | adjacent | retain | s |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        checks = ", ".join(f"{s}: {a:.2f}" for s, a in r["checks"])
        lines.append(f"| {r['lr']:g} | {checks} | {r['adjacent_acc']:.3f} | "
                     f"{r['retain_acc']:.3f} | {r['seconds']:.0f} |")  # fmt: skip
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
