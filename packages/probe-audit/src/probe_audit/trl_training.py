"""GRPO and DPO auditors trained through trl's own trainers (trl 1.16).

The objectives are :mod:`probe_audit.training`'s (same rollouts, same reward, same masks), but
the optimisation loop, the advantages, the loss, the reference model, the optimiser and the
logging are trl's:

- **GRPO** is :class:`trl.GRPOTrainer` with a multi-turn ``rollout_func``. A dataset row is a
  scenario key (its domain, database seed and index, as JSON text in the ``prompt`` column);
  trl's sampler repeats each key ``num_generations`` times, and :class:`EpisodeRollout` plays
  one audit episode per copy against the target with the current model. It returns each
  episode as the auditor's token sequence (``prompt_ids``, ``completion_ids``) with
  ``env_mask`` (1 on the tokens the auditor sampled, 0 on the target's replies and the chat
  template's glue), which trl uses as its ``tool_mask``, so only the auditor's own turns get
  gradient; the composite reward travels as the extra field ``probe_reward`` to the reward
  function. ``logprobs`` is ``None``: the rollout is on-policy (one update per batch, no vLLM),
  so trl's clipped ratio is 1. With ``loss_type="bnpo"`` and ``beta=0`` the step is

  .. math:: A_i = \\frac{R_i - \\operatorname{mean}_g R}{\\operatorname{std}_g R + 10^{-4}},
     \\qquad L = -\\frac{\\sum_i A_i \\sum_t m_{it} \\log\\pi_\\theta(y_{it})}{\\sum_{i,t} m_{it}}

  (trl's std has Bessel's correction; the package's own loss uses the population std).
- **DPO** is :class:`EpisodeDPOTrainer`, a :class:`trl.DPOTrainer` whose rows are scenario
  keys too: each training step plays ``group_size`` episodes per key with the current model
  (on-policy, as GRPO), takes the best and the worst episode of each group (ties skipped) as
  chosen and rejected, and hands trl a batch whose ``completion_mask`` is the episode's
  ``env_mask`` (:class:`EpisodePairCollator`) instead of trl's all-ones completion mask, so the
  target's replies inside an episode are context, never scored. trl's sigmoid loss, its frozen
  reference model and its optimiser do the rest:

  .. math:: L = -\\log\\sigma\\Big(\\beta\\big[(\\log\\pi_\\theta - \\log\\pi_{ref})(\\tau^+)
     - (\\log\\pi_\\theta - \\log\\pi_{ref})(\\tau^-)\\big]\\Big)

The GFlowNet (trajectory balance) has no trl trainer and stays in :mod:`probe_audit.training`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from probe_audit.errors import ProbeError
from probe_audit.training import TrainConfig

__all__ = [
    "TRL_OBJECTIVES",
    "EpisodeDPOTrainer",
    "EpisodePairCollator",
    "EpisodeRollout",
    "scenario_keys",
    "train_with_trl",
]

#: The objectives that train through a trl trainer.
TRL_OBJECTIVES = ("grpo", "dpo")


def scenario_keys(worlds: Mapping[str, Any], config: TrainConfig) -> list[str]:
    """The training scenarios as dataset rows: ``config.steps`` x ``scenarios_per_step`` keys
    per domain, on the same databases and scenarios as :class:`~probe_audit.training.
    AuditorTrainer` (database seed ``10000 + 1000 * seed + step``)."""
    rows = []
    for step in range(config.steps):
        db_seed = 10_000 + config.seed * 1_000 + step
        for d, name in enumerate(sorted(worlds)):
            for index in range(config.scenarios_per_step):
                key = {"domain": name, "db_seed": db_seed, "scenario_seed": db_seed + d,
                       "count": config.scenarios_per_step, "index": index}  # fmt: skip
                rows.append(json.dumps(key, sort_keys=True))
    return rows


@dataclasses.dataclass
class EpisodeRollout:
    """Play one audit episode per scenario key with the auditor's current model; score each
    with ``reward(episode, domain, target)`` (its ``"total"``) and add the violations found to
    ``archive`` (the diversity term's memory). ``batches`` and ``episodes`` count what this
    process played."""

    auditor: Any
    worlds: Mapping[str, Any]
    targets: Mapping[str, Any]
    reward: Any
    max_turns: int
    archive: Any = None
    batches: int = 0
    episodes: int = 0

    def __call__(self, keys: Sequence[str], tag: str) -> tuple[list[Any], list[float]]:
        """``(trajectories, rewards)`` in the order of ``keys``."""
        from probe_audit.game import GameConfig, play

        self.batches += 1
        self.episodes += len(keys)
        parsed = []
        for k in keys:
            try:
                key = json.loads(k)
                parsed.append((key["domain"], int(key["db_seed"]), int(key["scenario_seed"]),
                               int(key["count"]), int(key["index"])))  # fmt: skip
            except (TypeError, ValueError, KeyError) as exc:
                raise ProbeError(f"not a scenario key: {k!r} ({exc})") from None
        groups: dict[tuple[str, int, int, int], list[int]] = {}
        for pos, (name, db_seed, s_seed, count, _) in enumerate(parsed):
            if name not in self.worlds:
                raise ProbeError(
                    f"scenario key names domain {name!r}; known: {sorted(self.worlds)}"
                )
            groups.setdefault((name, db_seed, s_seed, count), []).append(pos)
        trajs: list[Any] = [None] * len(keys)
        rewards = [0.0] * len(keys)
        found: list[str] = []
        for (name, db_seed, s_seed, count), positions in groups.items():
            domain, target = self.worlds[name], self.targets[name]
            db = domain.database(db_seed)
            base = domain.make_scenarios(db, count, s_seed)
            scenarios = [base[parsed[p][4]] for p in positions]
            ids = [f"{tag}-{self.batches}-{p}" for p in positions]
            with self.auditor.recording() as recorded:
                episodes = play(
                    domain, scenarios, self.auditor, target, db,
                    GameConfig(max_turns=self.max_turns, on_target_error="record"),
                    episode_ids=ids,
                )  # fmt: skip
            for p, ep in zip(positions, episodes, strict=True):
                rewards[p] = float(self.reward(ep, domain, target)["total"])
                found.extend(v.rule_id for v in ep.violations)
                trajs[p] = recorded[ep.id]
        if self.archive is not None:
            self.archive.add(found)
        return trajs, rewards


def _trl() -> Any:
    try:
        import trl
    except ImportError:
        raise ProbeError(
            "training GRPO/DPO auditors through trl needs trl 1.16 (a probe-audit dependency): "
            "pip install 'trl>=1.16,<1.17'"
        ) from None
    return trl


def _common_args(config: TrainConfig, out: str, device: str) -> dict[str, Any]:
    """The Trainer arguments both objectives share: the package's budget and optimiser
    (Adam, constant learning rate, gradient norm clipped at 1), no saving, no reporting."""
    return {
        "output_dir": out,
        "max_steps": config.steps,
        "learning_rate": config.lr,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        "gradient_accumulation_steps": 1,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "use_cpu": device == "cpu",
        "bf16": False,
        "seed": config.seed,
        "dataloader_num_workers": 0,
    }


class _GRPORollout:
    """trl's ``rollout_func(prompts, trainer)`` over :class:`EpisodeRollout`."""

    def __init__(self, rollout: EpisodeRollout) -> None:
        self.rollout = rollout

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        rank = trainer.accelerator.process_index
        trajs, rewards = self.rollout([str(p) for p in prompts], f"grpo-r{rank}")
        return {
            "prompt_ids": [list(t.prompt_ids) for t in trajs],
            "completion_ids": [list(t.completion_ids) for t in trajs],
            "logprobs": None,  # on-policy: no sampler logprobs, trl's ratio is 1
            "env_mask": [list(t.env_mask) for t in trajs],
            "probe_reward": rewards,
        }


def _probe_reward(prompts: Any, completions: Any, probe_reward: Sequence[float], **_: Any) -> Any:
    """The composite reward the rollout computed (trl passes extra rollout fields by name)."""
    return list(probe_reward)


def _episode_pair_collator_class() -> Any:
    from trl.trainer.dpo_trainer import DataCollatorForPreference
    from trl.trainer.utils import pad

    class _Collator(DataCollatorForPreference):  # type: ignore[misc]
        def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
            import torch

            out = dict(super().torch_call(examples))
            masks = [[0] * len(e["prompt_ids"]) + list(e[f"{side}_mask"])
                     for side in ("chosen", "rejected") for e in examples]  # fmt: skip
            mask = pad([torch.tensor(m, dtype=torch.long) for m in masks], padding_value=0,
                       padding_side="right")  # fmt: skip
            if mask.shape != out["input_ids"].shape:
                raise ProbeError("episode masks and token sequences differ in length")
            out["completion_mask"] = mask
            return out

    return _Collator


def EpisodePairCollator(pad_token_id: int) -> Any:
    """trl's :class:`DataCollatorForPreference` with the episode's ``env_mask`` as the
    completion mask (examples carry ``chosen_mask`` / ``rejected_mask`` beside trl's
    ``prompt_ids`` / ``chosen_ids`` / ``rejected_ids``); no truncation."""
    return _episode_pair_collator_class()(pad_token_id=pad_token_id, max_length=None)


def _episode_dpo_trainer_class() -> Any:
    base: Any = _trl().DPOTrainer

    class _EpisodeDPOTrainer(base):  # type: ignore[misc]
        """See :func:`EpisodeDPOTrainer`."""

        def __init__(self, *args: Any, rollout: EpisodeRollout, group_size: int, **kw: Any):
            self.rollout = rollout
            self.group_size = group_size
            self.pairs_per_step: list[int] = []
            super().__init__(*args, **kw)
            self.pair_collator = EpisodePairCollator(self._tokenizer.pad_token_id)

        def _prepare_dataset(self, dataset: Any, processing_class: Any, args: Any,
                             dataset_name: str) -> Any:  # fmt: skip
            return dataset  # rows are scenario keys; the episodes are played in training_step

        def _set_signature_columns_if_needed(self) -> None:
            self._signature_columns = ["prompt"]

        def pairs(self, keys: Sequence[str]) -> list[dict[str, Any]]:
            """Play ``group_size`` episodes per key; one (best, worst) pair per untied key."""
            g = self.group_size
            rank = self.accelerator.process_index
            trajs, rewards = self.rollout([k for k in keys for _ in range(g)], f"dpo-r{rank}")
            examples = []
            for k in range(len(keys)):
                idx = list(range(k * g, (k + 1) * g))
                best = max(idx, key=lambda i: rewards[i])
                worst = min(idx, key=lambda i: rewards[i])
                if rewards[best] > rewards[worst]:
                    c, r = trajs[best], trajs[worst]
                    examples.append({
                        "prompt_ids": list(c.prompt_ids),
                        "chosen_ids": list(c.completion_ids), "chosen_mask": list(c.env_mask),
                        "rejected_ids": list(r.completion_ids), "rejected_mask": list(r.env_mask),
                    })  # fmt: skip
            self.pairs_per_step.append(len(examples))
            if not examples:
                # No preference in this batch: one pair of an episode with itself, whose DPO
                # gradient is exactly zero (every rank still runs forward and backward, which
                # data-parallel training needs).
                t = trajs[0]
                examples.append({
                    "prompt_ids": list(t.prompt_ids),
                    "chosen_ids": list(t.completion_ids), "chosen_mask": list(t.env_mask),
                    "rejected_ids": list(t.completion_ids), "rejected_mask": list(t.env_mask),
                })  # fmt: skip
            return examples

        def training_step(self, model: Any, inputs: Any, *args: Any, **kw: Any) -> Any:
            batch = self.pair_collator(self.pairs(list(inputs["prompt"])))
            return super().training_step(model, batch, *args, **kw)

    return _EpisodeDPOTrainer


def EpisodeDPOTrainer(*args: Any, rollout: EpisodeRollout, group_size: int, **kw: Any) -> Any:
    """A :class:`trl.DPOTrainer` on audit-episode pairs: rows are scenario keys, each step
    plays ``group_size`` episodes per key with the current model and trains on (best, worst)
    pairs with the target's replies masked out (:class:`EpisodePairCollator`)."""
    return _episode_dpo_trainer_class()(*args, rollout=rollout, group_size=group_size, **kw)


def train_with_trl(
    auditor: Any,
    worlds: Mapping[str, Any],
    targets: Mapping[str, Any],
    reward: Any,
    config: TrainConfig,
    archive: Any = None,
    device: str = "cpu",
    progress: Any = None,
) -> dict[str, Any]:
    """Train ``auditor.model`` in place with trl's GRPOTrainer or (episode) DPOTrainer on the
    package's budget (``config``); returns ``{"seconds", "history", "trainer", "rollout"}``
    (the :class:`EpisodeRollout`, which counts the batches and episodes this process played).

    Under ``accelerate launch --num_processes N`` each process plays its share of the
    scenario keys (trl's samplers split them; GRPO's groups stay whole, so its advantages
    are normalised over the gathered group) and the gradients are all-reduced."""
    if config.objective not in TRL_OBJECTIVES:
        raise ProbeError(f"objective {config.objective!r} has no trl trainer; use AuditorTrainer")
    trl = _trl()
    import copy

    import datasets
    from transformers import TrainerCallback

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    rollout = EpisodeRollout(auditor, worlds, targets, reward, config.max_turns, archive)
    data = datasets.Dataset.from_dict({"prompt": scenario_keys(worlds, config)})
    per_step = config.scenarios_per_step * len(worlds)

    class _Advance(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if progress is not None:
                progress.advance()

    model = auditor.model
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="probe-trl-") as out, warnings.catch_warnings():
        # transformers 5 deprecates the gradient_checkpointing names trl 1.16 still passes
        warnings.simplefilter("ignore", FutureWarning)
        common = _common_args(config, out, device)
        if config.objective == "grpo":
            args = trl.GRPOConfig(
                **common, per_device_train_batch_size=per_step * config.group_size,
                num_generations=config.group_size, loss_type="bnpo", beta=0.0,
                scale_rewards="group", num_iterations=1,
            )  # fmt: skip
            trainer = trl.GRPOTrainer(
                model=model, reward_funcs=[_probe_reward], args=args, train_dataset=data,
                processing_class=auditor.tokenizer, rollout_func=_GRPORollout(rollout),
                callbacks=[_Advance()],
            )  # fmt: skip
        else:
            reference = copy.deepcopy(model).eval()
            args = trl.DPOConfig(
                **common, per_device_train_batch_size=per_step, beta=config.dpo_beta,
                loss_type="sigmoid", max_length=None, remove_unused_columns=False,
            )  # fmt: skip
            trainer = EpisodeDPOTrainer(
                model=model, ref_model=reference, args=args, train_dataset=data,
                processing_class=auditor.tokenizer, rollout=rollout,
                group_size=config.group_size, data_collator=_keys_collator,
                callbacks=[_Advance()],
            )  # fmt: skip
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # the logs stay in trainer.state.log_history
        trainer.train()
    model.eval()
    return {
        "seconds": time.perf_counter() - started,
        "history": list(trainer.state.log_history),
        "trainer": trainer,
        "rollout": rollout,
    }


def _keys_collator(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The DPO rows pass through as scenario keys (the episodes are played in the step)."""
    return {"prompt": [str(r["prompt"]) for r in rows]}
