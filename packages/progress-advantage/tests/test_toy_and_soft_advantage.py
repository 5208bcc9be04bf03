"""The LM toy (a flawed teacher, harmless order variety) and the Monte-Carlo soft advantage."""

import random

import numpy as np
import pytest
import torch
from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.merging import merged_reference
from progress_advantage.soft_advantage import (
    StepPrefixes,
    mc_soft_advantages,
    optimum_value_mixture,
    rollout_rewards,
    soft_value,
)
from progress_advantage.toy import FlawedArithmetic, is_flaw_site, toy_task
from progress_advantage.trajectory import Trajectory

from paperstack import tasks
from paperstack.tasks.arithmetic import parse_step


def test_teacher_is_wrong_exactly_at_flaw_sites_and_consistent_after():
    task = FlawedArithmetic(flaw_prob=1.0)
    ar = tasks.get("arithmetic")
    examples = task.generate(300, seed=1)
    flawed = [e for e in examples if e.meta["taught_flawed"]]
    assert 0.15 < len(flawed) / len(examples) < 0.4  # about a quarter to a third of problems
    for e in examples:
        steps = [parse_step(x) for x in e.answer.splitlines()[:-1]]
        for a, op, b, c in steps:
            right = a * b if op == "*" else a + b if op == "+" else a - b
            assert (c != right) == is_flaw_site(a, op, b)
        # the solution goes on from the value it wrote
        assert e.answer.splitlines()[-1] == f"Answer: {steps[-1][3]}"
        assert ar.verify(e, e.answer) == (not e.meta["taught_flawed"])
    clean = FlawedArithmetic(flaw_prob=0.0).generate(100, seed=1)
    assert all(ar.verify(e, e.answer) for e in clean)
    assert all(all(ar.check_steps(e, e.answer)) for e in clean)  # spacing is harmless


def test_spacing_varies_and_never_changes_a_verdict():
    task = FlawedArithmetic(flaw_prob=0.0)
    tokens = [2, "*", 3, "+", 4, "*", 5]
    lines = {tuple(task.teacher_steps(tokens, random.Random(k))[0]) for k in range(40)}
    assert len(lines) > 1
    assert {line.replace(" ", "") for variant in lines for line in variant} == {
        "2*3=6",
        "4*5=20",
        "6+20=26",
    }


def test_flawed_task_has_the_arithmetic_test_split():
    a = {e.prompt for e in FlawedArithmetic().generate(200, seed=0, split="train")}
    b = {e.prompt for e in toy_task().generate(200, seed=0, split="test")}
    assert b
    assert not a & b
    # the toy's sizes: two operations over 1..6 (two step lines and the answer)
    assert all(len(e.meta["steps"]) == 2 for e in toy_task().generate(50, seed=3))
    assert max(int(t) for e in FlawedArithmetic().generate(200) for t in e.meta["tokens"][::2]) == 6


def test_soft_value_known_answers():
    assert soft_value([0.0, 0.0], 0.1) == pytest.approx(0.0)
    assert soft_value([1.0, 1.0, 1.0], 0.1) == pytest.approx(1.0)
    # beta log((1 + e^(1/beta)) / 2) with one success of two
    assert soft_value([1.0, 0.0], 0.5) == pytest.approx(0.5 * np.log((1 + np.e**2) / 2))
    # large 1/beta is stable (log-sum-exp)
    assert np.isfinite(soft_value([1.0, 0.0], 1e-4))
    assert soft_value([[1.0, 0.0], [0.0, 0.0]], 0.1).shape == (2,)
    with pytest.raises(ProgressAdvantageError, match="beta"):
        soft_value([1.0], 0.0)


def test_optimum_mixture_is_the_plugin_when_the_policy_is_the_reference():
    ref, pol = [1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]
    got = optimum_value_mixture(ref, np.zeros(3), pol, np.zeros(4), 0.1)
    assert got == pytest.approx(float(soft_value(ref + pol, 0.1)))


def test_optimum_mixture_fills_in_a_prompt_the_reference_never_solved():
    """Known answer: pi_ref solves with p = 0.05, the policy with 0.8 (one success string).
    16 failed reference samples read V* = 0 by the plug-in; the mixture, given the policy's 16
    successes, reads beta log(16 e^10 / (16 + 16 * 16) + 16 / (16 + 16 * w_fail))."""
    beta, w_ok, w_fail = 0.1, 0.8 / 0.05, 0.2 / 0.95
    ref_r, ref_lr = np.zeros(16), np.full(16, np.log(w_fail))
    pol_r, pol_lr = np.ones(16), np.full(16, np.log(w_ok))
    assert float(soft_value(ref_r, beta)) == 0.0
    got = optimum_value_mixture(ref_r, ref_lr, pol_r, pol_lr, beta)
    want = beta * np.log(16 * np.exp(1 / beta) / (16 + 16 * w_ok) + 16 / (16 + 16 * w_fail))
    assert got == pytest.approx(want)
    truth = beta * np.log(0.95 + 0.05 * np.exp(1 / beta))  # 0.70
    assert abs(got - truth) < 0.03


def test_optimum_mixture_is_unbiased_for_the_exponential_moment():
    """Over many draws from a small categorical world, mean(exp(V_hat / beta)) is
    E_ref exp(r / beta), whichever policy drew the second half of the samples."""
    rng = np.random.default_rng(0)
    beta = 0.5
    reward = np.array([0.0, 0.0, 1.0, 1.0])
    p_ref = np.array([0.6, 0.3, 0.07, 0.03])
    p_pol = np.array([0.2, 0.1, 0.5, 0.2])
    truth = float(p_ref @ np.exp(reward / beta))
    m, n, reps = 4, 4, 20_000
    ys_ref = rng.choice(4, size=(reps, m), p=p_ref)
    ys_pol = rng.choice(4, size=(reps, n), p=p_pol)
    log_w = np.log(p_pol / p_ref)
    est = [
        np.exp(optimum_value_mixture(reward[a], log_w[a], reward[b], log_w[b], beta) / beta)
        for a, b in zip(ys_ref, ys_pol, strict=True)
    ]
    assert np.mean(est) == pytest.approx(truth, rel=0.02)
    # the reference's samples alone: unbiased too, but far noisier at the same m
    plugin = [np.exp(float(soft_value(reward[a], beta)) / beta) for a in ys_ref]
    assert np.std(est) < 0.7 * np.std(plugin)


def test_optimum_mixture_refuses_bad_input():
    with pytest.raises(ProgressAdvantageError, match="beta"):
        optimum_value_mixture([1.0], [0.0], [], [], 0.0)
    with pytest.raises(ProgressAdvantageError, match="one log-ratio per sample"):
        optimum_value_mixture([1.0, 0.0], [0.0], [], [], 0.1)
    with pytest.raises(ProgressAdvantageError, match="no reference samples"):
        optimum_value_mixture([], [], [1.0], [0.0], 0.1)
    with pytest.raises(ProgressAdvantageError, match="not finite"):
        optimum_value_mixture([1.0], [np.inf], [], [], 0.1)


def test_mc_soft_advantages_telescope_to_the_value_change():
    trajs = [Trajectory.from_lines("1+2*3=", "2*3=6\n1+6=7\nAnswer: 7")]
    prefixes = StepPrefixes(trajs)
    assert prefixes.texts == ["", "2*3=6", "2*3=6\n1+6=7", "2*3=6\n1+6=7\nAnswer: 7"]
    rewards = np.array([[0, 1, 0, 1], [1, 1, 0, 1], [1, 1, 1, 1], [1, 1, 1, 1]], dtype=float)
    (adv,) = mc_soft_advantages(prefixes, rewards, 0.1)
    v = soft_value(rewards, 0.1)
    assert adv == pytest.approx(np.diff(v))
    assert adv.sum() == pytest.approx(v[-1] - v[0])


def test_rollouts_from_a_prefix_are_verified_as_prefix_plus_continuation(micro):
    _, reference, tok = micro
    task = tasks.get("arithmetic")
    ex = task.make([1, "+", 2])
    trajs = [Trajectory.from_lines(ex.prompt, "1+2=3\nAnswer: 3")]
    prefixes = StepPrefixes(trajs)
    rewards = rollout_rewards(reference, tok, task, [ex], prefixes, m=3, seed=0, max_new_tokens=4)
    assert rewards.shape == (3, 3)
    # the last prefix already holds the right answer; an untrained model rarely adds one
    assert rewards[-1].mean() >= rewards[0].mean()


def test_merged_reference_interpolates_weights(micro):
    policy, reference, _ = micro
    at0 = merged_reference(policy, reference, 0.0)
    at1 = merged_reference(policy, reference, 1.0)
    half = merged_reference(policy, reference, 0.5)
    for p, r, a, b, h in zip(
        policy.parameters(),
        reference.parameters(),
        at0.parameters(),
        at1.parameters(),
        half.parameters(),
        strict=True,
    ):
        torch.testing.assert_close(a, r)
        torch.testing.assert_close(b, p)
        torch.testing.assert_close(h, (p + r) / 2)  # tied embeddings merged once, not twice
    trimmed = merged_reference(policy, reference, 1.0, method="ties", density=0.1)
    w = dict(trimmed.named_parameters())["model.layers.0.mlp.up_proj.weight"]
    r = dict(reference.named_parameters())["model.layers.0.mlp.up_proj.weight"]
    changed = (w != r).float().mean().item()
    assert 0.05 < changed < 0.15
    with pytest.raises(ProgressAdvantageError, match="alpha"):
        merged_reference(policy, reference, 1.5)


def test_authors_single_vector_merges_reduce_as_documented(micro):
    policy, reference, _ = micro
    pairs = [
        (merged_reference(policy, reference, 0.7, "emr"), merged_reference(policy, reference, 0.7)),
        (
            merged_reference(policy, reference, 0.7, "dare_ties", density=0.3, seed=4),
            merged_reference(policy, reference, 0.7, "dare_linear", density=0.3, seed=4),
        ),
    ]
    for alias, base in pairs:
        for a, b in zip(alias.parameters(), base.parameters(), strict=True):
            torch.testing.assert_close(a, b)
    with pytest.raises(ProgressAdvantageError, match="merge method 'slerp'"):
        merged_reference(policy, reference, 0.5, "slerp")


def test_real_variants_ask_after_worked_example_turns():
    """`demo --real`'s task: the worked examples are earlier chat turns, the problem the last
    user turn, the gold solution passes the verifier, and RLOO's dataset carries the turns."""
    from progress_advantage.experiment import LMSetup, chat_prompt, lm_task
    from progress_advantage.toy import REAL_VARIANTS, instructed_task

    task = lm_task(LMSetup(task="one-op-chat"))
    assert task is REAL_VARIANTS["one-op-chat"]
    (ex,) = task.generate(1, seed=100, split="test")
    msgs = chat_prompt(task, ex)
    assert [m["role"] for m in msgs] == ["user", "assistant"] * 3 + ["user"]
    assert msgs[-1]["content"] == ex.prompt == f"{ex.meta['expression']}="
    assert len(ex.meta["steps"]) == 1
    assert task.verify(ex, ex.answer)
    assert not task.verify(ex, ex.answer.replace("Answer:", "Answer: 1"))
    for problem, solution in task.shots:  # the shots solve their own problems
        shot = task.make([int(problem[0]), problem[1], int(problem[2])])
        assert shot.answer == solution
    ds = task.to_dataset([ex], conversational=True)
    assert ds[0]["prompt"] == msgs
    assert chat_prompt(toy_task(), ex) == ex.prompt  # the toy keeps one plain user turn
    with pytest.raises(ValueError, match="unknown instructed task variant"):
        instructed_task("nope")


def test_step_prefixes_keep_the_turns_before_the_completion():
    shots = [{"role": "user", "content": "2+3="}, {"role": "assistant", "content": "2+3=5"}]
    prompt = [*shots, {"role": "user", "content": "4+1="}]
    traj = Trajectory.from_lines(prompt, "4+1=5\nAnswer: 5")
    prefixes = StepPrefixes([traj])
    assert len(prefixes) == 3
    import json

    assert {json.dumps(prompt)} == set(prefixes.prompts)
    assert prefixes.texts == ["", "4+1=5", "4+1=5\nAnswer: 5"]
    extra = ({"role": "user", "content": "next"},)  # the steps are no longer in the last turn
    bad = Trajectory(messages=(*traj.messages, *extra), steps=traj.steps)
    with pytest.raises(ProgressAdvantageError, match="last assistant turn"):
        StepPrefixes([bad])


def test_lm_setup_refuses_an_unknown_optimum_estimator():
    from progress_advantage.experiment import LMSetup

    with pytest.raises(ProgressAdvantageError, match="optimum_estimator: 'exact' is not one of"):
        LMSetup(optimum_estimator="exact")
