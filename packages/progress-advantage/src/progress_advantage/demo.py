"""The reproduction: (a) the tabular MDP, (b) arithmetic with a tiny LM; rows, claims, report.

Rows carry what a paired comparison needs: best-of-N and attribution hits per item (a group of
candidates, a failed trajectory; keyed ``seed:index``, so two methods compare on the same
items by a paired bootstrap), AUROC and Spearman per seed (Student t over seeds, paired).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from paperstack.contract import Report, Run
from paperstack.records import Claim, Row
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

BEST_CONF = "best confidence baseline"
#: Metrics bounded to [-1, 1] or [0, 1]: a row's displayed interval is clipped to that range.
BOUNDS = {"spearman_vs_exact": (-1.0, 1.0), "auroc": (0.0, 1.0)}


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the full demo; :meth:`quick` is the CI smoke version."""

    mdp: MDPSetup = field(default_factory=MDPSetup)
    arithmetic: ArithmeticSetup = field(default_factory=ArithmeticSetup)
    arithmetic_seeds: int = 3

    @classmethod
    def quick(cls) -> DemoConfig:
        """Seconds instead of minutes: micro model trained here (solves little), few RL steps."""
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
            arithmetic_seeds=1,
        )


def _clip(row: Row) -> Row:
    lo_hi = BOUNDS.get(row.metric)
    if lo_hi is None or row.ci95 is None:
        return row
    lo, hi = lo_hi
    return row.model_copy(update={"ci95": (max(lo, row.ci95[0]), min(hi, row.ci95[1]))})


