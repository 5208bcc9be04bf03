"""The demo's two experiments, each returning plain numbers per seed.

(a) :func:`run_mdp`: the tabular chain-with-pit MDP: the exact identity, the Spearman correlation
of a REINFORCE-with-KL policy's log-ratio with ``A*``, and best-of-N / AUROC / failure attribution
with exactly known ground truth.

(b) :func:`run_arithmetic`: multi-step arithmetic from :mod:`paperstack.tasks` with a tiny LM as
the reference and a GRPO-trained copy (trl) as the policy: ``N`` sampled solutions per held-out
problem, labelled by the task's verifier (outcome) and its step checker (first wrong step), and
scored by progress advantage and every baseline in one harness.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from progress_advantage.aggregate import aggregate_trajectory
from progress_advantage.attribution import attribute_failure
from progress_advantage.mdp import (
    evaluate_policy,
    make_chain,
    reinforce_kl,
    sample_episodes,
    soft_value_iteration,
)
from progress_advantage.metrics import auroc, spearman
from progress_advantage.policy import GRPOSettings
from progress_advantage.selection import best_of_n, majority_vote

__all__ = [
    "ArithmeticSetup",
    "MDPSetup",
    "SeedOutcome",
    "first_wrong_step",
    "run_arithmetic",
    "run_mdp",
]

#: The same pattern the task's verifier uses for the final line.
_ANSWER = re.compile(r"^\s*Answer:\s*(-?\d+)\s*$", re.IGNORECASE)
PA = "progress-advantage"
CONFIDENCE = ("mean-logprob", "self-certainty", "bottom10-confidence")


@dataclass
class SeedOutcome:
    """One seed's per-item results; the demo turns lists of these into paired rows.

    ``bon[method][group]`` is 1.0 when the method's pick of that group succeeded (random's is
    the group's mean success, its expected value); ``attribution[method][trajectory]`` is the
    (expected) top-1 hit on a failed trajectory; ``auroc[method]`` is one number per seed (an
    AUROC is not a mean over items); ``rates[key][item]`` are per-item values of other rates.
    """

    bon: dict[str, dict[str, float]] = field(default_factory=dict)
    auroc: dict[str, float] = field(default_factory=dict)
    attribution: dict[str, dict[str, float]] = field(default_factory=dict)
    rates: dict[str, dict[str, float]] = field(default_factory=dict)
    scalars: dict[str, float] = field(default_factory=dict)


def _selection_metrics(
    out: SeedOutcome,
    groups: Sequence[Sequence[int]],
    scores: dict[str, np.ndarray],
    success: np.ndarray,
    answers: Sequence[str | None] | None,
    prefix: str,
) -> None:
    """Best-of-N hits per group and AUROC for every scored method (NaN = unscorable)."""
    for name, s in scores.items():
        out.bon[name] = {
            f"{prefix}{k}": float(success[g[best_of_n(s[list(g)])]]) for k, g in enumerate(groups)
        }
        ok = ~np.isnan(s)
        value = auroc(s[ok], success[ok])
        if np.isfinite(value):
            out.auroc[name] = value
    # Random selection: its expected accuracy, exactly (the mean success of each group).
    out.bon["random"] = {
        f"{prefix}{k}": float(success[list(g)].mean()) for k, g in enumerate(groups)
    }
    out.bon["oracle (pass@N)"] = {
        f"{prefix}{k}": float(success[list(g)].any()) for k, g in enumerate(groups)
    }
    if answers is not None:
        out.bon["majority-vote"] = {
            f"{prefix}{k}": float(success[g[majority_vote([answers[i] for i in g])]])
            for k, g in enumerate(groups)
        }


# ----------------------------------------------------------------------------- (a) MDP


@dataclass(frozen=True)
class MDPSetup:
    """The tabular experiment; defaults are the full demo's."""

    length: int = 10
    slip: float = 0.1
    gamma: float = 0.95
    beta: float = 0.1
    horizon: int = 15
    iterations: int = 1500
    groups: int = 200
    n_candidates: int = 8


