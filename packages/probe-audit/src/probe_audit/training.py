"""Training an auditor on its own episodes: GRPO, DPO and a trajectory-balance GFlowNet.

All three objectives update the same :class:`~probe_audit.auditors.ModelAuditor` from the same
rollouts. A step plays ``group_size`` episodes of each of ``scenarios_per_step`` scenarios
(per domain) against the target, scores each episode with the composite reward
:math:`R(\\tau)` (:mod:`probe_audit.reward`) and computes, with
:math:`\\log\\pi_\\theta(\\tau) = \\sum_t m_t \\log\\pi_\\theta(y_t\\mid y_{<t})`
over the tokens the auditor sampled (``env_mask`` :math:`m_t = 1`; the target's replies are
context only):

- **GRPO** (group-relative policy gradient; one on-policy step per batch, so the clipped
  ratio is 1 and the loss is the plain policy gradient with group-normalised advantages)

  .. math:: A_i = \\frac{R_i - \\operatorname{mean}_g R}{\\operatorname{std}_g R + \\epsilon},
     \\qquad L = -\\frac{\\sum_i A_i \\log\\pi_\\theta(\\tau_i)}{\\sum_i |\\tau_i|}

- **DPO** on the best and worst episode of each group (skipped when they tie), against the
  frozen starting model :math:`\\pi_{ref}`

  .. math:: L = -\\log\\sigma\\Big(\\beta\\big[(\\log\\pi_\\theta - \\log\\pi_{ref})(\\tau^+)
     - (\\log\\pi_\\theta - \\log\\pi_{ref})(\\tau^-)\\big]\\Big)

- **GFlowNet, trajectory balance** (Malkin et al. 2022): sample auditor turns in proportion to
  :math:`\\exp(R/T)` rather than maximise :math:`R`, which is what should keep the auditor's
  violations diverse

  .. math:: L = \\big(\\log Z + \\log\\pi_\\theta(\\tau) - R(\\tau)/T\\big)^2

  with a learned scalar :math:`\\log Z` (set on the first batch to the mean of
  :math:`R/T - \\log\\pi_\\theta`, trained at ``logz_lr``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from probe_audit.errors import ProbeError

__all__ = ["OBJECTIVES", "AuditorTrainer", "TrainConfig", "sequence_logprobs"]

OBJECTIVES = ("grpo", "dpo", "gflownet")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Budget and hyper-parameters of one training run (fixed before any claim was seen)."""

    objective: str = "grpo"
    steps: int = 20
    scenarios_per_step: int = 4
    group_size: int = 4
    lr: float = 1e-3
    dpo_beta: float = 0.1
    tb_temperature: float = 0.25
    logz_lr: float = 0.05
    max_turns: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ProbeError(f"objective {self.objective!r}; known: {', '.join(OBJECTIVES)}")
        if self.steps < 0 or self.scenarios_per_step < 1 or self.group_size < 2:
            raise ProbeError(
                f"steps={self.steps}, scenarios_per_step={self.scenarios_per_step}, "
                f"group_size={self.group_size}: need steps >= 0, scenarios >= 1, group >= 2"
            )
        if not (self.lr > 0 and self.dpo_beta > 0 and self.tb_temperature > 0):
            raise ProbeError("lr, dpo_beta and tb_temperature must be > 0")


def sequence_logprobs(model: Any, trajectories: Sequence[Any], pad_id: int) -> tuple[Any, Any]:
    """``(sum of log-probs of the sampled tokens, their count)`` per trajectory, differentiable."""
    import torch

    seqs = [t.prompt_ids + t.completion_ids for t in trajectories]
    width = max(len(s) for s in seqs)
    device = next(model.parameters()).device
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    mask = torch.zeros((len(seqs), width), dtype=torch.float32)
    for k, (s, t) in enumerate(zip(seqs, trajectories, strict=True)):
        ids[k, : len(s)] = torch.tensor(s, dtype=torch.long)
        attention[k, : len(s)] = 1
        start = len(t.prompt_ids)
        mask[k, start : len(s)] = torch.tensor(t.env_mask, dtype=torch.float32)
    ids, attention, mask = ids.to(device), attention.to(device), mask.to(device)
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    m = mask[:, 1:]
    return (logp * m).sum(-1), m.sum(-1)


