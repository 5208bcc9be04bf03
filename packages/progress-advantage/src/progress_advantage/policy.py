"""The RL policy: KL-regularised RL from the reference with the KL in the reward (trl's RLOO).

The theorem is about the optimum of ``max_π E_π[r] − β KL(π ‖ π_ref)``, whose solution is
``π* ∝ π_ref · exp(r/β)`` and hence ``β log π*/π_ref = A*``. trl's ``RLOOTrainer`` optimises
exactly that objective: it subtracts ``β · Σ_t log π(y_t)/π_ref(y_t)`` (the first-order, "k1"
sequence KL) from each completion's reward, takes the leave-one-out mean of the other
completions of its prompt as the baseline, and (with ``normalize_advantages=False``) does not
rescale the advantages. GRPO, which 0.1 used, instead adds a k3 KL estimate to the *loss* and
divides rewards by their group's standard deviation, so its fixed point is not
``π_ref · exp(A*/β)``.

Training stops by a rule fixed before any claim was computed (:class:`PlateauStop`): the
objective ``J = reward − β · KL`` that trl logs every step is averaged over windows of
``window`` steps; once at least ``min_steps`` are done, training stops at the end of a window
whose mean improves on the previous window's by less than ``plateau_tol``, and in any case
after ``max_steps``. How it stopped is recorded.
"""

from __future__ import annotations

import copy
import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from paperstack.contract import trl_precision_args
from progress_advantage.errors import ProgressAdvantageError

__all__ = ["PlateauStop", "RLResult", "RLSettings", "train_rl_policy"]


@dataclass(frozen=True)
class RLSettings:
    """RLOO settings for the toy policy, every one set explicitly (trl's defaults move between
    releases; this package pins trl 1.16).

    ``beta`` is the KL coefficient and the ``β`` of the progress advantage. One update per
    generation batch (``num_iterations=1``, so the clipped ratio is 1 and ``epsilon`` never
    acts), a constant learning rate (a decaying one would fake a plateau), no warmup, gradients
    clipped at 1. 8 prompts x 8 completions per step is what the CPU budget allows.
    ``learning_rate`` and the plateau rule were chosen on validation seed 100 of the 0.2.1
    toy (``benchmarks/lm_validation.py``, its output in ``benchmarks/validation/``; never
    on a reported seed, never on the claims): at 3e-4 (60 steps) the first updates cut the
    reward (0.75 -> 0.62) and ``J`` on fresh prompts fell below the reference's at both betas
    (0.587 and 0.427 vs 0.688; Spearman with the MC soft advantage 0.02 and 0.03); at 1e-4
    (100 steps) ``J`` rose at beta 0.1 (0.769 vs 0.688, per-token KL 0.011-0.018 after step
    10) and stayed level at 0.5 (0.680; KL 0.003-0.007), Spearman 0.28 and 0.29. ``J`` dips
    over steps 10-30 before it climbs, so a rule allowed to stop at 20 stops in the dip:
    ``min_steps`` 40 with 10-step windows and ``plateau_tol`` 0.01 stopped those curves at 50
    and 60; ``max_steps`` 80 keeps 3 seeds x 2 betas inside ~20 min on the shared CPU
    (about 1.6 s per RLOO step of 64 completions, ~60 s of evaluation per policy).
    """

    beta: float = 0.1
    learning_rate: float = 1e-4
    prompts_per_step: int = 8
    num_generations: int = 8
    max_completion_length: int = 48
    temperature: float = 1.0
    train_prompts: int = 1024
    min_steps: int = 40
    max_steps: int = 80
    window: int = 10
    plateau_tol: float = 0.01
    # A user's own (larger) model: bf16 autocast, gradient accumulation (the step's
    # prompts_per_step x num_generations completions split into this many micro-batches; one
    # optimizer step and one logged J per generation batch, so the plateau rule is unchanged)
    # and LoRA through peft (the reference is then the base with the adapter switched off, as
    # the scorer's reference=None path assumes). The demo's toy policy uses none of them.
    bf16: bool = False
    gradient_accumulation_steps: int = 1
    lora_r: int | None = None
    lora_alpha: int | None = None