def run_mdp(setup: MDPSetup, seed: int) -> SeedOutcome:
    """Exact identity error, Spearman(PA, A*), and the three uses on sampled episodes."""
    mdp = make_chain(setup.length, setup.slip, setup.gamma, seed=seed)
    beta = setup.beta
    Q, V, pi_star = soft_value_iteration(mdp, beta)
    _, _, A_eval = evaluate_policy(mdp, pi_star, beta)
    chain = mdp.chain_states
    identity_err = float(np.abs(beta * np.log(pi_star / mdp.ref) - A_eval)[chain].max())
    A_star = (Q - V[:, None])[chain]
    pi_rl = reinforce_kl(mdp, beta, iterations=setup.iterations, seed=seed)
    pa_table = beta * np.log(pi_rl / mdp.ref)
    out = SeedOutcome()
    out.scalars["exact_identity_max_error"] = identity_err
    out.scalars["spearman_vs_exact"] = spearman(pa_table[chain], A_star)

    rng = np.random.default_rng(10_000 + seed)
    n = setup.groups * setup.n_candidates
    ep = sample_episodes(mdp, pi_rl, n, setup.horizon, rng)
    s, a, alive = ep.states, ep.actions, ep.alive
    step_pa = np.where(alive, pa_table[s, a], np.nan)
    step_exact = np.where(alive, (Q - V[:, None])[s, a], np.nan)
    step_logp = np.where(alive, np.log(pi_rl[s, a]), np.nan)
    scores = {
        PA: np.nansum(step_pa, axis=1),
        "exact-advantage": np.nansum(step_exact, axis=1),
        "mean-logprob": np.nanmean(step_logp, axis=1),
    }
    groups = [
        list(range(g * setup.n_candidates, (g + 1) * setup.n_candidates))
        for g in range(setup.groups)
    ]
    _selection_metrics(out, groups, scores, ep.success, None, f"{seed}:")
    failed = np.flatnonzero(ep.first_pit >= 0)
    steps_alive = alive.sum(1)
    for name, table in (
        (PA, step_pa),
        ("exact-advantage", step_exact),
        ("mean-logprob", step_logp),
    ):
        out.attribution[name] = {
            f"{seed}:{i}": float(
                attribute_failure(table[i, : steps_alive[i]], "argmin") == ep.first_pit[i]
            )
            for i in failed
        }
    out.attribution["uniform step"] = {f"{seed}:{i}": 1.0 / steps_alive[i] for i in failed}
    out.scalars["policy_success"] = float(ep.success.mean())
    return out


# ----------------------------------------------------------------------------- (b) arithmetic


@dataclass(frozen=True)
class ArithmeticSetup:
    """The LM experiment; defaults are the full demo's (``quick`` shrinks them)."""

    preset: str = "tiny"
    sft_steps: int | None = None  # None: the cached tiny.pretrained recipe (1200 steps)
    cached: bool = True
    model: str | None = None  # a reference model path or hub id instead of the tiny model
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    n_test: int = 100
    n_candidates: int = 8
    n_orm_prompts: int = 32
    # Training reward before/after GRPO: fresh training-split prompts, sampled as in training.
    n_reward_prompts: int = 128
    temperature: float = 1.0
    max_new_tokens: int = 48
    batch_size: int = 64


def first_wrong_step(task: Any, example: Any, completion: str) -> int | None:
    """Index (among the non-blank lines: the steps) of the first wrong line, or ``None``.

    Step lines take the verdicts of ``Arithmetic.check_steps`` (a step after an error is wrong
    too); the ``Answer:`` line is right iff every step before it was and the answer equals the
    expression's value.
    """
    verdicts = iter(task.check_steps(example, completion))
    ok = True
    for k, line in enumerate(x for x in completion.split("\n") if x.strip()):
        m = _ANSWER.match(line)
        if m:
            ok = ok and int(m.group(1)) == int(example.meta["value"])
        else:
            ok = bool(next(verdicts, False))
        if not ok:
            return k
    return None


