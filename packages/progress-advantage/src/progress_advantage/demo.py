"""The reproduction: (a) the tabular MDP, (b) arithmetic with a tiny LM; rows, claims, report.

Design, fixed before any claim was computed (the README repeats it):

- rows carry what a paired comparison needs: best-of-N and attribution hits per item (a group
  of candidates, a failed trajectory; keyed ``seed:index``, so two methods compare on the same
  items by a paired bootstrap), AUROC, Spearman and the other per-run numbers per seed (paired
  Student t). Displayed intervals of bounded metrics are clipped to their range;
- "the best confidence baseline" of a metric (and the best positional prior for attribution,
  and the best (confidence, rule) pair there) is the one with the highest *validation* value,
  measured on separate problems (episodes) sampled from the same policy, never on the test
  rows it is then compared on. Progress advantage is not tuned: its configuration is the
  theorem's (step score = sum of token log-ratios, trajectory score = their sum, attribution =
  the authors' default argmin of the cumulative sum);
- premises come first, as claims of their own: in the MDP that RL converged (exact objective
  gap), in the LM arm the headroom check (the reference's own mean log-probability does not
  already predict success, AUROC <= 0.75) and, per beta, that RL raised the KL-regularised
  objective over the reference;
- the LM claims of a beta are evaluated only when its policy's step log-ratios agree with the
  Monte-Carlo soft advantage (Spearman >= 0.5, the agreement itself a claim held on its
  interval over seeds). They rest on their premises through the core's ``requires=``: the
  claim that RL raised ``r - beta*KL`` and the agreement claim; a premise not held leaves them
  inconclusive with ``unmet`` naming it, while the claim still records the measured difference
  and its interval (0.3; 0.2 compared copies of the rows with the interval withheld, so a
  reader could not see which way a gated claim pointed). The headroom check is reported as
  its own premise row and claim, as the issue asks, and gates nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from paperstack.contract import Report, Run
from paperstack.records import Claim, Row
from progress_advantage.attribution import ATTRIBUTION_RULES, POSITIONAL_PRIORS
from progress_advantage.evaluation import Uses, choose_best, mean_of
from progress_advantage.experiment import (
    CONFIDENCE,
    OPTIMUM,
    OPTIMUM_PLUGIN,
    PA,
    LMOutcome,
    LMSetup,
    MDPOutcome,
    MDPSetup,
)
from progress_advantage.mdp import REFERENCE_FAMILIES
from progress_advantage.policy import RLSettings
from progress_advantage.toy import FLAW_OPERANDS, TOY_MAX_OPERAND, TOY_MIN_OPS

__all__ = ["DemoConfig", "build_claims", "build_rows", "run_demo"]

BEST_CONF = "best confidence baseline"
BEST_PRIOR = "best positional prior"
PA_ATTR = f"{PA} (min-cumulative)"
#: Metrics bounded to [-1, 1] or [0, 1]: a row's displayed interval is clipped to that range.
BOUNDS = {"spearman": (-1.0, 1.0), "auroc": (0.0, 1.0), "accuracy": (0.0, 1.0)}
#: The gate on the LM claims of a beta: mean Spearman(PA, MC soft advantage) over seeds.
MC_GATE = 0.5
HEADROOM = 0.75
#: The real arm's convergence premise: the policy's KL-regularised objective within this of
#: the optimum's (rewards are 0/1), declared with ``demo --real`` before its first run.
GAP_MARGIN = 0.05


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the full demo; :meth:`quick` is the CI smoke version."""

    mdp: MDPSetup = field(default_factory=MDPSetup)
    lm: LMSetup = field(default_factory=LMSetup)
    lm_seeds: int = 3

    @classmethod
    def quick(cls) -> DemoConfig:
        """Seconds instead of minutes: a micro reference trained here (solves little), two RL
        steps per beta, a few problems. Its numbers mean nothing; it proves the pipeline."""
        from paperstack import tiny

        rl = RLSettings(
            prompts_per_step=2,
            num_generations=4,
            max_completion_length=32,
            train_prompts=16,
            min_steps=2,
            max_steps=2,
            window=1,
        )
        return cls(
            mdp=MDPSetup(max_iterations=300, groups=50, val_groups=25),
            lm=LMSetup(
                preset=tiny.QUICK_PRESET,
                sft_steps=100,
                cached=False,
                rl=rl,
                n_test=6,
                n_val=4,
                n_prm=4,
                n_objective=4,
                objective_samples=2,
                n_candidates=4,
                mc_trajectories=4,
                mc_rollouts=2,
                max_new_tokens=32,
            ),
            lm_seeds=1,
        )

    @classmethod
    def real(cls) -> DemoConfig:
        """``demo --real``: SmolLM2-135M-Instruct as the reference, used as it is (no SFT), on
        one-operation problems asked after three worked examples given as earlier chat turns
        (the ``one-op-chat`` variant of :data:`~progress_advantage.toy.REAL_VARIANTS`: the
        two-operation instruction of 0.3's first design was solved 0 of 32 times at
        temperature 1, this variant 45% [25%, 64%] with 6 of 8 validation problems between
        10% and 90%); the policy a LoRA adapter (r 16) trained by the same RLOO with the KL
        in the reward, at beta 0.1 only. The convergence premise is measured as in the MDP
        arm: the gap of the policy's objective to the optimum's value, which gates the MC
        agreement, which gates the claims. Sizes fixed on validation seed 100 from timed
        slices (CHANGELOG, design history) before any run of this arm on a reported seed.

        Revised 2026-12-07 (second design, after the first run, from validation seed 100
        only: ``benchmarks/validation/real_longer_rl``): a fixed 20 RLOO steps (the gap
        reached the optimum's neighbourhood between 10 and 20 steps; the first run stopped at
        10-15); the gap on 24 prompts x 16 samples a seed (the interval was +-0.15 at 16
        prompts x 8), with ``V*`` from the reference's and the policy's samples together
        (:func:`~progress_advantage.soft_advantage.optimum_value_mixture`: the plug-in reads 0
        for a prompt the reference's few samples never solved and flatters the gap); MC soft
        advantages from 16 rollouts per prefix of 32 reference samples (19 pairs, half tied
        at zero, at 8 of 12)."""
        rl = RLSettings(
            learning_rate=2e-4,
            prompts_per_step=4,
            num_generations=4,
            max_completion_length=16,
            train_prompts=128,
            min_steps=20,
            max_steps=20,
            window=5,
            lora_r=16,
        )
        return cls(
            lm=LMSetup(
                model="smollm2-135m-instruct",
                task="one-op-chat",
                objective_gap=True,
                optimum_estimator="mixture",
                rl=rl,
                betas=(0.1,),
                n_test=24,
                n_val=8,
                n_prm=8,
                n_objective=24,
                objective_samples=16,
                n_candidates=4,
                mc_trajectories=32,
                mc_rollouts=16,
                max_new_tokens=16,
                batch_size=64,
            ),
            lm_seeds=3,
        )