@dataclass
class RLResult:
    """What training did: the per-step objective ``J``, the steps taken, how it stopped."""

    steps: int
    plateaued: bool
    objective: list[float] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    kl: list[float] = field(default_factory=list)  # per-token KL as trl logs it
    world_size: int = 1  # processes that trained together (accelerate launch --num_processes)
    rank: int = 0


class PlateauStop:
    """The stopping rule of the module docstring, as a transformers ``TrainerCallback``.

    Reads trl's logged ``reward``, ``kl`` (per token) and ``completions/mean_length`` (so
    ``β · kl · length`` is the sequence KL the reward was charged). trl gathers these over
    processes before logging, so every rank takes the same decision.
    """

    def __init__(self, settings: RLSettings, on_step: Callable[[int, float], None] | None = None):
        self.settings = settings
        self.result = RLResult(steps=0, plateaued=False)
        self.on_step = on_step

    def window_means(self) -> list[float]:
        w = self.settings.window
        j = self.result.objective
        return [sum(j[i : i + w]) / w for i in range(0, len(j) - w + 1, w)]

    def should_stop(self) -> bool:
        """The rule, on the objective values seen so far (a pure function of them)."""
        s, n = self.settings, len(self.result.objective)
        if n >= s.min_steps and n % s.window == 0:
            means = self.window_means()
            if len(means) >= 2 and means[-1] - means[-2] < s.plateau_tol:
                self.result.plateaued = True
                return True
        return n >= s.max_steps

    def record(self, logs: dict[str, float]) -> bool:
        """Take one step's logged metrics; True when training should stop."""
        if "reward" not in logs:
            return False
        reward = float(logs["reward"])
        kl = float(logs.get("kl", 0.0))
        length = float(logs.get("completions/mean_length", 0.0))
        objective = reward - self.settings.beta * kl * length
        self.result.reward.append(reward)
        self.result.kl.append(kl)
        self.result.objective.append(objective)
        self.result.steps = len(self.result.objective)
        if self.on_step is not None:
            self.on_step(self.result.steps, objective)
        return self.should_stop()

    def callback(self) -> Any:
        """The ``TrainerCallback`` that feeds :meth:`record` and stops the trainer."""
        from transformers import TrainerCallback

        rule = self

        class _Plateau(TrainerCallback):  # type: ignore[misc]
            def on_log(
                self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any
            ) -> Any:
                if logs and rule.record(logs):
                    control.should_training_stop = True
                return control

        return _Plateau()


