"""``corrective-context``: the command line of corrective-context.

- ``corrective-context demo --out DIR``: the analytic linear-attention setting and a trained
  in-context learner (:mod:`corrective_context.demo`): the premise (the most similar items can
  raise the error), then the theory's regime predictions, over-correction, and the
  theory-guided selector against random, top-k similarity, BM25, DPP and all items, per seed.
  ``--quick`` is the one-minute version (fewer queries, a shorter training run).
- ``corrective-context bench --out DIR``: the selector's cost per query over top-k
  similarity's (a ratio, paired per query), in ``DIR/bench.json``.
- ``corrective-context measure --model DIR --query TEXT --answer TEXT --items FILE --out DIR``:
  correction vectors, their regimes and the attention mass of each item on any transformers
  causal LM (:mod:`corrective_context.measure`).
- ``corrective-context select --model DIR --query TEXT --items FILE.jsonl [--method NAME]
  --out DIR``: the theory-guided selector, or a baseline by name (top-k MiniLM similarity,
  BM25, DPP, random, all items), on a transformers model (demonstrations, passages, memories).

The common flags and flow (``--out``, ``--quick``, ``--seed``/``--seeds``, ``--no-progress``;
results written atomically, verdicts printed) come from :class:`paperstack.contract.ContractCLI`.
Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from corrective_context import __version__
from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    fraction,
    positive_int,
    seed_int,
)

cli = ContractCLI("corrective-context", "corrective-context", __version__, __doc__)

#: the over-correction claim: more than this share of top-8 contexts over-correct
OVER_SHARE = 0.1
#: the theory claim: the predicted regime agrees with the measured one in more than this share
AGREEMENT = 0.9


def _threads() -> None:
    import torch

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queries", type=positive_int, default=None,
                   help="test queries per seed (default 300, --quick 100)")  # fmt: skip
    p.add_argument("--steps", type=positive_int, default=None,
                   help="learner training steps (default 1000, --quick 600)")  # fmt: skip
    p.add_argument("--tolerance", type=fraction, default=None,
                   help="τ of a proper correction (default 0.5)")  # fmt: skip
    p.add_argument("--real", action="store_true",
                   help="the real-model arm instead: ICL demonstrations for single-digit "
                   "arithmetic on SmolLM2-135M-Instruct, regimes in value space "
                   "(corrective_context.real)")  # fmt: skip


def _configured(run: Run) -> Any:
    from corrective_context.demo import QUICK, DemoConfig

    config = QUICK if run.quick else DemoConfig()
    if run.args.queries is not None:
        config = dataclasses_replace(config, queries=run.args.queries)
    if run.args.steps is not None:
        config = dataclasses_replace(
            config, learner=dataclasses_replace(config.learner, steps=run.args.steps)
        )
    if run.args.tolerance is not None:
        if run.args.tolerance == 0:
            from corrective_context.errors import CorrectiveContextError

            raise CorrectiveContextError("--tolerance 0: must be > 0")
        config = dataclasses_replace(
            config, selector=dataclasses_replace(config.selector, tolerance=run.args.tolerance)
        )
    return config


def dataclasses_replace(obj: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **changes)


@cli.demo(arguments=_demo_arguments, seeds=3, quick_seeds=3, devices=("cpu",))
def demo(run: Run) -> Report:
    """The analytic setting and the trained learner (see :mod:`corrective_context.demo`), or
    with ``--real`` the real-model arm (:mod:`corrective_context.real`)."""
    if run.args.real:
        return real_demo(run)
    _threads()
    from corrective_context import demo as d
    from corrective_context.learner import trained_learner
    from paperstack.records import Claim, Row
    from paperstack.report import bar_chart

    config = _configured(run)
    small, large = f"top-{config.premise_small}", f"top-{config.premise_large}"
    analytic: dict[int, dict[str, float]] = {}
    learned: dict[int, dict[str, dict[str, float]]] = {}
    chosen_k: dict[int, dict[str, int]] = {}
    mass: dict[int, float] = {}
    records: dict[int, dict[str, float]] = {}
    soft: dict[int, dict[str, dict[str, float]]] = {}
    soft_records: dict[int, dict[str, float]] = {}
    with run.progress(3 * len(run.seeds), "seeds") as bar:
        for seed in run.seeds:
            analytic[seed] = d.analytic_agreement(seed, config)
            bar.advance()
            lc = dataclasses_replace(config.learner, seed=seed)
            model, records[seed] = trained_learner(lc)
            learned[seed], chosen_k[seed], mass[seed] = d.learner_seed(seed, config, model)
            bar.advance(loss=records[seed]["final_loss"])
            soft_model, soft_records[seed] = trained_learner(
                dataclasses_replace(lc, attention="softmax")
            )
            soft[seed] = d.softmax_seed(seed, config, soft_model)
            bar.advance(loss=soft_records[seed]["final_loss"])

    rows: list[Row] = []
    for metric in ("agreement", "share_under", "share_proper", "share_over"):
        rows.append(Row.from_seeds("linear-attention", metric,
                                   {s: analytic[s][metric] for s in run.seeds},
                                   split="analytic"))  # fmt: skip
    systems = list(learned[run.seeds[0]])
    for system in systems:
        for metric in ("sq_error", "over", "size"):
            rows.append(Row.from_seeds(system, metric,
                                       {s: learned[s][system][metric] for s in run.seeds},
                                       split="learner"))  # fmt: skip
    rows.append(Row.from_seeds("all-items", "attention_on_near", mass, split="learner"))
    for system in soft[run.seeds[0]]:
        for metric in ("sq_error", "over"):
            rows.append(Row.from_seeds(system, metric,
                                       {s: soft[s][system][metric] for s in run.seeds},
                                       split="softmax-learner"))  # fmt: skip

    def key(system: str, metric: str = "sq_error") -> tuple[str, str, str]:
        return (system, metric, "learner")

    premise = Claim.compare(
        "premise_similar_items_raise_error",
        f"premise: on the trained learner, the {config.premise_large} most similar items give "
        f"a higher squared error than the {config.premise_small} most similar ones: adding "
        "more of the most similar (most gap-corrective) items hurts on this toy",
        rows, key(large), "gt", key(small),
    )  # fmt: skip
    soft_premise = Claim.compare(
        "premise_softmax_similar_items_raise_error",
        f"premise on the softmax-attention learner (normalised attention, so aligned items "
        f"cannot add up by construction): the {config.premise_large} most similar items give "
        f"a higher squared error than the {config.premise_small} most similar ones",
        rows, (large, "sq_error", "softmax-learner"), "gt", (small, "sq_error", "softmax-learner"),
    )  # fmt: skip
    claims = [
        premise,
        soft_premise,
        Claim.compare(
            "overcorrection_observed_softmax",
            f"on the softmax-attention learner, more than {OVER_SHARE:.0%} of the contexts of "
            f"the {config.premise_large} most similar items over-correct",
            rows, (large, "over", "softmax-learner"), "gt", OVER_SHARE, requires=[soft_premise],
        ),
        Claim.compare(
            "theory_predicts_regime",
            "in the analytic linear-attention setting, the regime (under / proper / over) that "
            "the noise-free closed-form correction predicts equals the regime measured on noisy "
            f"labels in more than {AGREEMENT:.0%} of the cases",
            rows, ("linear-attention", "agreement", "analytic"), "gt", AGREEMENT,
            requires=[premise],
        ),
        Claim.compare(
            "overcorrection_observed",
            f"on the trained learner, more than {OVER_SHARE:.0%} of the contexts of the "
            f"{config.premise_large} most similar items over-correct (overshoot in magnitude or "
            "off the error axis)",
            rows, key(large, "over"), "gt", OVER_SHARE, requires=[premise],
        ),
        Claim.compare(
            "selector_beats_topk",
            "on the trained learner, the theory-guided selector's squared error is lower than "
            "top-k similarity's (k chosen on validation queries)",
            rows, key(d.SELECTOR), "lt", key("top-k"), requires=[premise],
        ),
        Claim.compare(
            "selector_beats_error_probe",
            "control: on the trained learner, the selector's squared error is lower than that "
            "of answering ŷ₀ - ê directly with no context (ê = the selector's own error "
            "estimate): the selection adds something beyond the error estimate",
            rows, key(d.SELECTOR), "lt", key(d.PROBE), requires=[premise],
        ),
        Claim.compare(
            "selector_beats_all_items",
            "on the trained learner, the theory-guided selector's squared error is lower than "
            "that of putting every candidate in the context",
            rows, key(d.SELECTOR), "lt", key("all-items"), requires=[premise],
        ),
    ]  # fmt: skip
    figures = [bar_chart(rows, "sq_error", run.out / "sq_error.png", split="learner")]
    ks = {n: sorted({chosen_k[s][n] for s in run.seeds}) for n in d.TUNED}
    intro = (
        f"Toy scale, CPU, seeds {', '.join(map(str, run.seeds))}. Analytic setting: "
        f"{config.analytic_cases} (query, random subset) cases per seed, η = {config.eta:.4g}, "
        f"d = {config.learner.d}, m = {config.learner.m}, label noise σ = "
        f"{config.learner.noise}. Trained learner: a {config.learner.layers}-layer "
        f"linear-attention transformer trained {config.learner.steps} steps per seed (final "
        "loss "
        + ", ".join(f"{records[s]['final_loss']:.3f}" for s in run.seeds)
        + "); the same run with softmax attention (final loss "
        + ", ".join(f"{soft_records[s]['final_loss']:.3f}" for s in run.seeds)
        + f"); {config.queries} test pools per seed of {config.pool} candidates "
        f"({config.near} near-duplicates of the query); each baseline's k chosen from "
        f"{list(config.ks)} on {config.val_queries} validation pools (chosen: {ks}); the "
        f"selector's budget is {config.selector.budget}, τ = {config.selector.tolerance}. "
        "BM25 is Okapi (k1 = 1.5, b = 0.75) over quantised coordinates, implemented in the "
        "package; top-k and DPP use cosine similarity of the inputs (the toy's items are "
        "vectors; MiniLM keys are for text items). Rows are per seed; comparisons are paired "
        "over seeds."
    )
    config_out: dict[str, Any] = {
        "queries": config.queries,
        "val_queries": config.val_queries,
        "analytic_cases": config.analytic_cases,
        "pool": config.pool,
        "near": config.near,
        "ks": list(config.ks),
        "eta": config.eta,
        "learner": dataclasses_asdict(config.learner),
        "selector": dataclasses_asdict(config.selector),
        "chosen_k": {str(s): chosen_k[s] for s in run.seeds},
        "learner_records": {str(s): records[s] for s in run.seeds},
        "softmax_learner_records": {str(s): soft_records[s] for s in run.seeds},
    }
    return Report(rows, claims, intro=intro, figures=figures, config=config_out)


#: the real arm's headroom: the no-context squared error of the expected answer exceeds this
HEADROOM = 1.0
#: the real arm's model: the paperstack.models preset (a folder also loads, as in the tests)
REAL_MODEL = "smollm2-135m-instruct"


def real_demo(run: Run) -> Report:
    """The real-model arm (:mod:`corrective_context.real`): rows per query, pooled over seeds."""
    from corrective_context import real
    from paperstack import tiny
    from paperstack.records import Claim, Row

    for flag in ("steps", "tolerance"):
        if getattr(run.args, flag) is not None:
            from corrective_context.errors import CorrectiveContextError

            raise CorrectiveContextError(f"--{flag}: not used by --real")
    config = real.REAL_QUICK if run.quick else real.RealConfig()
    if run.args.queries is not None:
        config = dataclasses_replace(config, queries=run.args.queries)
    name = REAL_MODEL
    model, tokenizer = tiny.load(name)
    lm = real.DigitModel(model, tokenizer, config.batch)
    per: dict[str, dict[str, float]] = {}
    with run.progress(len(run.seeds), "seeds") as bar:
        for seed in run.seeds:
            queries = real.sample_queries(seed, 2, config.queries, config.pool)
            for metric, values in real.run_queries(lm, queries, config, seed).items():
                for i, v in enumerate(values):
                    per.setdefault(metric, {})[f"{seed}:{i}"] = v
            bar.advance()
    systems = ["no-context", "random-1", "random-4", "all-items", real.SELECTOR, real.PROBE,
               "best_single"]  # fmt: skip
    rows = [Row.from_items(s, "sq_error", per[s], split="real") for s in systems]
    owner = {"selector_size": real.SELECTOR, "no_context_abs_error": "no-context"}
    for metric in ("single_over_share", "single_under_share", "single_over_share_logit",
                   "single_max_ratio", "selector_size", "no_context_abs_error"):  # fmt: skip
        system = owner.get(metric, "single-demonstration")
        rows.append(Row.from_items(system, metric, per[metric], split="real"))

    def key(system: str, metric: str = "sq_error") -> tuple[str, str, str]:
        return (system, metric, "real")

    headroom = Claim.compare(
        "real_headroom",
        f"headroom: with no context, the squared error of the model's expected answer exceeds "
        f"{HEADROOM:g} (the task is not already solved)",
        rows, key("no-context"), "gt", HEADROOM,
    )  # fmt: skip
    premise = Claim.compare(
        "real_premise_demonstrations_overcorrect",
        f"premise on the real model: more than {real.PREMISE_SHARE:.0%} of single "
        "demonstrations over-correct in value space (push the expected answer past the truth "
        "by more than τ of the error), mean over queries; the selector works in this space",
        rows, key("single-demonstration", "single_over_share"), "gt", real.PREMISE_SHARE,
        requires=[headroom],
    )  # fmt: skip
    premise_logit = Claim.compare(
        "real_premise_demonstrations_overcorrect_logit",
        f"premise in centred-logit space: more than {real.PREMISE_SHARE:.0%} of single "
        "demonstrations over-correct against the target margin "
        f"{real.LOGIT_MARGIN:.2f} (the right digit at probability 0.9), mean over queries",
        rows, key("single-demonstration", "single_over_share_logit"), "gt",
        real.PREMISE_SHARE, requires=[headroom],
    )  # fmt: skip
    claims = [headroom, premise, premise_logit] + [
        Claim.compare(
            f"real_selector_beats_{rhs.replace('-', '_')}",
            f"on the real model, the theory-guided selector's squared error is lower than "
            f"{what} (paired per query)",
            rows, key(real.SELECTOR), "lt", key(rhs), requires=[premise],
        )
        for rhs, what in (
            (real.PROBE, "the no-context error-probe control's (ŷ₀ - ê with the selector's own "
             "estimate): the selection adds something beyond the error estimate"),
            ("random-4", "that of 4 random demonstrations (the selector's budget)"),
            ("no-context", "the no-context error"),
        )
    ]  # fmt: skip
    n = len(run.seeds) * config.queries
    intro = (
        f"Real-model arm: {name}, in-context demonstrations for single-digit arithmetic "
        f"(110 problems: a + b and a - b with results 0-9), {config.queries} test queries per "
        f"seed for seeds {', '.join(map(str, run.seeds))} ({n} queries, rows per query, "
        f"comparisons paired over queries), pools of {config.pool} candidate demonstrations, "
        f"selector budget {config.budget}, τ = {config.tolerance}. Answer vector: the expected "
        "digit under the model's distribution over the ten digit tokens at the answer "
        "position (value space, where over-correction is possible); the centred-logit share "
        f"uses a target margin of {real.LOGIT_MARGIN:.2f} (p = 0.9). {lm.forwards} forward "
        "passes. Design fixed before the run (corrective_context.real)."
    )
    cfg = {"real": dataclasses_asdict(config), "model_name": name,
           "premise_share": real.PREMISE_SHARE, "headroom": HEADROOM}  # fmt: skip
    return Report(rows, claims, intro=intro, config=cfg)


def dataclasses_asdict(obj: Any) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(obj)


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queries", type=positive_int, default=100,
                   help="timed queries (default 100, --quick 20)")  # fmt: skip


@cli.bench(arguments=_bench_arguments, devices=("cpu",))
def bench(run: Run) -> Report:
    """Wall time of the selector per query over top-k similarity's, on the same pools (a
    ratio per query, so the comparison is paired)."""
    _threads()
    import numpy as np

    from corrective_context import demo as d
    from corrective_context.learner import trained_learner
    from paperstack.records import Row

    config = d.QUICK if run.quick else d.DemoConfig()
    queries = 20 if run.quick else run.args.queries
    model, _ = trained_learner(dataclasses_replace(config.learner, seed=run.seed))
    pools = d._pools(run.seed, 30, queries, config)
    rng = np.random.default_rng(run.seed)
    topk, selector = d.baseline("top-k", config.premise_large), d.corrective(model, config.selector)
    ratios: dict[int, float] = {}
    per_query: dict[str, dict[int, float]] = {"top-k": {}, d.SELECTOR: {}}
    for i, pool in enumerate(pools):
        t0 = time.perf_counter()
        topk(pool, rng)
        t1 = time.perf_counter()
        selector(pool, rng)
        t2 = time.perf_counter()
        per_query["top-k"][i] = t1 - t0
        per_query[d.SELECTOR][i] = t2 - t1
        ratios[i] = (t2 - t1) / max(t1 - t0, 1e-9)
    rows = [
        Row.from_items("top-k", "seconds_per_query", per_query["top-k"]),
        Row.from_items(d.SELECTOR, "seconds_per_query", per_query[d.SELECTOR]),
        Row.from_items(d.SELECTOR, "time_ratio_vs_topk", ratios),
    ]
    summary = (
        f"the selector takes {rows[2].value:.0f}x top-k similarity's time per query "
        f"({len(pools)} queries of {config.pool} candidates; shared 2-core CPU)"
    )
    return Report(rows, summary=summary, config={"queries": queries, "pool": config.pool})


def _measure_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True,
                   help="a local transformers causal-LM folder or hub id")  # fmt: skip
    p.add_argument("--query", required=True, help="the query text (the prompt's last piece)")
    p.add_argument("--answer", required=True, help="the ground-truth answer (its first token)")
    p.add_argument("--items", type=Path, required=True,
                   help="UTF-8 text file: one candidate item (demonstration, passage, memory) "
                   "per line")  # fmt: skip
    p.add_argument("--separator", default="\n", help="text after each item (default newline)")
    p.add_argument("--out", type=Path, required=True, help="folder for measurements.json")


def _read_lines(path: Path) -> list[tuple[int, str]]:
    """The non-blank lines of a UTF-8 file with their line numbers; an empty file is an empty
    candidate pool."""
    from corrective_context.errors import CorrectiveContextError

    if path.is_dir():
        raise CorrectiveContextError(f"--items {path}: is a directory, not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorrectiveContextError(f"--items {path}: no such file") from None
    except UnicodeDecodeError:
        raise CorrectiveContextError(f"--items {path}: not UTF-8 text") from None
    items = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not items:
        raise CorrectiveContextError(f"--items {path}: the candidate pool is empty (no lines)")
    return items


@cli.command("measure", "correction vectors of context items on a transformers model",
             _measure_arguments)  # fmt: skip
def measure_command(args: argparse.Namespace) -> int:
    """Each item's correction of the answer, its regime and attention mass (see
    :mod:`corrective_context.measure`), in ``OUT/measurements.json``."""
    from paperstack.progress import quiet_libraries

    quiet_libraries()  # before transformers is imported: no loading bars on stderr
    _threads()
    from corrective_context.measure import measure
    from paperstack import tiny
    from paperstack.records import atomic_write_json, output_dir

    items = [line for _, line in _read_lines(args.items)]
    with output_dir(args.out) as out:
        model, tokenizer = tiny.load(args.model)
        result = measure(model, tokenizer, args.query, items, args.answer, separator=args.separator)
        atomic_write_json(out / "measurements.json", {"model": str(args.model), **result.to_json()})
    for item in result.items:
        mass = "n/a" if item.attention_mass is None else f"{item.attention_mass:.3f}"
        print(f"item {item.index}: {item.probability.regime} (rho {item.probability.ratio:+.3g}, "
              f"omega {item.probability.off_axis:.3g}), attention {mass}")  # fmt: skip
    print(f"wrote {args.out / 'measurements.json'}")
    return 0


def _select_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True,
                   help="a local transformers causal-LM folder or hub id")  # fmt: skip
    p.add_argument("--query", required=True, help="the query text (the prompt's last piece)")
    p.add_argument("--items", type=Path, required=True,
                   help='JSONL of candidates: {"input": ..., "answer": ...[, "text": ...]} '
                   "(text defaults to input + answer); the baselines need only "
                   '{"text": ...}')  # fmt: skip
    p.add_argument("--method", default="corrective",
                   help="corrective (default), top-k (MiniLM), bm25, dpp (MiniLM), random, "
                   "all-items; top-k and dpp need corrective-context[embed]")  # fmt: skip
    p.add_argument("--budget", type=positive_int, default=8, help="at most this many items")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of --method random")
    p.add_argument("--separator", default="\n", help="text after each item (default newline)")
    p.add_argument("--out", type=Path, required=True, help="folder for selection.json")


def _read_candidates(path: Path, answers: bool = True) -> list[dict[str, str]]:
    """The candidates of a JSONL file; ``answers``: each needs ``input`` and ``answer`` (the
    corrective selector), else a ``text`` (or ``input`` + ``answer``) is enough. An empty file
    is an empty candidate pool."""
    from corrective_context.errors import CorrectiveContextError
    from paperstack.records import iter_user_jsonl

    rows = []
    lines = iter_user_jsonl(path, what="a JSONL file of candidates", error=CorrectiveContextError)
    for where, obj in lines:
        paired = isinstance(obj.get("input"), str) and isinstance(obj.get("answer"), str)
        if paired:
            text = obj.get("text", obj["input"] + obj["answer"])
            rows.append({"input": obj["input"], "answer": obj["answer"], "text": str(text)})
        elif answers:
            raise CorrectiveContextError(
                f"--items {where}: needs string fields 'input' and 'answer'"
            )
        elif isinstance(obj.get("text"), str):
            rows.append({"text": obj["text"]})
        else:
            raise CorrectiveContextError(
                f"--items {where}: needs a string field 'text' (or 'input' and 'answer')"
            )
    if not rows:
        raise CorrectiveContextError(f"--items {path}: the candidate pool is empty (no lines)")
    return rows


@cli.command("select", "theory-guided selection of demonstrations, passages or memories",
             _select_arguments)  # fmt: skip
def select_command(args: argparse.Namespace) -> int:
    """The selector on a transformers model (:func:`corrective_context.measure.select_items`):
    the chosen items, in prompt order, in ``OUT/selection.json``."""
    from paperstack.progress import quiet_libraries

    quiet_libraries()
    _threads()
    from corrective_context.baselines import check_method
    from corrective_context.measure import select_items
    from corrective_context.selector import SelectorConfig
    from paperstack import tiny
    from paperstack.records import atomic_write_json, output_dir

    method = check_method(args.method)
    corrective = method == "corrective"
    candidates = _read_candidates(args.items, answers=corrective)
    with output_dir(args.out) as out:
        model, tokenizer = tiny.load(args.model)
        sel = select_items(
            model, tokenizer, args.query, [c["text"] for c in candidates],
            [c["input"] for c in candidates] if corrective else None,
            [c["answer"] for c in candidates] if corrective else None,
            method=method, config=SelectorConfig(budget=args.budget), separator=args.separator,
            seed=args.seed,
        )  # fmt: skip
        atomic_write_json(out / "selection.json", {
            "model": str(args.model), "query": args.query, "method": method,
            "chosen": sel.chosen, "order": sel.order,
            "items": [candidates[i]["text"] for i in sel.chosen],
        })  # fmt: skip
    print(f"{method}: chose {len(sel.chosen)} of {len(candidates)} items: {sel.chosen}")
    print(f"wrote {args.out / 'selection.json'}")
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
