"""The demo's two arms, each returning per-seed, per-item numbers (the demo makes rows of them).

(a) :func:`run_mdp`: the tabular chain MDP with a terminal pit, for each of two reference
families declared in advance (``random``, ``confident-wrong``): the exact identity, REINFORCE
with the KL in the reward run until the exact objective gap is below a tolerance, the Spearman
correlation of its log-ratio with ``A*``, and best-of-N / AUROC / failure attribution on
episodes that end at the goal or in the pit (every scorer sees the steps up to failure only; the
decisive error is the step into the trap, a random number of doomed steps before the end).

(b) :func:`run_lm_seed`: multi-step arithmetic with a tiny LM. The reference is SFT'd on
:class:`~progress_advantage.toy.FlawedArithmetic` (confidently wrong on a third of the
multiplications, harmless random spacing); first the headroom check on the reference's own
samples (how well its mean log-probability already predicts success); then for each ``β`` an
RLOO policy (KL in the reward, trained to a plateau), the premise that it raised the
KL-regularised objective, agreement of its step log-ratios with a Monte-Carlo estimate of the
soft advantage (:mod:`progress_advantage.soft_advantage`), a process reward model trained on
the toy's step labels, and every use on validation (to choose baselines) and test problems.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.evaluation import Uses, evaluate_uses
from progress_advantage.mdp import (
    Convergence,
    evaluate_policy,
    make_chain,
    reinforce_kl,
    sample_episodes,
    soft_value_iteration,
)
from progress_advantage.metrics import auroc, spearman
from progress_advantage.policy import RLResult, RLSettings
from progress_advantage.toy import SFT_STEPS

__all__ = [
    "CONFIDENCE",
    "OPTIMUM",
    "OPTIMUM_ESTIMATORS",
    "OPTIMUM_PLUGIN",
    "PA",
    "LMOutcome",
    "LMSetup",
    "MCData",
    "MDPOutcome",
    "MDPSetup",
    "first_wrong_step",
    "lm_task",
    "mc_from_json",
    "mc_json",
    "prepare_mc",
    "reference_model",
    "run_lm_seed",
    "run_mdp",
]

#: The same pattern the task's verifier uses for the final line.
_ANSWER = re.compile(r"^\s*Answer:\s*(-?\d+)\s*$", re.IGNORECASE)
PA = "progress-advantage"
#: The KL-regularised optimum's value per prompt, estimated by LMSetup.optimum_estimator.
OPTIMUM = "KL-optimal policy (MC estimate)"
#: The same from the reference's samples alone, reported beside a mixture estimate.
OPTIMUM_PLUGIN = "KL-optimal policy (reference samples only)"
OPTIMUM_ESTIMATORS = ("reference", "mixture")
CONFIDENCE = ("mean-logprob", "self-certainty", "bottom10-confidence")


# ----------------------------------------------------------------------------- (a) MDP


@dataclass(frozen=True)
class MDPSetup:
    """The tabular experiment; defaults are the full demo's, fixed before any claim."""

    length: int = 10
    slip: float = 0.1
    gamma: float = 0.95
    beta: float = 0.1
    horizon: int = 15
    max_iterations: int = 8000
    tol: float = 1e-3
    groups: int = 200
    val_groups: int = 100
    n_candidates: int = 8


@dataclass
class MDPOutcome:
    """One (family, seed): the identity error, Spearman, convergence, and the uses."""

    identity_error: float
    spearman: float
    convergence: Convergence
    test: Uses
    val: Uses