def _merge(per_seed: Sequence[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for seed_items in per_seed:
        for name, items in seed_items.items():
            out.setdefault(name, {}).update(items)
    return out


def _item_rows(
    rows: list[Row], split: str, metric: str, items: dict[str, dict[str, float]]
) -> None:
    for name, values in items.items():
        if values:
            rows.append(Row.from_items(name, metric, values, split=split))


def _seed_rows(
    rows: list[Row],
    split: str,
    metric: str,
    seeds: Sequence[int],
    per_seed: Sequence[dict[str, float]],
) -> None:
    names = {n for d in per_seed for n in d}
    for name in sorted(names):
        values = {s: d[name] for s, d in zip(seeds, per_seed, strict=True) if name in d}
        if values:
            rows.append(_clip(Row.from_seeds(name, metric, values, split=split)))


def _best_confidence(rows: list[Row], split: str, metric: str) -> None:
    cands = [r for r in rows if r.split == split and r.metric == metric and r.system in CONFIDENCE]
    if cands:
        best = max(cands, key=lambda r: r.value)
        rows.append(best.model_copy(update={"system": BEST_CONF}))


def build_rows(
    mdp_seeds: Sequence[int],
    mdp: Sequence[SeedOutcome],
    arith_seeds: Sequence[int],
    arith: Sequence[SeedOutcome],
) -> list[Row]:
    """Rows from per-seed outcomes of both experiments."""
    rows: list[Row] = []
    if mdp:
        rows.append(
            _clip(
                Row.from_seeds(
                    PA,
                    "spearman_vs_exact",
                    {
                        s: o.scalars["spearman_vs_exact"]
                        for s, o in zip(mdp_seeds, mdp, strict=True)
                    },
                    split="mdp",
                )
            )
        )
        rows.append(
            Row(
                system="exact KL-optimal policy",
                metric="identity_max_error",
                value=max(o.scalars["exact_identity_max_error"] for o in mdp),
                n=len(mdp),
                split="mdp",
                unit="max |beta log pi*/pi_ref - A*|",
            )
        )
        _item_rows(rows, "mdp", "bon_accuracy", _merge([o.bon for o in mdp]))
        _seed_rows(rows, "mdp", "auroc", mdp_seeds, [o.auroc for o in mdp])
        _item_rows(rows, "mdp", "attribution_accuracy", _merge([o.attribution for o in mdp]))
    if arith:
        rates = _merge([o.rates for o in arith])
        for key, system, metric, split in (
            ("policy_training_reward", "RL policy", "training_reward", "arithmetic-train"),
            ("reference_training_reward", "reference (SFT)", "training_reward", "arithmetic-train"),
            ("policy_sample_accuracy", "RL policy", "sample_accuracy", "arithmetic"),
            ("reference_sample_accuracy", "reference (SFT)", "sample_accuracy", "arithmetic"),
        ):
            if rates.get(key):
                rows.append(Row.from_items(system, metric, rates[key], split=split))
        _item_rows(rows, "arithmetic", "bon_accuracy", _merge([o.bon for o in arith]))
        _seed_rows(rows, "arithmetic", "auroc", arith_seeds, [o.auroc for o in arith])
        _item_rows(
            rows, "arithmetic", "attribution_accuracy", _merge([o.attribution for o in arith])
        )
        for metric in ("bon_accuracy", "auroc", "attribution_accuracy"):
            _best_confidence(rows, "arithmetic", metric)
    return rows


def build_claims(rows: Sequence[Row]) -> list[Claim]:
    """The premise, the exact identity and the paper's claims, computed from ``rows``."""
    have = {(r.system, r.metric, r.split) for r in rows}
    claims = [
        Claim.compare(
            "premise_rl_raised_training_reward",
            "premise: KL-regularised RL raised the verifier's reward over the reference on "
            "fresh training-split prompts (the policy moved, so its log-ratio carries signal)",
            rows,
            ("RL policy", "training_reward", "arithmetic-train"),
            "gt",
            ("reference (SFT)", "training_reward", "arithmetic-train"),
        ),
        Claim.compare(
            "exact_identity",
            "On the tabular MDP the exact KL-optimal policy's beta*log(pi*/pi_ref) equals the "
            "optimal advantage A* to 1e-9 (a deterministic identity).",
            rows,
            ("exact KL-optimal policy", "identity_max_error", "mdp"),
            "le",
            1e-9,
            exact=True,
        ),
        Claim.compare(
            "pa_matches_exact_advantage",
            "On the tabular stochastic MDP, the REINFORCE-with-KL policy's beta*log-ratio has "
            "Spearman >= 0.8 with the exact optimal advantage A*.",
            rows,
            (PA, "spearman_vs_exact", "mdp"),
            "ge",
            0.8,
        ),
    ]
    for metric, cid, text in (
        ("bon_accuracy", "pa_bon_beats_confidence", "Best-of-8 on arithmetic: selecting by "
         "progress advantage is more accurate than the best confidence baseline."),
        ("auroc", "pa_auroc_beats_confidence", "Predicting success on arithmetic: progress "
         "advantage has a higher AUROC than the best confidence baseline."),
    ):  # fmt: skip
        if (BEST_CONF, metric, "arithmetic") in have:
            claims.append(
                Claim.compare(
                    cid,
                    text,
                    rows,
                    (PA, metric, "arithmetic"),
                    "gt",
                    (BEST_CONF, metric, "arithmetic"),
                )
            )
    if ("uniform step", "attribution_accuracy", "arithmetic") in have:
        claims.append(
            Claim.compare(
                "pa_attribution_above_chance",
                "Failure attribution on arithmetic: argmin-step progress advantage finds the "
                "verifier's first wrong step more often than a uniformly random step.",
                rows,
                (PA, "attribution_accuracy", "arithmetic"),
                "gt",
                ("uniform step", "attribution_accuracy", "arithmetic"),
            )
        )
    return claims


def run_demo(run: Run) -> Report:
    """Both experiments on ``run.seeds`` (the LM arm on the first few), as rows and claims."""
    import torch

    from paperstack.report import bar_chart
    from progress_advantage.experiment import reference_model

    config = DemoConfig.quick() if run.quick else DemoConfig()
    if run.model is not None:
        config = replace(config, arithmetic=replace(config.arithmetic, model=run.model))
    # One thread: the toy models' matmuls are too small for two threads to pay off, and on a
    # busy machine a descheduled second thread stalls the first.
    torch.set_num_threads(1)
    mdp_seeds = run.seeds
    arith_seeds = run.seeds[: config.arithmetic_seeds]
    torch.manual_seed(run.seed)
    # The reference first: a bad --model fails before minutes of other work.
    reference, tokenizer = reference_model(config.arithmetic, seed=0, progress=run.show_progress)
    run.log("(b) reference ready")
    mdp_out: list[SeedOutcome] = []
    with run.progress(len(mdp_seeds), "(a) tabular MDP") as bar:
        for s in mdp_seeds:
            mdp_out.append(run_mdp(config.mdp, s))
            bar.advance()
    arith_out: list[SeedOutcome] = []
    for s in arith_seeds:
        arith_out.append(run_arithmetic(reference, tokenizer, config.arithmetic, s, log=run.log))
    rows = build_rows(mdp_seeds, mdp_out, arith_seeds, arith_out)
    claims = build_claims(rows)
    figures = [
        bar_chart(rows, metric, run.out / f"{metric}.png", split="arithmetic")
        for metric in ("bon_accuracy", "auroc", "attribution_accuracy")
        if any(r.metric == metric and r.split == "arithmetic" for r in rows)
    ]
    a = config.arithmetic
    smoke = "QUICK SMOKE RUN (micro model, a few RL steps: numbers are not meaningful). "
    intro = (
        (smoke if run.quick else "")
        + f"(a) Tabular chain-with-pit MDP ({config.mdp.length + 2} states, 4 actions, slip "
        f"{config.mdp.slip}, beta {config.mdp.beta}), seeds {list(mdp_seeds)}. (b) Multi-step "
        f"arithmetic: reference = `{a.preset}` preset SFT model, policy = GRPO copy (trl, "
        f"{a.grpo.steps} steps of {a.grpo.prompts_per_step} prompts x {a.grpo.num_generations} "
        f"samples, lr {a.grpo.learning_rate:g}, beta {a.grpo.beta}), {a.n_candidates} samples "
        f"at temperature {a.temperature} for each of {a.n_test} held-out problems per seed, "
        f"seeds {list(arith_seeds)}. Best-of-N and attribution hits are per item (paired "
        "bootstrap over items), AUROC and Spearman per seed (paired t). CPU only; GPU not "
        "measured."
    )
    return Report(
        rows,
        claims,
        intro=intro,
        figures=figures,
        config=_jsonable({"demo": asdict(config)}),
    )


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj
