"""A Monte-Carlo estimate of the soft advantage, from the reference alone.

For KL-regularised RL with a terminal reward ``r`` (the verifier's 0/1) the optimal soft value
of a partial solution ``s`` (prompt plus the steps written so far) is

    V*(s) = β · log E_{y ~ π_ref(·|s)} [exp(r(s, y) / β)],

and since a step moves deterministically from ``s`` to ``s·a`` with no reward of its own, the
optimal advantage of the step is ``A*(s, a) = V*(s·a) − V*(s)``: the quantity progress
advantage claims to recover as ``β · Σ_{tokens of a} log π_RL/π_ref``. Both values are
estimated here by sampling ``m`` completions of each prefix from the *reference* (temperature
1, no top-k/top-p truncation: ``π_ref`` itself) and checking them with the verifier:

    V̂(s) = β · log( (1/m) Σ_i exp(r_i / β) ),     Â(s, a) = V̂(s·a) − V̂(s).

The estimate needs no RL policy, so it is an independent ground truth for how well a *trained*
policy's log-ratio matches ``A*``. ``V̂`` is computed with a log-sum-exp (``exp(1/β)`` is
``e^10`` at ``β = 0.1``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.trajectory import Trajectory

__all__ = [
    "StepPrefixes",
    "mc_soft_advantages",
    "optimum_value_mixture",
    "rollout_rewards",
    "soft_value",
]


def soft_value(rewards: ArrayLike, beta: float) -> np.ndarray:
    """``β log mean exp(r/β)`` over the last axis (one value per row of rewards)."""
    if not beta > 0:
        raise ProgressAdvantageError(f"soft_value: beta must be > 0, got {beta}")
    r = np.asarray(rewards, dtype=np.float64)
    if r.size == 0 or r.shape[-1] == 0:
        raise ProgressAdvantageError("soft_value: no rollouts")
    z = r / beta
    top = z.max(axis=-1, keepdims=True)
    lse = top[..., 0] + np.log(np.exp(z - top).mean(axis=-1))
    return np.asarray(beta * lse)


def optimum_value_mixture(
    ref_rewards: ArrayLike,
    ref_log_ratio: ArrayLike,
    pol_rewards: ArrayLike,
    pol_log_ratio: ArrayLike,
    beta: float,
) -> float:
    """``V*(x) = β log E_ref exp(r/β)`` from the reference's ``m`` samples *and* a policy's
    ``n`` samples of the same prompt (multiple importance sampling, balance heuristic):

        Ê = Σ_i exp(r_i/β) / (m + n·w_i),   w_i = π(y_i|x) / π_ref(y_i|x),

    summed over all ``m + n`` samples; ``log_ratio`` is ``log w_i`` of each. ``Ê`` is unbiased
    for ``E_ref exp(r/β)`` whatever the policy: a reference sample contributes
    ``m·E_ref[f/(m+n w)]`` in expectation, a policy sample ``n·E_π[f/(m+n w)] =
    n·E_ref[w f/(m+n w)]``, and the two add up to ``E_ref f``. With ``π = π_ref`` it is the
    plug-in :func:`soft_value` of the pooled samples.

    Why not the reference's samples alone: with a 0/1 reward and ``β = 0.1``,
    ``V* = β log(1 + p(e^{1/β} − 1)) ≈ 1 + β log p`` for a prompt the reference solves with
    probability ``p``, and the plug-in is 0 whenever none of its ``m`` samples succeeds (``p =
    0.05``: 0 of 16 samples 44% of the time, where ``V*`` is 0.70). It underestimates ``V*`` on
    exactly the prompts that RL improves most, and so flatters a policy's gap to the optimum.
    The RL policy solves those prompts often, and its successes, weighted by ``π_ref/π``, fill
    ``p`` in. The log of ``Ê`` is still biased low (Jensen), far less once ``Ê`` is rarely 0.
    """
    if not beta > 0:
        raise ProgressAdvantageError(f"optimum_value_mixture: beta must be > 0, got {beta}")
    r_ref = np.asarray(ref_rewards, dtype=np.float64).ravel()
    r_pol = np.asarray(pol_rewards, dtype=np.float64).ravel()
    l_ref = np.asarray(ref_log_ratio, dtype=np.float64).ravel()
    l_pol = np.asarray(pol_log_ratio, dtype=np.float64).ravel()
    if r_ref.shape != l_ref.shape or r_pol.shape != l_pol.shape:
        raise ProgressAdvantageError(
            "optimum_value_mixture: one log-ratio per sample needed, got "
            f"{l_ref.size} for {r_ref.size} reference and {l_pol.size} for {r_pol.size} policy "
            "samples"
        )
    m, n = r_ref.size, r_pol.size
    if m == 0:
        raise ProgressAdvantageError("optimum_value_mixture: no reference samples")
    r = np.concatenate([r_ref, r_pol])
    log_w = np.concatenate([l_ref, l_pol])
    if not np.all(np.isfinite(log_w)):
        raise ProgressAdvantageError("optimum_value_mixture: a log-ratio is not finite")
    # log Ê = logsumexp_i (r_i/β − log(m + n·e^{log w_i})), computed in log space (e^{1/β}).
    denom = np.logaddexp(np.log(m), np.log(n) + log_w) if n else np.full(m, np.log(m))
    z = r / beta - denom
    top = z.max()
    return float(beta * (top + np.log(np.exp(z - top).sum())))


class StepPrefixes:
    """The prefixes of one-turn trajectories at every step boundary.

    For a trajectory whose completion has steps ``1..T`` (character spans, as
    :meth:`Trajectory.from_lines` makes them), prefix ``t`` is the completion up to the end of
    step ``t`` (prefix 0 is empty), so step ``t`` leads from prefix ``t-1`` to prefix ``t``.
    """

    def __init__(self, trajectories: Sequence[Trajectory]) -> None:
        self.trajectories = list(trajectories)
        self.prompts: list[str] = []  # the chat messages before the completion, as JSON
        self.texts: list[str] = []
        self.owner: list[tuple[int, int]] = []  # (trajectory, boundary t)
        for k, traj in enumerate(self.trajectories):
            messages = traj.messages
            last = len(messages) - 1
            if (
                last < 1
                or messages[last]["role"] != "assistant"
                or any(s.message != last for s in traj.steps)
            ):
                raise ProgressAdvantageError(
                    f"trajectory {traj.id or k}: soft advantages need a prompt and a last "
                    "assistant turn holding the steps"
                )
            completion = messages[last]["content"]
            head = json.dumps([dict(m) for m in messages[:last]])
            ends = [0, *(s.end for s in traj.steps)]
            for t, end in enumerate(ends):
                self.prompts.append(head)
                self.texts.append(completion[:end])
                self.owner.append((k, t))

    def __len__(self) -> int:
        return len(self.texts)


def rollout_rewards(
    reference: Any,
    tokenizer: Any,
    task: Any,
    examples: Sequence[Any],
    prefixes: StepPrefixes,
    m: int,
    seed: int,
    max_new_tokens: int = 48,
    batch_size: int = 256,
) -> np.ndarray:
    """``[len(prefixes), m]`` verifier rewards of ``m`` reference continuations of each prefix.

    ``examples[k]`` is the task example of trajectory ``k`` (its verifier). A continuation is
    sampled after the chat prompt and the prefix text (the assistant turn so far), and the
    reward is the verifier's verdict on prefix + continuation.
    """
    from paperstack.llm import TransformersChat, ensure_chat_template

    if m < 1:
        raise ProgressAdvantageError(f"rollouts per prefix must be >= 1, got {m}")
    # The prefixes continue an assistant turn rendered by the chat template; a base model's
    # tokenizer (GPT-2) gets the core's transcript template, as the samples were drawn in.
    ensure_chat_template(tokenizer, name="reference")
    chat = TransformersChat(reference, tokenizer, batch_size=batch_size, name="reference")
    heads = {
        p: tokenizer.apply_chat_template(json.loads(p), add_generation_prompt=True, tokenize=False)
        for p in set(prefixes.prompts)
    }
    prompts = [heads[p] + text for p, text in zip(prefixes.prompts, prefixes.texts, strict=True)]
    outs = chat.generate(prompts, max_new_tokens=max_new_tokens, temperature=1.0, n=m, seed=seed)
    rewards = np.zeros((len(prefixes), m))
    for i, ((k, _), text, conts) in enumerate(
        zip(prefixes.owner, prefixes.texts, outs, strict=True)
    ):
        rewards[i] = [float(task.verify(examples[k], text + c)) for c in conts]
    return rewards


def mc_soft_advantages(
    prefixes: StepPrefixes, rewards: np.ndarray, beta: float
) -> list[np.ndarray]:
    """``Â(s_{t-1}, a_t) = V̂(s_t) − V̂(s_{t-1})`` for every step of every trajectory."""
    if rewards.shape[0] != len(prefixes):
        raise ProgressAdvantageError(
            f"mc_soft_advantages: {rewards.shape[0]} reward rows for {len(prefixes)} prefixes"
        )
    values = soft_value(rewards, beta)
    per: list[list[float]] = [[] for _ in prefixes.trajectories]
    for (k, _), v in zip(prefixes.owner, values, strict=True):
        per[k].append(float(v))
    return [np.diff(np.asarray(v)) for v in per]