def run_mdp(setup: MDPSetup, family: str, seed: int) -> MDPOutcome:
    """Exact identity error, Spearman(PA, A*), and the three uses on sampled episodes."""
    mdp = make_chain(setup.length, setup.slip, setup.gamma, seed=seed, reference=family)
    beta = setup.beta
    Q, V, pi_star = soft_value_iteration(mdp, beta)
    _, _, A_eval = evaluate_policy(mdp, pi_star, beta)
    chain = mdp.chain_states
    identity_err = float(np.abs(beta * np.log(pi_star / mdp.ref) - A_eval)[chain].max())
    A_star = Q - V[:, None]
    pi_rl, conv = reinforce_kl(
        mdp, beta, max_iterations=setup.max_iterations, seed=seed, tol=setup.tol
    )
    pa_table = beta * np.log(pi_rl / mdp.ref)
    rho = spearman(pa_table[chain], A_star[chain])
    n_a = mdp.n_actions
    # Self-certainty of a state: KL(U || π(.|s)) = -mean_a log π(a|s) - log |A|.
    certainty = -np.log(pi_rl).mean(axis=1) - np.log(n_a)

    def uses(rng_seed: int, groups: int, prefix: str) -> Uses:
        rng = np.random.default_rng(rng_seed)
        n = groups * setup.n_candidates
        ep = sample_episodes(mdp, pi_rl, n, setup.horizon, rng)
        s, a, alive = ep.states, ep.actions, ep.alive
        steps = alive.sum(1)
        tables = {
            PA: pa_table[s, a],
            "exact-advantage": A_star[s, a],
            "mean-logprob": np.log(pi_rl[s, a]),
            "self-certainty": certainty[s],
        }
        live = {k: np.where(alive, v, np.nan) for k, v in tables.items()}
        traj = {
            PA: np.nansum(live[PA], axis=1),
            "exact-advantage": np.nansum(live["exact-advantage"], axis=1),
            "mean-logprob": np.nanmean(live["mean-logprob"], axis=1),
            "self-certainty": np.nanmean(live["self-certainty"], axis=1),
        }
        step_scores = {k: [v[i, : steps[i]] for i in range(n)] for k, v in tables.items()}
        groups_idx = [
            list(range(g * setup.n_candidates, (g + 1) * setup.n_candidates)) for g in range(groups)
        ]
        first = [int(f) if f >= 0 else None for f in ep.first_error]
        return evaluate_uses(prefix, groups_idx, ep.success, first, steps, traj, step_scores)

    return MDPOutcome(
        identity_error=identity_err,
        spearman=rho,
        convergence=conv,
        test=uses(10_000 + seed, setup.groups, f"{seed}:"),
        val=uses(20_000 + seed, setup.val_groups, f"{seed}:"),
    )


# ----------------------------------------------------------------------------- (b) LM


@dataclass(frozen=True)
class LMSetup:
    """The language-model arm; defaults are the full demo's, fixed before any claim."""

    preset: str = "tiny"
    sft_steps: int = SFT_STEPS  # ~8 min on the shared CPU for two-operation problems
    cached: bool = True
    model: str | None = None  # a reference model folder or hub id instead of the toy's
    rl: RLSettings = field(default_factory=RLSettings)
    betas: tuple[float, ...] = (0.1, 0.5)
    n_test: int = 64
    n_val: int = 24
    n_prm: int = 32
    n_objective: int = 32
    objective_samples: int = 4
    n_candidates: int = 8
    mc_trajectories: int = 68  # x 3 steps each: about 200 (prefix, step) pairs
    mc_rollouts: int = 12
    merge_alpha: float = 0.5
    temperature: float = 1.0
    max_new_tokens: int = 48
    batch_size: int = 128
    # "toy" (bare "3+4*2=" prompts, for the SFT'd toy reference) or "instructed" (the same
    # problems with the format spelled out, for a pretrained instruct model), or a name in
    # toy.REAL_VARIANTS (demo --real: "one-op-chat").
    task: str = "toy"
    # Also estimate the KL-regularised optimum's value per objective prompt,
    # V*(x) = beta log E_ref exp(r/beta), and the policy's gap to it: from the reference's
    # samples alone ("reference", the plug-in soft_value) or from the reference's and the
    # policy's samples together ("mixture", soft_advantage.optimum_value_mixture, which does
    # not read 0 for a prompt the reference's few samples never solved).
    objective_gap: bool = False
    optimum_estimator: str = "reference"

    def __post_init__(self) -> None:
        if self.optimum_estimator not in OPTIMUM_ESTIMATORS:
            raise ProgressAdvantageError(
                f"LMSetup.optimum_estimator: {self.optimum_estimator!r} is not one of "
                f"{', '.join(OPTIMUM_ESTIMATORS)}"
            )


