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
    assert all(o.scalars["exact_identity_max_error"][0] < 1e-9 for o in mdp)
    arith = SeedOutcome(
        bon={
            "progress-advantage": (6.0, 10),
            "mean-logprob": (5.0, 10),
            "self-certainty": (4.0, 10),
            "bottom10-confidence": (7.0, 10),
        },
        auroc={
            k: (v, 80)
            for k, v in {
                "progress-advantage": 0.7,
                "mean-logprob": 0.6,
                "self-certainty": 0.5,
                "bottom10-confidence": 0.55,
            }.items()
        },
        attribution={"progress-advantage": (5.0, 20), "random": (4.0, 20)},
        scalars={
            "policy_sample_accuracy": (40.0, 80),  # rates are (hits, n)
            "reference_sample_accuracy": (32.0, 80),
            "policy_training_reward": (60.0, 80),
            "reference_training_reward": (56.0, 80),
        },
    )
    rows = build_rows(mdp, [arith, arith])
    rate = {(r.system, r.metric): (r.value, r.n) for r in rows if r.split.startswith("arith")}
    assert rate["GRPO policy", "sample_accuracy"] == (0.5, 160)
    assert rate["reference (SFT)", "sample_accuracy"] == (0.4, 160)
    assert rate["GRPO policy", "training_reward"] == (0.75, 160)
    assert rate["reference (SFT)", "training_reward"] == (0.7, 160)
    claims = {c.id: c for c in build_claims(rows)}
    assert set(claims) == {
        "pa_matches_exact_advantage",
        "pa_bon_beats_confidence",
        "pa_auroc_beats_confidence",
        "pa_attribution_above_chance",
    }
    assert not claims["pa_bon_beats_confidence"].held  # 0.6 < best confidence 0.7
    assert claims["pa_auroc_beats_confidence"].held
    assert claims["pa_attribution_above_chance"].held