def reference_model(setup: ArithmeticSetup, seed: int = 0, progress: bool = True) -> Any:
    """The SFT reference: the cached ``tiny.pretrained`` model, or one trained now (quick)."""
    from paperstack import tiny

    if setup.model is not None:
        from paperstack.checkpoint import load_pretrained

        return load_pretrained(setup.model, tiny.load)
    if setup.cached:
        return tiny.pretrained(
            setup.preset, ("arithmetic",), steps=setup.sft_steps, seed=seed, progress=progress
        )
    tok = tiny.build_tokenizer()
    model = tiny.build_model(setup.preset, tok, seed)
    tiny.train(
        model,
        tok,
        ["arithmetic"],
        steps=setup.sft_steps or tiny.QUICK_STEPS,
        seed=seed,
        batch_size=64,
        progress=progress,
        num_threads=1,  # tiny matmuls: one thread beats two contending ones
    )
    return model, tok


def _sample(
    model: Any, tok: Any, prompts: Sequence[str], setup: ArithmeticSetup, seed: int
) -> list[list[str]]:
    from paperstack.llm import TransformersChat

    chat = TransformersChat(model, tok, batch_size=setup.batch_size, name="policy")
    return chat.generate(
        [[{"role": "user", "content": p}] for p in prompts],
        max_new_tokens=setup.max_new_tokens,
        temperature=setup.temperature,
        n=setup.n_candidates,
        seed=seed,
    )