def lm_task(setup: LMSetup) -> Any:
    """The arithmetic task of the LM arm (:attr:`LMSetup.task`)."""
    from progress_advantage.toy import REAL_VARIANTS, instructed_task, toy_task

    if setup.task == "toy":
        return toy_task()
    if setup.task == "instructed":
        return instructed_task()
    if setup.task in REAL_VARIANTS:
        return instructed_task(setup.task)
    raise ValueError(f"unknown LM task {setup.task!r}")


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


def reference_model(setup: LMSetup, progress: bool = True) -> tuple[Any, Any]:
    """The SFT reference: a model folder (``--model``), else the toy's flawed reference
    (cached by :func:`paperstack.tiny.pretrained`, or trained now for ``--quick``)."""
    from paperstack import tiny
    from progress_advantage.toy import FlawedArithmetic

    if setup.model is not None:
        from paperstack.checkpoint import load_pretrained
        from paperstack.llm import prepare_tokenizer

        model, tok = load_pretrained(setup.model, tiny.load)
        # A base model (GPT-2) has no chat template and no pad token: the core's transcript
        # template and EOS padding let it be sampled, rolled out, RL-trained and scored alike.
        prepare_tokenizer(tok, need_chat_template=True, name=setup.model, chat_template="fallback")
        return model, tok
    task = FlawedArithmetic()
    if setup.cached:
        return tiny.pretrained(setup.preset, (task,), steps=setup.sft_steps, progress=progress)
    tok = tiny.build_tokenizer()
    model = tiny.build_model(setup.preset, tok, 0)
    tiny.train(
        model, tok, [task], steps=setup.sft_steps, batch_size=64, progress=progress, num_threads=1
    )
    return model, tok


def chat_prompt(task: Any, example: Any) -> Any:
    """The chat messages an example is asked in: the task's own (``InstructedArithmetic``
    with worked examples as earlier turns), else one user turn holding ``example.prompt``."""
    messages = getattr(task, "messages", None)
    return messages(example) if messages is not None else example.prompt


def _sample(
    model: Any, tok: Any, prompts: Sequence[Any], n: int, seed: int, setup: LMSetup
) -> list[list[str]]:
    from paperstack.llm import TransformersChat

    chat = TransformersChat(model, tok, batch_size=setup.batch_size, name="sampler")
    return chat.generate(
        [[{"role": "user", "content": p}] if isinstance(p, str) else p for p in prompts],
        max_new_tokens=setup.max_new_tokens,
        temperature=setup.temperature,
        n=n,
        seed=seed,
    )


@dataclass
class Labelled:
    """Sampled candidates with the verifier's labels (``trajs[i]`` is None if unscorable)."""

    trajs: list[Any]
    success: np.ndarray
    first_error: list[int | None]
    answers: list[str | None]
    groups: list[list[int]]


def _label(task: Any, examples: Sequence[Any], samples: Sequence[Sequence[str]]) -> Labelled:
    from progress_advantage.trajectory import Trajectory

    trajs: list[Any] = []
    success, first, answers, groups = [], [], [], []
    for ex, cands in zip(examples, samples, strict=True):
        groups.append(list(range(len(trajs), len(trajs) + len(cands))))
        for c in cands:
            ok = bool(task.verify(ex, c))
            success.append(ok)
            first.append(first_wrong_step(task, ex, c))
            ans = task.final_answer(c)
            answers.append(None if ans is None else str(ans))
            has_steps = any(line.strip() for line in c.split("\n"))
            trajs.append(Trajectory.from_lines(chat_prompt(task, ex), c) if has_steps else None)
    return Labelled(trajs, np.array(success, dtype=bool), first, answers, groups)


