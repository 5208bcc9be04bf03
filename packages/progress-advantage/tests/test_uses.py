import numpy as np
from progress_advantage.beam import BeamSettings, step_beam_search
from progress_advantage.demo import build_claims, build_rows
from progress_advantage.experiment import MDPSetup, SeedOutcome, first_wrong_step, run_mdp
from progress_advantage.metrics import auroc
from progress_advantage.orm import OutcomeRewardModel

from paperstack import tasks


def test_first_wrong_step_follows_the_step_checker():
    task = tasks.get("arithmetic")
    ex = task.make([3, "+", 4, "*", 2])
    assert first_wrong_step(task, ex, "4*2=8\n3+8=11\nAnswer: 11") is None
    assert first_wrong_step(task, ex, "3+4=7\n7*2=14\nAnswer: 14") == 0
    assert first_wrong_step(task, ex, "4*2=8\n3+8=12\nAnswer: 12") == 1
    assert first_wrong_step(task, ex, "4*2=8\n3+8=11\nAnswer: 12") == 2


def test_orm_learns_a_separable_outcome():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5))
    y = x[:, 0] + 0.1 * rng.normal(size=200) > 0
    orm = OutcomeRewardModel().fit(x, y)
    assert auroc(orm.logit(x), y) > 0.95
    assert orm.step_scores(x[:3]).shape == (3,)


def test_beam_search_returns_one_scored_trajectory_per_prompt(micro):
    policy, reference, tok = micro
    out = step_beam_search(
        policy, reference, tok, ["1+2=", "3*3="], BeamSettings(max_steps=2, max_step_tokens=6)
    )
    assert len(out) == 2
    assert all(isinstance(t.extra["score"], float) and t.n_steps >= 1 for t in out)


def test_mdp_experiment_and_claims_follow_from_rows():
    small = MDPSetup(length=6, iterations=150, groups=20)
    mdp = [run_mdp(small, s) for s in (0, 1)]
    assert all(o.scalars["exact_identity_max_error"] < 1e-9 for o in mdp)
    items = [f"{s}:{k}" for s in (0, 1) for k in range(10)]

    def hits(rate):  # per-item 0/1 hits with the given fraction of ones, same items everywhere
        return {key: float(k % 10 < rate * 10) for k, key in enumerate(items)}

    def outcome(seed, shift):
        own = [key for key in items if key.startswith(f"{seed}:")]
        return SeedOutcome(
            bon={
                name: {k: v for k, v in hits(rate).items() if k in own}
                for name, rate in {
                    "progress-advantage": 0.6,
                    "mean-logprob": 0.5,
                    "self-certainty": 0.4,
                    "bottom10-confidence": 0.7,
                }.items()
            },
            auroc={
                "progress-advantage": 0.7 + shift,
                "mean-logprob": 0.6 + shift,
                "self-certainty": 0.5,
                "bottom10-confidence": 0.55,
            },
            attribution={
                "progress-advantage": {k: v for k, v in hits(0.9).items() if k in own},
                "uniform step": {k: 0.25 for k in own},
            },
            rates={
                "policy_training_reward": {k: v for k, v in hits(0.8).items() if k in own},
                "reference_training_reward": {k: v for k, v in hits(0.5).items() if k in own},
            },
        )

    rows = build_rows((0, 1), mdp, (0, 1), [outcome(0, 0.0), outcome(1, 0.02)])
    by = {(r.system, r.metric, r.split): r for r in rows}
    assert by["RL policy", "training_reward", "arithmetic-train"].items is not None
    assert by["progress-advantage", "auroc", "arithmetic"].seeds == {"0": 0.7, "1": 0.72}
    spearman_row = by["progress-advantage", "spearman_vs_exact", "mdp"]
    assert -1.0 <= spearman_row.ci95[0] <= spearman_row.ci95[1] <= 1.0  # clipped to the range
    claims = {c.id: c for c in build_claims(rows)}
    assert claims["exact_identity"].verdict == "held"
    assert claims["exact_identity"].exact
    assert claims["pa_bon_beats_confidence"].verdict != "held"  # 0.6 < best confidence 0.7
    assert claims["pa_auroc_beats_confidence"].method == "paired-t"
    assert claims["pa_attribution_above_chance"].verdict == "held"
    assert claims["premise_rl_raised_training_reward"].method == "paired-bootstrap"