class AuditorTrainer:
    """Train ``auditor`` against ``targets`` (domain name -> target) in ``worlds`` (domain name
    -> Domain) with one objective; ``reward(episode, domain, target)`` fills the episode's
    violations and returns its composite reward terms (``"total"`` is what is optimised)."""

    def __init__(
        self,
        auditor: Any,
        worlds: Mapping[str, Any],
        targets: Mapping[str, Any],
        reward: Any,
        config: TrainConfig,
        archive: Any = None,
    ) -> None:
        import torch

        self.auditor = auditor
        self.worlds = dict(worlds)
        self.targets = dict(targets)
        self.reward = reward
        self.config = config
        self.archive = archive
        model = auditor.model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        self.reference = None
        if config.objective == "dpo":
            self.reference = copy.deepcopy(model).eval()
            for p in self.reference.parameters():
                p.requires_grad_(False)
        self.log_z = torch.nn.Parameter(torch.zeros(()))
        self.z_optimizer = torch.optim.Adam([self.log_z], lr=config.logz_lr)
        self._z_ready = False
        self.history: list[dict[str, float]] = []
        self.step_seconds: list[float] = []

    # ------------------------------------------------------------------ rollouts

    def rollout(self, step: int) -> tuple[list[Any], list[float], list[list[int]]]:
        """Play one step's episodes: ``(trajectories, rewards, groups of indices)``."""
        from probe_audit.game import GameConfig, play

        cfg = self.config
        trajs: list[Any] = []
        rewards: list[float] = []
        groups: list[list[int]] = []
        for d, (name, domain) in enumerate(sorted(self.worlds.items())):
            db_seed = 10_000 + cfg.seed * 1_000 + step
            db = domain.database(db_seed)
            base = domain.make_scenarios(db, cfg.scenarios_per_step, db_seed + d)
            scenarios = [s for s in base for _ in range(cfg.group_size)]
            ids = [
                f"train-{name}-{step}-{k // cfg.group_size}-{k % cfg.group_size}"
                for k in range(len(scenarios))
            ]
            with self.auditor.recording() as recorded:
                episodes = play(
                    domain, scenarios, self.auditor, self.targets[name], db,
                    GameConfig(max_turns=cfg.max_turns, on_target_error="record"),
                    episode_ids=ids,
                )  # fmt: skip
            found: list[str] = []
            for g in range(len(base)):
                group = []
                for ep in episodes[g * cfg.group_size : (g + 1) * cfg.group_size]:
                    terms = self.reward(ep, domain, self.targets[name])
                    found.extend(v.rule_id for v in ep.violations)
                    group.append(len(trajs))
                    trajs.append(recorded[ep.id])
                    rewards.append(float(terms["total"]))
                groups.append(group)
            if self.archive is not None:
                self.archive.add(found)
        return trajs, rewards, groups

    # ------------------------------------------------------------------ losses

    def loss(
        self, trajs: Sequence[Any], rewards: Sequence[float], groups: Sequence[Sequence[int]]
    ) -> Any:
        import torch

        cfg = self.config
        model = self.auditor.model
        pad = self.auditor.pad_token_id
        r = torch.tensor(rewards, dtype=torch.float32)
        if cfg.objective == "grpo":
            adv = torch.zeros_like(r)
            for g in groups:
                rg = r[list(g)]
                adv[list(g)] = (rg - rg.mean()) / (rg.std(unbiased=False) + 1e-4)
            if not bool(adv.abs().sum() > 0):
                return None
            logp, count = sequence_logprobs(model, trajs, pad)
            return -(adv * logp).sum() / count.sum().clamp(min=1)
        if cfg.objective == "dpo":
            pairs = []
            for g in groups:
                best = max(g, key=lambda i: rewards[i])
                worst = min(g, key=lambda i: rewards[i])
                if rewards[best] > rewards[worst]:
                    pairs.append((best, worst))
            if not pairs:
                return None
            chosen = [trajs[b] for b, _ in pairs]
            rejected = [trajs[w] for _, w in pairs]
            lp_c, _ = sequence_logprobs(model, chosen, pad)
            lp_r, _ = sequence_logprobs(model, rejected, pad)
            with torch.no_grad():
                ref_c, _ = sequence_logprobs(self.reference, chosen, pad)
                ref_r, _ = sequence_logprobs(self.reference, rejected, pad)
            margin = cfg.dpo_beta * ((lp_c - ref_c) - (lp_r - ref_r))
            return -torch.nn.functional.logsigmoid(margin).mean()
        logp, _ = sequence_logprobs(model, trajs, pad)
        log_r = r / cfg.tb_temperature
        if not self._z_ready:
            with torch.no_grad():
                self.log_z.fill_(float((log_r - logp).mean()))
            self._z_ready = True
        return ((self.log_z + logp - log_r) ** 2).mean()

    def step(self, step: int) -> dict[str, float]:
        """One rollout and one update; the step's mean reward and loss."""
        started = time.perf_counter()
        trajs, rewards, groups = self.rollout(step)
        model = self.auditor.model
        model.train()
        self.optimizer.zero_grad()
        self.z_optimizer.zero_grad()
        loss = self.loss(trajs, rewards, groups)
        value = math.nan
        if loss is not None:
            loss.backward()
            import torch

            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            self.optimizer.step()
            if self.config.objective == "gflownet":
                self.z_optimizer.step()
            value = float(loss.detach())
        model.eval()
        self.step_seconds.append(time.perf_counter() - started)
        record = {"step": float(step), "reward": sum(rewards) / len(rewards), "loss": value}
        self.history.append(record)
        return record

    def train(self, progress: Any = None) -> list[dict[str, float]]:
        """Run ``config.steps`` steps; ``progress.advance(**record)`` after each if given."""
        for step in range(self.config.steps):
            record = self.step(step)
            if progress is not None:
                progress.advance(reward=record["reward"])
        return self.history