def train_rl_policy(
    reference: Any,
    tokenizer: Any,
    task: Any,
    settings: RLSettings,
    seed: int = 0,
    workdir: str | os.PathLike[str] | None = None,
    on_step: Callable[[int, float], None] | None = None,
    save_to: str | os.PathLike[str] | None = None,
    callbacks: Sequence[Any] = (),
) -> tuple[Any, RLResult]:
    """An RLOO-trained copy of ``reference`` (left untouched) and how training went.

    trl builds its frozen reference from the model's ``name_or_path``, so the reference is
    saved to a working directory first and the copy points there. ``save_to`` saves the policy
    (and tokenizer) there; under ``accelerate launch`` only the main process writes.
    ``callbacks`` are more transformers ``TrainerCallback``s, e.g. to measure the policy at
    checkpoints of one run (``benchmarks/lm_longer_rl.py``) instead of retraining per length.
    """
    from transformers import PrinterCallback
    from trl import RLOOConfig, RLOOTrainer

    if settings.max_steps < 1 or settings.min_steps < 1 or settings.window < 1:
        raise ProgressAdvantageError("RL steps, min_steps and window must be >= 1")
    if not settings.beta > 0:
        raise ProgressAdvantageError(
            f"RL beta must be > 0 (KL-regularised RL), got {settings.beta}"
        )
    from paperstack.llm import prepare_tokenizer

    # trl renders the conversational prompts with the chat template and pads batches: a base
    # model's tokenizer (GPT-2: neither) gets the core's transcript template and EOS padding,
    # the same format TransformersChat samples in, instead of a traceback deep inside trl.
    prepare_tokenizer(
        tokenizer,
        need_chat_template=True,
        name=str(getattr(reference, "name_or_path", "") or "reference"),
        chat_template="fallback",
    )
    batch = settings.prompts_per_step * settings.num_generations
    accum = settings.gradient_accumulation_steps
    if accum < 1 or batch % accum:
        raise ProgressAdvantageError(
            f"gradient accumulation steps {accum} must divide the {batch} completions of a step "
            f"(prompts per step x generations)"
        )
    peft_config = None
    if settings.lora_r is not None:
        try:
            from peft import LoraConfig
        except ImportError:
            raise ProgressAdvantageError(
                "LoRA needs the peft extra: pip install 'progress-advantage[peft]'"
            ) from None
        peft_config = LoraConfig(
            r=settings.lora_r,
            lora_alpha=settings.lora_alpha or 2 * settings.lora_r,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
    # trl is handed a copy that points at a temporary folder; a saved adapter must name the
    # reference's own folder (or hub id) as its base, or it could not be loaded again.
    base_name = str(getattr(reference.config, "_name_or_path", "") or "")
    rule = PlateauStop(settings, on_step)
    with tempfile.TemporaryDirectory(dir=workdir, prefix="pa-rl-") as tmp:
        ref_dir = os.path.join(tmp, "reference")
        reference.save_pretrained(ref_dir)
        tokenizer.save_pretrained(ref_dir)
        policy = copy.deepcopy(reference)
        policy.config._name_or_path = ref_dir
        policy.train()
        dataset = task.to_dataset(
            task.generate(settings.train_prompts, seed=seed, split="train"), conversational=True
        )
        with warnings.catch_warnings():
            # transformers 5 deprecates a field trl 1.16's config still sets (a FutureWarning
            # that says nothing about this run): kept out of the user's terminal.
            warnings.simplefilter("ignore", FutureWarning)
            config = RLOOConfig(
                output_dir=os.path.join(tmp, "out"),
                per_device_train_batch_size=batch // accum,
                gradient_accumulation_steps=accum,
                num_generations=settings.num_generations,
                max_completion_length=settings.max_completion_length,
                max_steps=settings.max_steps,
                learning_rate=settings.learning_rate,
                lr_scheduler_type="constant",
                warmup_steps=0,
                max_grad_norm=1.0,
                beta=settings.beta,
                num_iterations=1,
                normalize_advantages=False,
                reward_clip_range=None,
                mask_truncated_completions=False,
                temperature=settings.temperature,
                top_p=1.0,
                top_k=0,
                seed=seed,
                data_seed=seed,
                logging_steps=1,
                report_to=[],
                save_strategy="no",
                use_cpu=True,
                disable_tqdm=True,
                **trl_precision_args(bf16=settings.bf16),
                dataloader_num_workers=0,
            )
        logging.getLogger("transformers").setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer = RLOOTrainer(
                model=policy,
                reward_funcs=task.reward_function(),
                args=config,
                train_dataset=dataset,
                processing_class=tokenizer,
                peft_config=peft_config,
                callbacks=[rule.callback(), *callbacks],
            )
            trainer.remove_callback(PrinterCallback)  # our callback reports progress instead
            trainer.train()
        rule.result.world_size = int(trainer.accelerator.num_processes)
        rule.result.rank = int(trainer.accelerator.process_index)
        model: Any = trainer.accelerator.unwrap_model(trainer.model)
        model.eval()
        if save_to is not None:
            trainer.accelerator.wait_for_everyone()
            if trainer.accelerator.is_main_process:
                for adapter in (getattr(model, "peft_config", None) or {}).values():
                    adapter.base_model_name_or_path = base_name
                model.save_pretrained(save_to)
                tokenizer.save_pretrained(save_to)
            trainer.accelerator.wait_for_everyone()
        del trainer
    return model, rule.result
