"""The reproduction: (a) the tabular MDP, (b) arithmetic with a tiny LM; rows, claims, report.

Rows are pooled over seeds: best-of-N and attribution accuracies as hits over all groups or
failed trajectories of all seeds (Wilson 95% intervals), AUROC and Spearman as the mean over
seeds (Student-t intervals over seeds, ``n`` = the items behind each seed's number, summed).
Claims compare rows with :meth:`paperstack.records.Claim.compare`; "best confidence baseline"
is the strongest of the three confidence baselines on each metric (the claims test progress
advantage against the best of them, not an average).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from paperstack.records import Claim, Manifest, Results, Row, prepare_out_dir, write_results
from paperstack.stats import mean_ci, wilson_ci
from progress_advantage import __version__
from progress_advantage.experiment import (
    CONFIDENCE,
    PA,
    ArithmeticSetup,
    MDPSetup,
    SeedOutcome,
    run_arithmetic,
    run_mdp,
)
from progress_advantage.policy import GRPOSettings

__all__ = ["DemoConfig", "build_claims", "build_rows", "run_demo"]

DIST = "progress-advantage"
BEST_CONF = "best confidence baseline"


@dataclass(frozen=True)
class DemoConfig:
    """Seeds and sizes of the full demo; :meth:`quick` is the CI smoke version."""

    seeds: tuple[int, ...] = (0, 1, 2)
    mdp: MDPSetup = field(default_factory=MDPSetup)
    arithmetic: ArithmeticSetup = field(default_factory=ArithmeticSetup)
    arithmetic_seeds: tuple[int, ...] = (0, 1, 2)

    @classmethod
    def quick(cls) -> DemoConfig:
        """Seconds instead of minutes: micro model trained here (solves little), few GRPO steps."""
        from paperstack import tiny

        return cls(
            mdp=MDPSetup(iterations=300, groups=100),
            arithmetic=ArithmeticSetup(
                preset=tiny.QUICK_PRESET,
                sft_steps=100,
                cached=False,
                grpo=replace(
                    GRPOSettings(),
                    steps=2,
                    prompts_per_step=2,
                    train_prompts=16,
                    max_completion_length=32,
                ),
                n_test=16,
                n_orm_prompts=8,
                n_reward_prompts=8,
                max_new_tokens=32,
            ),
            arithmetic_seeds=(0,),
        )


def _pooled(
    rows: list[Row], split: str, metric: str, per_seed: Sequence[dict[str, tuple[float, int]]]
) -> None:
    for name in per_seed[0]:
        hits = sum(s[name][0] for s in per_seed)
        n = sum(s[name][1] for s in per_seed)
        if n == 0:
            continue
        value = hits / n
        ci = wilson_ci(round(hits), n)
        rows.append(Row(system=name, metric=metric, value=value, ci95=ci, n=n, split=split))


def _averaged(
    rows: list[Row], split: str, metric: str, per_seed: Sequence[dict[str, tuple[float, int]]]
) -> None:
    for name in per_seed[0]:
        mean, ci = mean_ci([s[name][0] for s in per_seed])
        n = sum(s[name][1] for s in per_seed)
        rows.append(Row(system=name, metric=metric, value=mean, ci95=ci, n=n, split=split))


def _best_confidence(rows: list[Row], split: str, metric: str) -> None:
    cands = [r for r in rows if r.split == split and r.metric == metric and r.system in CONFIDENCE]
    if cands:
        best = max(cands, key=lambda r: r.value)
        rows.append(best.model_copy(update={"system": BEST_CONF}))


def build_rows(mdp: Sequence[SeedOutcome], arith: Sequence[SeedOutcome]) -> list[Row]:
    """Rows from per-seed outcomes of both experiments."""
    rows: list[Row] = []
    if mdp:
        sp = [s.scalars["spearman_vs_exact"] for s in mdp]
        mean, ci = mean_ci([v for v, _ in sp])
        rows.append(
            Row(
                system=PA,
                metric="spearman_vs_exact",
                value=mean,
                ci95=ci,
                n=len(mdp),
                split="mdp",
                unit="mean over seeds",
            )
        )
        err = max(s.scalars["exact_identity_max_error"][0] for s in mdp)
        rows.append(
            Row(
                system="exact KL-optimal policy",
                metric="identity_max_error",
                value=err,
                n=sum(s.scalars["exact_identity_max_error"][1] for s in mdp),
                split="mdp",
                unit="max |beta log pi*/pi_ref - A*|",
            )
        )
        _averaged(rows, "mdp", "policy_success", [{PA: s.scalars["policy_success"]} for s in mdp])
        _pooled(rows, "mdp", "bon_accuracy", [s.bon for s in mdp])
        _averaged(rows, "mdp", "auroc", [s.auroc for s in mdp])
        _pooled(rows, "mdp", "attribution_accuracy", [s.attribution for s in mdp])
    if arith:
        # Scalars of rates are (hits, n): pooled over seeds like the accuracies below.
        for key, system, metric, split in (
            ("policy_training_reward", "GRPO policy", "training_reward", "arithmetic-train"),
            ("reference_training_reward", "reference (SFT)", "training_reward", "arithmetic-train"),
            ("policy_sample_accuracy", "GRPO policy", "sample_accuracy", "arithmetic"),
            ("reference_sample_accuracy", "reference (SFT)", "sample_accuracy", "arithmetic"),
        ):
            if all(key in s.scalars for s in arith):
                _pooled(rows, split, metric, [{system: s.scalars[key]} for s in arith])
        _pooled(rows, "arithmetic", "bon_accuracy", [s.bon for s in arith])
        _averaged(rows, "arithmetic", "auroc", [s.auroc for s in arith])
        _pooled(rows, "arithmetic", "attribution_accuracy", [s.attribution for s in arith])
        for metric in ("bon_accuracy", "auroc", "attribution_accuracy"):
            _best_confidence(rows, "arithmetic", metric)
    return rows


def build_claims(rows: Sequence[Row]) -> list[Claim]:
    """The four claims of the issue, computed from ``rows``."""
    return [
        Claim.compare(
            "pa_matches_exact_advantage",
            "On the tabular stochastic MDP, the REINFORCE-with-KL policy's beta*log-ratio has "
            "Spearman >= 0.8 with the exact optimal advantage A*.",
            rows,
            (PA, "spearman_vs_exact", "mdp"),
            "ge",
            0.8,
        ),
        Claim.compare(
            "pa_bon_beats_confidence",
            "Best-of-8 on arithmetic: selecting by progress advantage is more accurate than "
            "the best confidence baseline.",
            rows,
            (PA, "bon_accuracy", "arithmetic"),
            "gt",
            (BEST_CONF, "bon_accuracy", "arithmetic"),
        ),
        Claim.compare(
            "pa_auroc_beats_confidence",
            "Predicting success on arithmetic: progress advantage has a higher AUROC than the "
            "best confidence baseline.",
            rows,
            (PA, "auroc", "arithmetic"),
            "gt",
            (BEST_CONF, "auroc", "arithmetic"),
        ),
        Claim.compare(
            "pa_attribution_above_chance",
            "Failure attribution on arithmetic: argmin-step progress advantage finds the "
            "verifier's first wrong step more often than a random step.",
            rows,
            (PA, "attribution_accuracy", "arithmetic"),
            "gt",
            ("random", "attribution_accuracy", "arithmetic"),
        ),
    ]


def run_demo(
    out_dir: str | Path,
    config: DemoConfig,
    seed: int = 0,
    quick: bool = False,
    log: Callable[[str], None] = print,
) -> Results:
    """Run both experiments, write ``results.json``, ``report.md`` and figures into ``out_dir``."""
    from rich.progress import Progress

    from paperstack.report import bar_chart, write_report

    out = prepare_out_dir(out_dir)
    seeds = tuple(seed + s for s in config.seeds)
    arith_seeds = tuple(seed + s for s in config.arithmetic_seeds)
    manifest = Manifest.collect(
        DIST,
        __version__,
        seed=seed,
        config={"quick": quick, **_jsonable(asdict(config))},
    )
    started = time.perf_counter()
    mdp_out: list[SeedOutcome] = []
    arith_out: list[SeedOutcome] = []
    import torch

    from progress_advantage.experiment import reference_model

    # One thread: the toy models' matmuls are too small for two threads to pay off, and on a
    # busy machine a descheduled second thread stalls the first.
    torch.set_num_threads(1)
    # The reference first: a bad --model fails before minutes of other work.
    torch.manual_seed(seed)
    reference, tokenizer = reference_model(config.arithmetic, seed=0, progress=not quick)
    log(f"(b) reference ready ({time.perf_counter() - started:.0f}s)")
    with Progress(transient=True) as bar:
        job = bar.add_task("(a) tabular MDP", total=len(seeds))
        for s in seeds:
            mdp_out.append(run_mdp(config.mdp, s))
            bar.advance(job)
    log(f"(a) tabular MDP done ({time.perf_counter() - started:.0f}s)")
    for s in arith_seeds:
        arith_out.append(run_arithmetic(reference, tokenizer, config.arithmetic, s, log=log))
    log(f"(b) arithmetic done ({time.perf_counter() - started:.0f}s)")
    rows = build_rows(mdp_out, arith_out)
    claims = build_claims(rows)
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    figures = [
        bar_chart(rows, "bon_accuracy", out / "bon_accuracy.png", split="arithmetic"),
        bar_chart(rows, "auroc", out / "auroc.png", split="arithmetic"),
        bar_chart(rows, "attribution_accuracy", out / "attribution.png", split="arithmetic"),
    ]
    a = config.arithmetic
    smoke = "QUICK SMOKE RUN (micro model, a few GRPO steps: numbers are not meaningful). "
    intro = (
        (smoke if quick else "")
        + f"(a) Tabular chain-with-pit MDP ({config.mdp.length + 2} states, 4 actions, slip "
        f"{config.mdp.slip}, beta {config.mdp.beta}), seeds {list(seeds)}. (b) Multi-step "
        f"arithmetic: reference = `{a.preset}` preset SFT model, policy = GRPO copy (trl, "
        f"{a.grpo.steps} steps of {a.grpo.prompts_per_step} prompts x {a.grpo.num_generations} "
        f"samples, lr {a.grpo.learning_rate:g}, beta {a.grpo.beta}; `training_reward` = the "
        f"verifier's reward on {a.n_reward_prompts} fresh training-split prompts x "
        f"{a.grpo.num_generations} samples before and after GRPO), {a.n_candidates} samples "
        f"at temperature "
        f"{a.temperature} for each of {a.n_test} held-out problems per seed, seeds "
        f"{list(arith_seeds)}. CPU only; GPU not measured."
    )
    write_report(out, results, title=f"{DIST} {__version__}: demo", intro=intro, figures=figures)
    held = sum(c.held for c in claims)
    log(
        f"wrote {out / 'results.json'} and report.md: {held}/{len(claims)} claims held "
        f"({time.perf_counter() - started:.0f}s)"
    )
    for c in claims:
        log(f"  {'HELD    ' if c.held else 'NOT HELD'} {c.id}: {c.describe()}")
    return results


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj
