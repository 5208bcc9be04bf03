"""The two preference losses, in pure PyTorch, numerically equal to trl 1.16's on the same
inputs (``tests/test_loss.py`` runs trl's ``RewardTrainer.compute_loss`` and
``DPOTrainer.compute_loss`` beside them).

The meta-learning loops (:mod:`meta_pref.meta`) differentiate these through
``torch.func``; adaptation then runs trl's own trainers, so both phases optimise one objective.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["bradley_terry_loss", "dpo_loss", "sequence_logps"]


def bradley_terry_loss(
    rewards_chosen: torch.Tensor,
    rewards_rejected: torch.Tensor,
    margin: torch.Tensor | None = None,
) -> torch.Tensor:
    """Bradley-Terry negative log-likelihood of the preferences, averaged over pairs::

        L_BT = - mean_i log σ(r(x_i, y_i⁺) - r(x_i, y_i⁻) - m_i)

    ``rewards_chosen`` = r(x, y⁺), ``rewards_rejected`` = r(x, y⁻), ``margin`` = m (0 if None),
    as trl's ``RewardTrainer`` (without its optional ``center_rewards_coefficient`` term)."""
    delta = rewards_chosen - rewards_rejected
    if margin is not None:
        delta = delta - margin
    return -F.logsigmoid(delta).mean()


def dpo_loss(
    chosen_logps: torch.Tensor,
    rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    beta: float = 0.1,
) -> torch.Tensor:
    """The DPO loss (trl's ``loss_type="sigmoid"``), averaged over pairs::

        L_DPO = - mean_i log σ(β [(log π(y⁺|x) - log π_ref(y⁺|x))
                                  - (log π(y⁻|x) - log π_ref(y⁻|x))])

    The log-probabilities are sums over the response tokens (:func:`sequence_logps`)."""
    delta = (chosen_logps - ref_chosen_logps) - (rejected_logps - ref_rejected_logps)
    return -F.logsigmoid(beta * delta).mean()


def sequence_logps(
    logits: torch.Tensor, input_ids: torch.Tensor, completion_mask: torch.Tensor
) -> torch.Tensor:
    """Σ_t log π(token_t | tokens_<t) over the completion positions of each row: logits at
    position t predict the token at t+1 (trl shifts the same way)."""
    logps = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    targets = input_ids[:, 1:]
    token_logps = logps.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (token_logps * completion_mask[:, 1:]).sum(dim=1)