def run_arithmetic(
    reference: Any,
    tokenizer: Any,
    setup: ArithmeticSetup,
    seed: int,
    log: Callable[[str], None] = print,
) -> SeedOutcome:
    """Train a GRPO policy (seed ``seed``), sample, label, score and evaluate every method."""
    from paperstack import tasks
    from progress_advantage.baselines import confidence_step_scores, confidence_trajectory_scores
    from progress_advantage.orm import OutcomeRewardModel
    from progress_advantage.policy import train_grpo_policy
    from progress_advantage.scoring import LogRatioScorer, progress_advantage
    from progress_advantage.trajectory import Trajectory

    task: Any = tasks.get("arithmetic")
    policy, history = train_grpo_policy(reference, tokenizer, task, setup.grpo, seed=seed)
    out = SeedOutcome()
    # The thing GRPO optimises, measured rather than read off trl's noisy per-batch log: the
    # verifier's reward on fresh training-split prompts, at the training temperature and length.
    reward_ex = task.generate(setup.n_reward_prompts, seed=2000 + seed, split="train")
    for key, model in (
        ("policy_training_reward", policy),
        ("reference_training_reward", reference),
    ):
        samples = _sample(
            model,
            tokenizer,
            [e.prompt for e in reward_ex],
            replace(
                setup,
                temperature=setup.grpo.temperature,
                max_new_tokens=setup.grpo.max_completion_length,
                n_candidates=setup.grpo.num_generations,
            ),
            seed + 700,
        )
        out.rates[key] = {
            f"{seed}:{k}": float(np.mean([task.verify(e, c) for c in cs]))
            for k, (e, cs) in enumerate(zip(reward_ex, samples, strict=True))
        }
    kl = [h["kl"] for h in history if "kl" in h]
    r_pol, r_ref = (
        float(np.mean(list(out.rates[k].values())))
        for k in ("policy_training_reward", "reference_training_reward")
    )
    log(
        f"  seed {seed}: GRPO {setup.grpo.steps} steps, training reward (verifier) reference "
        f"{r_ref:.3f} -> policy {r_pol:.3f}; last logged per-token kl "
        f"{kl[-1] if kl else float('nan'):.4f}"
    )
    if r_pol <= r_ref:
        log(f"  seed {seed}: WARNING: GRPO did not raise the training reward")
    beta = setup.grpo.beta
    scorer = LogRatioScorer(policy, reference, tokenizer, features=True, batch_size=128)

    def build(
        examples: Sequence[Any], samples: Sequence[Sequence[str]]
    ) -> tuple[list[Trajectory | None], np.ndarray, list[int | None], list[str | None]]:
        trajs: list[Trajectory | None] = []
        success, first_err, answers = [], [], []
        for ex, cands in zip(examples, samples, strict=True):
            for c in cands:
                ok = task.verify(ex, c)
                success.append(ok)
                fe = None if ok else first_wrong_step(task, ex, c)
                first_err.append(fe)
                ans = task.final_answer(c)
                answers.append(None if ans is None else str(ans))
                has_steps = any(line.strip() for line in c.split("\n"))
                trajs.append(Trajectory.from_lines(ex.prompt, c) if has_steps else None)
        return trajs, np.array(success, dtype=bool), first_err, answers

    def score(trajs: Sequence[Trajectory | None]) -> list[Any]:
        live = [t for t in trajs if t is not None]
        scored = iter(scorer.score(live)) if live else iter([])
        return [next(scored) if t is not None else None for t in trajs]

    # The outcome reward model: policy rollouts on training prompts, verifier labels.
    train_ex = task.generate(setup.n_orm_prompts, seed=1000 + seed, split="train")
    tr_trajs, tr_success, _, _ = build(
        train_ex, _sample(policy, tokenizer, [e.prompt for e in train_ex], setup, seed + 500)
    )
    tr_scores = score(tr_trajs)
    feats = [ts.features[-1] for ts in tr_scores if ts is not None]
    labels = [y for ts, y in zip(tr_scores, tr_success, strict=True) if ts is not None]
    orm = OutcomeRewardModel().fit(np.array(feats), np.array(labels))

    test_ex = task.generate(setup.n_test, seed=seed, split="test")
    prompts = [e.prompt for e in test_ex]
    trajs, success, first_err, answers = build(
        test_ex, _sample(policy, tokenizer, prompts, setup, seed)
    )
    ref_samples = _sample(reference, tokenizer, prompts, setup, seed)
    k_n = setup.n_candidates
    out.rates["reference_sample_accuracy"] = {
        f"{seed}:{k}": float(np.mean([task.verify(e, c) for c in cs]))
        for k, (e, cs) in enumerate(zip(test_ex, ref_samples, strict=True))
    }
    out.rates["policy_sample_accuracy"] = {
        f"{seed}:{k}": float(success[k * k_n : (k + 1) * k_n].mean()) for k in range(len(test_ex))
    }
    scored = score(trajs)

    n = len(trajs)
    names = [PA, *(f"{PA} ({a})" for a in ("mean", "min", "last", "bottom10"))]
    names += [*CONFIDENCE, "orm"]
    scores = {k: np.full(n, np.nan) for k in names}
    step_tables: dict[str, list[np.ndarray | None]] = {
        k: [None] * n for k in (PA, *CONFIDENCE, "orm")
    }
    for i, ts in enumerate(scored):
        if ts is None:
            continue
        a = progress_advantage(ts, beta, "sum")
        scores[PA][i] = aggregate_trajectory(a, "sum")
        for agg in ("mean", "min", "last", "bottom10"):
            scores[f"{PA} ({agg})"][i] = aggregate_trajectory(a, agg)
        for k, c in confidence_trajectory_scores(ts).items():
            scores[k][i] = c
        assert ts.features is not None
        scores["orm"][i] = float(orm.logit(ts.features[-1])[0])
        step_tables[PA][i] = a
        for k, steps in confidence_step_scores(ts).items():
            step_tables[k][i] = steps
        step_tables["orm"][i] = orm.step_scores(ts.features)
    # "bottom10-confidence" is a confidence: higher = surer. Its step form is a per-step mean
    # confidence, so the least confident step is the argmin, like the others.
    groups = [
        list(range(g * setup.n_candidates, (g + 1) * setup.n_candidates))
        for g in range(len(test_ex))
    ]
    _selection_metrics(out, groups, scores, success, answers, f"{seed}:")
    failed = [i for i in range(n) if scored[i] is not None and first_err[i] is not None]
    for k, table in step_tables.items():
        hit: dict[str, float] = {}
        for i in failed:
            row = table[i]
            assert row is not None
            hit[f"{seed}:{i}"] = float(attribute_failure(row, "argmin") == first_err[i])
        out.attribution[k] = hit
    out.attribution["uniform step"] = {f"{seed}:{i}": 1.0 / scored[i].n_steps for i in failed}
    out.attribution["first step"] = {f"{seed}:{i}": float(first_err[i] == 0) for i in failed}
    out.scalars["unscorable_candidates"] = float(sum(t is None for t in trajs))
    return out