def _score(scorer: Any, trajs: Sequence[Any], **kw: Any) -> list[Any]:
    live = [t for t in trajs if t is not None]
    scored = iter(scorer.score(live, **kw)) if live else iter([])
    return [next(scored) if t is not None else None for t in trajs]


def _log_ratios(scored: Sequence[Any]) -> np.ndarray:
    """Each sample's sequence log-ratio ``log π/π_ref``: the sum over its steps (the EOS token
    is in no step; an unscorable, empty completion counts as 0, a ratio of 1)."""
    return np.array([0.0 if ts is None else float(ts.log_ratio.sum()) for ts in scored])


def _step_labels(data: Labelled, scored: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """PRM training pairs: step-end features and "this step is correct" labels."""
    feats, labels = [], []
    for ts, fe in zip(scored, data.first_error, strict=True):
        if ts is None or ts.features is None:
            continue
        for t in range(ts.n_steps):
            feats.append(ts.features[t])
            labels.append(fe is None or t < fe)
    return np.array(feats), np.array(labels, dtype=float)


@dataclass
class MCData:
    """Reference samples at every step boundary and the rewards of their MC rollouts."""

    trajs: list[Any]
    prefixes: Any
    rewards: np.ndarray

    def advantages(self, beta: float) -> list[np.ndarray]:
        from progress_advantage.soft_advantage import mc_soft_advantages

        return mc_soft_advantages(self.prefixes, self.rewards, beta)


def prepare_mc(reference: Any, tok: Any, setup: LMSetup, seed: int) -> MCData:
    """One reference sample for each of ``mc_trajectories`` test problems and ``mc_rollouts``
    reference continuations of each of its step prefixes (independent of any policy)."""
    return mc_from_json(setup, seed, mc_json(reference, tok, setup, seed))


def _mc_trajectories(setup: LMSetup, seed: int, samples: Sequence[Sequence[str]]) -> Any:
    """The MC problems (regenerated from the seed), and the trajectories of the samples."""
    task: Any = lm_task(setup)
    examples = task.generate(setup.mc_trajectories, seed=50_000 + seed, split="test")
    data = _label(task, examples, samples)
    keep = [i for i, t in enumerate(data.trajs) if t is not None]
    return task, [examples[i] for i in keep], [data.trajs[i] for i in keep]


def mc_json(reference: Any, tok: Any, setup: LMSetup, seed: int) -> dict[str, Any]:
    """:func:`prepare_mc`'s sampling as JSON (a resumable part): the reference's samples and
    the ``[prefix, rollout]`` rewards; :func:`mc_from_json` rebuilds the trajectories."""
    from progress_advantage.soft_advantage import StepPrefixes, rollout_rewards

    task: Any = lm_task(setup)
    examples = task.generate(setup.mc_trajectories, seed=50_000 + seed, split="test")
    prompts = [chat_prompt(task, e) for e in examples]
    samples = _sample(reference, tok, prompts, 1, 50_000 + seed, setup)
    task, kept, trajs = _mc_trajectories(setup, seed, samples)
    rewards = rollout_rewards(
        reference,
        tok,
        task,
        kept,
        StepPrefixes(trajs),
        setup.mc_rollouts,
        seed=60_000 + seed,
        max_new_tokens=setup.max_new_tokens,
        batch_size=setup.batch_size,
    )
    return {"samples": [list(c) for c in samples], "rewards": rewards.tolist()}


def mc_from_json(setup: LMSetup, seed: int, data: dict[str, Any]) -> MCData:
    """The :class:`MCData` of :func:`mc_json`'s output (computed now or loaded)."""
    from progress_advantage.soft_advantage import StepPrefixes

    _, _, trajs = _mc_trajectories(setup, seed, data["samples"])
    prefixes = StepPrefixes(trajs)
    rewards = np.asarray(data["rewards"], dtype=np.float64).reshape(len(prefixes), -1)
    return MCData(trajs=trajs, prefixes=prefixes, rewards=rewards)


@dataclass
class BetaOutcome:
    """One (β, seed) of the LM arm."""

    rl: RLResult
    objective: dict[str, dict[str, float]]  # "RL policy"/"reference" -> prompt -> J
    mc_spearman: float
    mc_pairs: int
    test: Uses
    val: Uses
    sample_accuracy: dict[str, float]  # test item -> the policy's mean success on that problem


@dataclass
class LMOutcome:
    """One seed of the LM arm: the headroom check and one :class:`BetaOutcome` per β."""

    headroom: dict[str, float]  # reference's own samples: AUROC of its confidences
    reference_accuracy: dict[str, float]
    betas: dict[float, BetaOutcome]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (a resumable part of ``demo``); :meth:`from_json` inverts it exactly."""
        out = asdict(self)
        out["betas"] = [[beta, b] for beta, b in out["betas"].items()]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LMOutcome:
        betas = {}
        for beta, b in data["betas"]:
            betas[float(beta)] = BetaOutcome(
                **{
                    **b,
                    "rl": RLResult(**b["rl"]),
                    "test": Uses(**b["test"]),
                    "val": Uses(**b["val"]),
                }
            )
        return cls(data["headroom"], data["reference_accuracy"], betas)


def _tables(
    scored: Sequence[Any], beta: float, prm: Any | None, merged: Sequence[Any] | None
) -> tuple[dict[str, np.ndarray], dict[str, list[Any]], dict[str, list[Any]]]:
    """Trajectory scores, step scores and PRM blames of every method."""
    from progress_advantage.aggregate import aggregate_trajectory
    from progress_advantage.baselines import confidence_step_scores, confidence_trajectory_scores
    from progress_advantage.scoring import progress_advantage

    n = len(scored)
    aggs = ("mean", "min", "last", "bottom10")
    names = [PA, *(f"{PA} ({a})" for a in aggs), *CONFIDENCE]
    if prm is not None:
        names.append("prm")
    if merged is not None:
        names.append(f"{PA} (merged reference)")
    traj = {k: np.full(n, np.nan) for k in names}
    steps: dict[str, list[Any]] = {k: [None] * n for k in (PA, *CONFIDENCE)}
    blamed: dict[str, list[Any]] = {"prm": [None] * n} if prm is not None else {}
    for i, ts in enumerate(scored):
        if ts is None:
            continue
        a = progress_advantage(ts, beta, "sum")
        traj[PA][i] = aggregate_trajectory(a, "sum")
        for agg in aggs:
            traj[f"{PA} ({agg})"][i] = aggregate_trajectory(a, agg)
        for k, c in confidence_trajectory_scores(ts).items():
            traj[k][i] = c
        steps[PA][i] = a
        for k, st in confidence_step_scores(ts).items():
            steps[k][i] = st
        if prm is not None and ts.features is not None:
            traj["prm"][i] = prm.trajectory_score(ts.features)
            blamed["prm"][i] = prm.blame(ts.features)
        if merged is not None and merged[i] is not None:
            traj[f"{PA} (merged reference)"][i] = float(progress_advantage(merged[i], beta).sum())
    return traj, steps, blamed


def _policy_uses(
    task: Any,
    policy: Any,
    tok: Any,
    scorers: tuple[Any, Any, Any],
    beta: float,
    examples: Sequence[Any],
    sample_seed: int,
    seed: int,
    setup: LMSetup,
) -> tuple[Uses, Labelled]:
    """Sample ``N`` candidates per problem from the policy, label, score, evaluate the uses."""
    scorer, merged_scorer, prm = scorers
    prompts = [chat_prompt(task, e) for e in examples]
    data = _label(
        task, examples, _sample(policy, tok, prompts, setup.n_candidates, sample_seed, setup)
    )
    scored = _score(scorer, data.trajs)
    merged = _score(merged_scorer, data.trajs)
    traj, steps, blamed = _tables(scored, beta, prm, merged)
    n_steps = [t.n_steps if t is not None else 1 for t in data.trajs]
    uses = evaluate_uses(
        f"{seed}:",
        data.groups,
        data.success,
        data.first_error,
        n_steps,
        traj,
        steps,
        blamed,
        data.answers,
    )
    return uses, data


def run_lm_seed(
    reference: Any,
    tok: Any,
    setup: LMSetup,
    seed: int,
    mc: MCData,
    log: Callable[[str], None] = print,
) -> LMOutcome:
    """The headroom check, then one RL policy per β and every measurement of it."""
    from progress_advantage.merging import merged_reference
    from progress_advantage.policy import train_rl_policy
    from progress_advantage.prm import ProcessRewardModel
    from progress_advantage.scoring import LogRatioScorer, progress_advantage
    from progress_advantage.soft_advantage import optimum_value_mixture, soft_value

    task: Any = lm_task(setup)
    test_ex = task.generate(setup.n_test, seed=seed, split="test")
    val_ex = task.generate(setup.n_val, seed=10_000 + seed, split="test")
    prm_ex = task.generate(setup.n_prm, seed=20_000 + seed, split="train")
    obj_ex = task.generate(setup.n_objective, seed=30_000 + seed, split="train")
    n = setup.n_candidates

    # Headroom, before any RL: does the reference's own confidence already predict success?
    ref_data = _label(
        task,
        test_ex,
        _sample(reference, tok, [chat_prompt(task, e) for e in test_ex], n, seed, setup),
    )
    self_scorer = LogRatioScorer(reference, reference, tok, batch_size=setup.batch_size)
    ref_scored = _score(self_scorer, ref_data.trajs, with_reference=False)
    ref_traj, _, _ = _tables(ref_scored, 1.0, None, None)
    ok = ~np.isnan(ref_traj["mean-logprob"])
    headroom = {}
    for k in CONFIDENCE:
        value = auroc(ref_traj[k][ok], ref_data.success[ok])
        if np.isfinite(value):
            headroom[k] = value
    reference_accuracy = {
        f"{seed}:{k}": float(ref_data.success[g].mean()) for k, g in enumerate(ref_data.groups)
    }
    head = headroom.get("mean-logprob")
    log(
        f"  seed {seed}: reference sample accuracy {ref_data.success.mean():.3f}; headroom: "
        "mean log-prob AUROC on its own samples "
        + (
            f"{head:.3f}"
            if head is not None
            else "undefined (all its samples succeeded or all failed)"
        )
    )
    obj_ref = _label(
        task,
        obj_ex,
        _sample(
            reference,
            tok,
            [chat_prompt(task, e) for e in obj_ex],
            setup.objective_samples,
            seed + 3,
            setup,
        ),
    )
    ref_objective = {
        f"{seed}:{k}": float(obj_ref.success[g].mean()) for k, g in enumerate(obj_ref.groups)
    }

    outcomes: dict[float, BetaOutcome] = {}
    for beta in setup.betas:
        settings = RLSettings(**{**setup.rl.__dict__, "beta": beta})
        policy, rl = train_rl_policy(reference, tok, task, settings, seed=seed)
        if hasattr(policy, "merge_and_unload"):
            # A LoRA policy (demo --real) becomes a plain model (the adapter folded into a
            # copy of the base; the reference is untouched): the same log-probabilities, and
            # the merged-reference baseline can average it with the reference weight by weight.
            policy = policy.merge_and_unload()
        log(
            f"  seed {seed}, beta {beta}: RLOO {rl.steps} steps "
            f"({'plateau' if rl.plateaued else 'step cap'}), objective "
            f"{np.mean(rl.objective[:5]):.3f} -> {np.mean(rl.objective[-5:]):.3f}"
        )
        scorer = LogRatioScorer(policy, reference, tok, features=True, batch_size=setup.batch_size)

        # The premise: J = r - beta * KL, per prompt, on fresh training-split prompts.
        obj = _label(
            task,
            obj_ex,
            _sample(
                policy,
                tok,
                [chat_prompt(task, e) for e in obj_ex],
                setup.objective_samples,
                seed + 4,
                setup,
            ),
        )
        obj_scored = _score(scorer, obj.trajs)
        j_pol = {}
        for q, g in enumerate(obj.groups):
            values = []
            for i in g:
                kl = 0.0 if obj_scored[i] is None else float(obj_scored[i].log_ratio.sum())
                values.append(float(obj.success[i]) - beta * kl)
            j_pol[f"{seed}:{q}"] = float(np.mean(values))

        # The optimum's value on the same prompts. The plug-in from the reference's own
        # samples (r is 0/1) is 0 wherever they never succeeded, so it is biased low, much at
        # beta 0.1; the mixture estimate adds the policy's samples, weighted by pi_ref/pi.
        optimum: dict[str, dict[str, float]] = {}
        if setup.objective_gap:
            plugin = {
                f"{seed}:{q}": float(soft_value(obj_ref.success[g].astype(float), beta))
                for q, g in enumerate(obj_ref.groups)
            }
            if setup.optimum_estimator == "mixture":
                ref_lr = _log_ratios(_score(scorer, obj_ref.trajs))
                pol_lr = _log_ratios(obj_scored)
                optimum[OPTIMUM] = {
                    f"{seed}:{q}": optimum_value_mixture(
                        obj_ref.success[gr].astype(float),
                        ref_lr[gr],
                        obj.success[gp].astype(float),
                        pol_lr[gp],
                        beta,
                    )
                    for q, (gr, gp) in enumerate(zip(obj_ref.groups, obj.groups, strict=True))
                }
                optimum[OPTIMUM_PLUGIN] = plugin
            else:
                optimum[OPTIMUM] = plugin

        # A process reward model on the toy's own step labels (policy rollouts, train split).
        prm_data = _label(
            task,
            prm_ex,
            _sample(policy, tok, [chat_prompt(task, e) for e in prm_ex], n, seed + 5, setup),
        )
        x, y = _step_labels(prm_data, _score(scorer, prm_data.trajs))
        prm = ProcessRewardModel().fit(x, y) if 0 < y.mean() < 1 else None

        merged_ref = merged_reference(policy, reference, setup.merge_alpha)
        merged_scorer = LogRatioScorer(policy, merged_ref, tok, batch_size=setup.batch_size)

        scorers = (scorer, merged_scorer, prm)
        val, _ = _policy_uses(task, policy, tok, scorers, beta, val_ex, seed + 10_000, seed, setup)
        test, test_data = _policy_uses(task, policy, tok, scorers, beta, test_ex, seed, seed, setup)

        # Agreement with the Monte-Carlo soft advantage on the reference's step prefixes.
        pa_steps = [progress_advantage(ts, beta, "sum") for ts in scorer.score(mc.trajs)]
        mc_adv = mc.advantages(beta)
        flat_pa = np.concatenate(pa_steps)
        flat_mc = np.concatenate(mc_adv)
        rho = spearman(flat_pa, flat_mc)
        log(
            f"  seed {seed}, beta {beta}: Spearman(PA, MC soft advantage) {rho:.3f} over "
            f"{flat_pa.size} (prefix, step) pairs; test sample accuracy "
            f"{test_data.success.mean():.3f}"
        )
        outcomes[beta] = BetaOutcome(
            rl=rl,
            objective={"RL policy": j_pol, "reference": ref_objective, **optimum},
            mc_spearman=rho,
            mc_pairs=int(flat_pa.size),
            test=test,
            val=val,
            sample_accuracy={
                f"{seed}:{k}": float(test_data.success[g].mean())
                for k, g in enumerate(test_data.groups)
            },
        )
    return LMOutcome(headroom=headroom, reference_accuracy=reference_accuracy, betas=outcomes)