# ----------------------------------------------------------------------------- rows


def _bounded(row: Row) -> Row:
    for key, (lo, hi) in BOUNDS.items():
        if key in row.metric and row.ci95 is not None:
            ci = (max(lo, row.ci95[0]), min(hi, row.ci95[1]))
            return row.model_copy(update={"ci95": ci})
    return row


def _items(name: str, metric: str, values: dict[str, float], split: str, **kw: Any) -> Row:
    return _bounded(Row.from_items(name, metric, values, split=split, **kw))


def _seeds(name: str, metric: str, values: dict[int, float], split: str, **kw: Any) -> Row:
    return _bounded(Row.from_seeds(name, metric, values, split=split, **kw))


def _last_window(values: Sequence[float], window: int = 10) -> float:
    """Mean of the last ``window`` logged values (all of them for a shorter run)."""
    return float(np.mean(list(values)[-window:]))


def _pooled(per_seed: Sequence[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for d in per_seed:
        for name, items in d.items():
            out.setdefault(name, {}).update(items)
    return out


def _use_rows(
    rows: list[Row],
    split: str,
    seeds: Sequence[int],
    test: Sequence[Uses],
    val: Sequence[Uses],
    confidence: Sequence[str],
) -> dict[str, str]:
    """Rows of every use and method, and the validation-chosen "best" rows; returns the
    choices (metric -> chosen system) for the report."""
    chosen: dict[str, str] = {}
    bon, val_bon = _pooled([u.bon for u in test]), _pooled([u.bon for u in val])
    for name, values in bon.items():
        if values:
            rows.append(_items(name, "bon_accuracy", values, split))
    attr, val_attr = _pooled([u.attribution for u in test]), _pooled([u.attribution for u in val])
    for name, values in attr.items():
        if values:
            rows.append(_items(name, "attribution_accuracy", values, split))
    auroc_names = sorted({k for u in test for k in u.auroc})
    for name in auroc_names:
        per_seed = {s: u.auroc[name] for s, u in zip(seeds, test, strict=True) if name in u.auroc}
        if per_seed:
            rows.append(_seeds(name, "auroc", per_seed, split))
    val_auroc = {
        k: float(np.mean([u.auroc[k] for u in val if k in u.auroc]))
        for k in {k for u in val for k in u.auroc}
    }
    picks = {
        ("bon_accuracy", BEST_CONF): choose_best(
            {k: mean_of(v) for k, v in val_bon.items()}, confidence
        ),
        ("auroc", BEST_CONF): choose_best(val_auroc, confidence),
        ("attribution_accuracy", BEST_CONF): choose_best(
            {k: mean_of(v) for k, v in val_attr.items()},
            [f"{c} ({r})" for c in confidence for r in ATTRIBUTION_RULES],
        ),
        ("attribution_accuracy", BEST_PRIOR): choose_best(
            {k: mean_of(v) for k, v in val_attr.items()}, POSITIONAL_PRIORS
        ),
    }
    for (metric, label), name in picks.items():
        source = next(
            (r for r in rows if (r.system, r.metric, r.split) == (name, metric, split)), None
        )
        if source is not None:
            rows.append(
                source.model_copy(update={"system": label, "unit": f"{name}, chosen on validation"})
            )
            chosen[f"{metric}: {label}"] = name
    return chosen


def build_rows(
    mdp: dict[str, list[tuple[int, MDPOutcome]]],
    lm: list[tuple[int, LMOutcome]],
    betas: Sequence[float],
) -> tuple[list[Row], dict[str, dict[str, str]]]:
    """Rows of both arms (``mdp[family] = [(seed, outcome)]``, ``lm = [(seed, outcome)]``)."""
    rows: list[Row] = []
    chosen: dict[str, dict[str, str]] = {}
    errors = [o.identity_error for outs in mdp.values() for _, o in outs]
    if errors:
        rows.append(
            Row(
                system="exact KL-optimal policy",
                metric="identity_max_error",
                value=max(errors),
                n=len(errors),
                split="mdp",
                unit="max |beta log pi*/pi_ref - A*|",
            )
        )
    for family, outs in mdp.items():
        split = f"mdp-{family}"
        seeds = [s for s, _ in outs]
        rows.append(_seeds(PA, "spearman_vs_exact", {s: o.spearman for s, o in outs}, split))
        rows.append(
            _seeds(
                "REINFORCE-KL policy",
                "objective_gap",
                {s: o.convergence.gap for s, o in outs},
                split,
                unit="mean_s V*(s) - V^pi(s)",
            )
        )
        rows.append(
            _seeds(
                "REINFORCE-KL policy",
                "iterations",
                {s: float(o.convergence.iterations) for s, o in outs},
                split,
            )
        )
        chosen[split] = _use_rows(
            rows,
            split,
            seeds,
            [o.test for _, o in outs],
            [o.val for _, o in outs],
            ("mean-logprob", "self-certainty"),
        )
    if lm:
        split = "lm-reference"
        names = sorted({k for _, o in lm for k in o.headroom})
        for name in names:
            values = {s: o.headroom[name] for s, o in lm if name in o.headroom}
            rows.append(_seeds(f"reference {name}", "auroc", values, split))
        rows.append(
            _items(
                "reference (SFT)",
                "sample_accuracy",
                _pooled([{"x": o.reference_accuracy} for _, o in lm])["x"],
                split,
            )
        )
        for beta in betas:
            split = f"lm-b{beta:g}"
            b_outs = [(s, o.betas[beta]) for s, o in lm if beta in o.betas]
            if not b_outs:
                continue
            rows.append(
                _seeds(
                    PA,
                    "spearman_vs_mc",
                    {s: b.mc_spearman for s, b in b_outs},
                    split,
                    unit=f"{b_outs[0][1].mc_pairs} (prefix, step) pairs",
                )
            )
            rows.append(
                _seeds("RL policy", "rl_steps", {s: float(b.rl.steps) for s, b in b_outs}, split)
            )
            if all(b.rl.kl for _, b in b_outs):
                rows.append(
                    _seeds(
                        "RL policy",
                        "kl_per_token",
                        {s: _last_window(b.rl.kl) for s, b in b_outs},
                        split,
                        unit="KL(pi || pi_ref) per completion token, mean of the last 10 RL steps",
                    )
                )
            rows.append(
                Row.proportion(
                    "RL policy",
                    "rl_plateaued",
                    sum(b.rl.plateaued for _, b in b_outs),
                    len(b_outs),
                    split=split,
                )
            )
            for system in ("RL policy", "reference", OPTIMUM, OPTIMUM_PLUGIN):
                if not all(system in b.objective for _, b in b_outs):
                    continue
                pooled = _pooled([{"x": b.objective[system]} for _, b in b_outs])["x"]
                rows.append(_items(system, "kl_regularised_objective", pooled, f"{split}-train"))
            if all(OPTIMUM in b.objective for _, b in b_outs):
                # The MDP arm's convergence measure on the LM: V*(x) - J_pi(x) per prompt.
                best = _pooled([{"x": b.objective[OPTIMUM]} for _, b in b_outs])["x"]
                got = _pooled([{"x": b.objective["RL policy"]} for _, b in b_outs])["x"]
                rows.append(
                    _items(
                        "RL policy",
                        "objective_gap",
                        {k: best[k] - got[k] for k in best},
                        f"{split}-train",
                        unit="V*(x) - J_pi(x) per prompt, V* from reference samples",
                    )
                )
            rows.append(
                _items(
                    "RL policy",
                    "sample_accuracy",
                    _pooled([{"x": b.sample_accuracy} for _, b in b_outs])["x"],
                    split,
                )
            )
            chosen[split] = _use_rows(
                rows,
                split,
                [s for s, _ in b_outs],
                [b.test for _, b in b_outs],
                [b.val for _, b in b_outs],
                CONFIDENCE,
            )
    return rows, chosen


# ----------------------------------------------------------------------------- claims


def _have(rows: Sequence[Row], system: str, metric: str, split: str) -> bool:
    return any((r.system, r.metric, r.split) == (system, metric, split) for r in rows)


def _compare(
    claims: list[Claim],
    rows: Sequence[Row],
    cid: str,
    text: str,
    lhs: tuple[str, ...],
    op: Any,
    rhs: Any,
    margin: float = 0.0,
    requires: Sequence[Claim | None] = (),
) -> Claim | None:
    """Add the claim when its rows exist (a quick run may lack a row: no failures, no AUROC);
    ``requires`` are its premises (a premise a quick run could not build is left out)."""
    needed = [lhs] + ([rhs] if isinstance(rhs, tuple) else [])
    if not all(_have(rows, *key) for key in needed):
        return None
    premises = [c for c in requires if c is not None]
    claim = Claim.compare(cid, text, rows, lhs, op, rhs, margin, requires=premises)
    claims.append(claim)
    return claim


def build_claims(rows: Sequence[Row], betas: Sequence[float]) -> tuple[list[Claim], list[str]]:
    """The claims computed from ``rows``, and the lines of claims the MC gate left unjudged."""
    claims: list[Claim] = []
    if _have(rows, "exact KL-optimal policy", "identity_max_error", "mdp"):
        claims.append(
            Claim.compare(
                "exact_identity",
                "On the tabular MDP the exact KL-optimal policy's beta*log(pi*/pi_ref) equals the "
                "optimal advantage A* to 1e-9 (a deterministic identity).",
                rows,
                ("exact KL-optimal policy", "identity_max_error", "mdp"),
                "le",
                1e-9,
                exact=True,
            )
        )
    for family in REFERENCE_FAMILIES:
        sp = f"mdp-{family}"
        tag = family.replace("-", "_")
        _compare(
            claims,
            rows,
            f"premise_mdp_converged_{tag}",
            f"premise ({family} reference): REINFORCE with the KL in the reward reached the "
            "KL-regularised optimum (exact objective gap <= 0.002)",
            ("REINFORCE-KL policy", "objective_gap", sp),
            "le",
            0.002,
        )
        _compare(
            claims,
            rows,
            f"pa_matches_exact_advantage_{tag}",
            f"MDP, {family} reference: the trained policy's beta*log-ratio has Spearman >= "
            "0.8 with the exact optimal advantage A*",
            (PA, "spearman_vs_exact", sp),
            "ge",
            0.8,
        )
        _compare(
            claims,
            rows,
            f"pa_bon_beats_confidence_{tag}",
            f"MDP, {family} reference: best-of-8 by progress advantage succeeds more often "
            "than by the best confidence baseline",
            (PA, "bon_accuracy", sp),
            "gt",
            (BEST_CONF, "bon_accuracy", sp),
        )
        _compare(
            claims,
            rows,
            f"pa_auroc_beats_confidence_{tag}",
            f"MDP, {family} reference: progress advantage predicts success with a higher "
            "AUROC than the best confidence baseline",
            (PA, "auroc", sp),
            "gt",
            (BEST_CONF, "auroc", sp),
        )
        _compare(
            claims,
            rows,
            f"pa_attribution_beats_positional_{tag}",
            f"MDP, {family} reference: argmin of cumulative progress advantage finds the "
            "step into the pit more often than the best positional prior",
            (PA_ATTR, "attribution_accuracy", sp),
            "gt",
            (BEST_PRIOR, "attribution_accuracy", sp),
        )
    _compare(
        claims,
        rows,
        "premise_headroom",
        "premise (LM arm, before RL): the reference's mean log-probability does not already "
        f"predict success on its own samples (AUROC <= {HEADROOM})",
        ("reference mean-logprob", "auroc", "lm-reference"),
        "le",
        HEADROOM,
    )
    skipped: list[str] = []
    for beta in betas:
        sp = f"lm-b{beta:g}"
        tag = f"b{beta:g}".replace(".", "")
        objective = _compare(
            claims,
            rows,
            f"premise_rl_objective_{tag}",
            f"premise (beta {beta:g}): RLOO raised the KL-regularised objective r - beta*KL "
            "over the reference on fresh training-split prompts",
            ("RL policy", "kl_regularised_objective", f"{sp}-train"),
            "gt",
            ("reference", "kl_regularised_objective", f"{sp}-train"),
        )
        near = _compare(
            claims,
            rows,
            f"premise_near_optimum_{tag}",
            f"premise (beta {beta:g}): the RL policy is within {GAP_MARGIN} of the "
            "KL-regularised optimum's value V*(x) = beta log E_ref exp(r/beta) per prompt "
            "(estimated from reference samples), as the MDP arm's convergence premise",
            ("RL policy", "objective_gap", f"{sp}-train"),
            "le",
            GAP_MARGIN,
        )
        agrees = _compare(
            claims,
            rows,
            f"mc_agreement_{tag}",
            f"beta {beta:g}: the policy's step log-ratios agree with the Monte-Carlo soft "
            f"advantage (Spearman >= {MC_GATE})",
            (PA, "spearman_vs_mc", sp),
            "ge",
            MC_GATE,
            requires=(near,),
        )
        gated = [
            (
                f"pa_bon_beats_confidence_{tag}",
                "best-of-8 by progress advantage beats the best confidence baseline",
                (PA, "bon_accuracy", sp),
                (BEST_CONF, "bon_accuracy", sp),
                (objective, agrees),
            ),
            (
                f"pa_auroc_beats_confidence_{tag}",
                "progress advantage predicts success with a "
                "higher AUROC than the best confidence baseline",
                (PA, "auroc", sp),
                (BEST_CONF, "auroc", sp),
                (objective, agrees),
            ),
            (
                f"pa_attribution_beats_positional_{tag}",
                "argmin of cumulative progress advantage "
                "finds the first wrong step more often than the best positional prior",
                (PA_ATTR, "attribution_accuracy", sp),
                (BEST_PRIOR, "attribution_accuracy", sp),
                (objective, agrees),
            ),
            (
                f"pa_bon_beats_prm_{tag}",
                "best-of-8 by progress advantage beats a process reward "
                "model trained on the toy's step labels",
                (PA, "bon_accuracy", sp),
                ("prm", "bon_accuracy", sp),
                (objective, agrees),
            ),
        ]
        agreement = next(
            (r for r in rows if (r.system, r.metric, r.split) == (PA, "spearman_vs_mc", sp)), None
        )
        if agreement is None:
            continue
        if agreement.value < MC_GATE:
            # The gate fails: the claims are still compared on the measured rows, so each
            # records its difference with the interval (the direction a reader must see), and
            # `requires` on the agreement claim keeps its verdict inconclusive.
            why = (
                f"Spearman(PA, MC soft advantage) = {agreement.value:.3f} < {MC_GATE} at beta "
                f"{beta:g}"
            )
            skipped.extend(
                f"`{cid}`: inconclusive (premise `mc_agreement_{tag}` not held: {why}); its "
                "measured difference and interval are in the claims table"
                for cid, *_ in gated
            )
        for cid, text, lhs, rhs, premises in gated:
            _compare(
                claims,
                rows,
                cid,
                f"arithmetic, beta {beta:g}: {text}",
                lhs,
                "gt",
                rhs,
                requires=premises,
            )
    return claims, skipped


# ----------------------------------------------------------------------------- run


def _mc_seed(run: Run) -> int:
    """The MC data's seed: ``--mc-seed``, else the run's first seed."""
    given = getattr(run.args, "mc_seed", None)
    return run.seed if given is None else int(given)


def run_demo(run: Run) -> Report:
    """Both arms on ``run.seeds`` (the LM arm on the first ``lm_seeds``), as rows and claims."""
    import torch

    from paperstack.report import bar_chart
    from progress_advantage.experiment import (
        mc_from_json,
        mc_json,
        reference_model,
        run_lm_seed,
        run_mdp,
    )

    real = bool(getattr(run.args, "real", False))
    config = DemoConfig.real() if real else DemoConfig.quick() if run.quick else DemoConfig()
    if run.model is not None:
        config = replace(config, lm=replace(config.lm, model=run.model))
    config = _sized(config, run.args)
    # One thread: the toy models' matmuls are too small for two threads to pay off, and on a
    # busy machine a descheduled second thread stalls the first.
    torch.set_num_threads(1)
    torch.manual_seed(run.seed)
    # The reference first: a bad --model fails before minutes of other work.
    reference, tok = reference_model(config.lm, progress=run.show_progress)
    run.log("(b) reference ready")
    mdp: dict[str, list[tuple[int, MDPOutcome]]] = {f: [] for f in REFERENCE_FAMILIES}
    with run.progress(len(run.seeds) * len(REFERENCE_FAMILIES), "(a) tabular MDP") as bar:
        for family in REFERENCE_FAMILIES:
            for s in run.seeds:
                mdp[family].append((s, run_mdp(config.mdp, family, s)))
                bar.advance()
    run.log("(a) tabular MDP done")
    # The MC data and each LM seed are resumable parts (paperstack.resume): a killed run
    # resumes after the last one finished. Both depend on the MC data's seed (the first of
    # --seeds unless --mc-seed names it, so that processes given disjoint --seeds share it),
    # so their keys name it.
    mc_seed = _mc_seed(run)
    mc_key = f"mc-{mc_seed}"
    mc = mc_from_json(
        config.lm,
        mc_seed,
        run.resumable(mc_key, lambda: mc_json(reference, tok, config.lm, mc_seed)),
    )
    run.log(
        f"(b) Monte-Carlo soft advantages: {len(mc.prefixes)} prefixes x "
        f"{config.lm.mc_rollouts} reference rollouts"
    )

    def lm_seed(seed: int) -> dict[str, Any]:
        return run_lm_seed(reference, tok, config.lm, seed, mc, log=run.log).to_json()

    lm: list[tuple[int, LMOutcome]] = []
    for s in run.seeds[: config.lm_seeds]:
        part = run.resumable(f"lm-seed-{s}-{mc_key}", functools.partial(lm_seed, s))
        lm.append((s, LMOutcome.from_json(part)))
    rows, chosen = build_rows(mdp, lm, config.lm.betas)
    claims, skipped = build_claims(rows, config.lm.betas)
    figures = []
    for metric in ("bon_accuracy", "auroc", "attribution_accuracy"):
        for beta in config.lm.betas:
            split = f"lm-b{beta:g}"
            wanted = {
                PA,
                PA_ATTR,
                BEST_CONF,
                BEST_PRIOR,
                "prm",
                "random",
                "oracle (pass@N)",
                "majority-vote",
                *CONFIDENCE,
            }
            sub = [
                r for r in rows if r.split == split and r.metric == metric and r.system in wanted
            ]
            if sub:
                path = run.out / f"{metric}_b{beta:g}.png"
                figures.append(bar_chart(sub, metric, path, split=split))
    intro = _intro(run, config, chosen, skipped)
    summary = f"{len(skipped)} LM claims gated by the MC agreement premise" if skipped else None
    return Report(
        rows,
        claims,
        intro=intro,
        figures=figures,
        summary=summary,
        config={"demo": _jsonable(asdict(config)), "chosen_baselines": chosen, "real": real},
    )


def _sized(config: DemoConfig, args: Any) -> DemoConfig:
    """Apply ``--lm-preset``, ``--sft-steps``, ``--lm-seeds`` and ``--rl-max-steps`` (a smaller
    budget for a busy machine; the report's intro and config say what ran)."""
    preset = getattr(args, "lm_preset", None)
    if preset is not None:
        config = replace(config, lm=replace(config.lm, preset=preset))
    sft_steps = getattr(args, "sft_steps", None)
    if sft_steps is not None:
        config = replace(config, lm=replace(config.lm, sft_steps=sft_steps))
    lm_seeds = getattr(args, "lm_seeds", None)
    if lm_seeds is not None:
        config = replace(config, lm_seeds=lm_seeds)
    cap = getattr(args, "rl_max_steps", None)
    if cap is not None:
        rl = config.lm.rl
        rl = replace(rl, max_steps=cap, min_steps=min(rl.min_steps, cap))
        config = replace(config, lm=replace(config.lm, rl=rl))
    return config


def _intro(
    run: Run, config: DemoConfig, chosen: dict[str, dict[str, str]], skipped: Sequence[str]
) -> str:
    m, lm = config.mdp, config.lm
    smoke = "**QUICK SMOKE RUN** (micro reference, two RL steps: numbers are not meaningful). "
    lines = [
        (smoke if run.quick else "")
        + f"(a) Tabular chain MDP ({m.length + 3} states: chain, terminal goal, trap, terminal "
        f"pit; slip {m.slip}, "
        f"beta {m.beta}), references `random` and `confident-wrong`, seeds {list(run.seeds)}; "
        f"REINFORCE with the KL in the reward until the exact objective gap is <= {m.tol} (cap "
        f"{m.max_iterations} iterations); {m.groups} test and {m.val_groups} validation groups "
        f"of {m.n_candidates} episodes per seed. (b) Arithmetic with {TOY_MIN_OPS} operations "
        f"per problem over operands 1..{TOY_MAX_OPERAND}: "
        + (
            f"reference = `{lm.model}` as it is (no SFT), {lm.task} prompts"
            + (f", policy = a LoRA adapter (r {lm.rl.lora_r})" if lm.rl.lora_r else "")
            + "; per "
            if lm.model is not None
            else f"reference = `{lm.preset}` model SFT'd {lm.sft_steps} steps on the flawed "
            f"teacher (multiplications with left operand in {list(FLAW_OPERANDS)} taught as "
            "a*(b+1) 80% of the time; random spacing of each step line); per "
        )
        + f"beta in {list(lm.betas)} an RLOO policy (trl, KL in the reward, no std scaling, lr "
        f"{lm.rl.learning_rate:g}, {lm.rl.prompts_per_step} prompts x {lm.rl.num_generations} "
        f"completions per step, "
        + (
            f"a fixed {lm.rl.max_steps} steps"
            if lm.rl.min_steps == lm.rl.max_steps
            else f"stopped at a plateau of r - beta*KL over {lm.rl.window}-step windows, "
            f"{lm.rl.min_steps}-{lm.rl.max_steps} steps"
        )
        + f"); {lm.n_candidates} samples for "
        f"each of {lm.n_test} test and {lm.n_val} validation problems per seed, seeds "
        f"{list(run.seeds[: config.lm_seeds])}; Monte-Carlo soft advantages from "
        f"{lm.mc_rollouts} reference rollouts per step prefix of {lm.mc_trajectories} "
        f"reference samples (MC seed {_mc_seed(run)})"
        + (
            f"; the gap to the KL-regularised optimum on {lm.n_objective} training-split "
            f"prompts per seed, {lm.objective_samples} reference and {lm.objective_samples} "
            "policy samples each, V* "
            + (
                "from both sets of samples (importance-weighted mixture)"
                if lm.optimum_estimator == "mixture"
                else "from the reference's samples"
            )
            if lm.objective_gap
            else ""
        )
        + ". Best-of-N and attribution hits are per item (paired bootstrap), "
        "AUROC and Spearman per seed (paired t). CPU only, one torch thread; GPU not measured.",
        "",
        "Baselines chosen on validation: "
        + "; ".join(
            f"{split}: " + ", ".join(f"{k} = {v}" for k, v in c.items())
            for split, c in chosen.items()
        ),
    ]
    if skipped:
        lines += ["", "Claims gated by the Monte-Carlo agreement premise:", ""]
        lines += [f"- {s}" for s in skipped]
    return "\n".join(lines)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj
