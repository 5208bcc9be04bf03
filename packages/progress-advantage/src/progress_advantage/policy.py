"""The RL policy: a GRPO-trained copy of the reference, via trl's ``GRPOTrainer``.

Progress advantage needs a policy trained with a KL penalty ``β`` towards the reference; trl's
GRPO uses exactly that penalty (its ``beta``), with the task's verifier as reward. trl builds its
own frozen reference from the model's ``name_or_path``, so the reference is saved to a working
directory first and the copy points there.
"""

from __future__ import annotations

import copy
import logging
import os
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any

from progress_advantage.errors import ProgressAdvantageError

__all__ = ["GRPOSettings", "train_grpo_policy"]


@dataclass(frozen=True)
class GRPOSettings:
    """GRPO hyper-parameters for the toy policy.

    ``beta`` is the KL coefficient (and the ``β`` of the progress advantage). trl's default is
    0 (no reference); the paper's theory needs a KL-regularised policy, so it is positive here.
    Everything else is trl's default (one update per generation batch, so the clipped ratio is
    1; group-scaled advantages; linear decay, no warmup; gradients clipped at 1).

    Chosen by the training reward only (the verifier's reward on fresh training-split prompts,
    sampled as in training, before and after GRPO; never by the demo's claims), see the README:
    ``learning_rate`` 1e-3 with 4 prompts per step *lowered* the reward on every seed (0.91 ->
    0.41 on one; per-token KL 0.25): Adam moves every weight by about ``lr`` per step whatever
    the gradient's size, and with 4 prompts per step only about one group in five has a
    non-constant reward, so most of each step is noise. 3e-4 still did not raise it; 1e-4 with
    16 prompts per step raised it on every seed (0.893 -> 0.915, 0.918, 0.916; 128 prompts x 8
    samples each). 40 steps of 16 prompts draw from ``train_prompts`` = 512 (1.25 passes).
    """

    steps: int = 40
    beta: float = 0.05
    learning_rate: float = 1e-4
    num_generations: int = 8
    prompts_per_step: int = 16
    max_completion_length: int = 48
    temperature: float = 1.0
    train_prompts: int = 512


def train_grpo_policy(
    reference: Any,
    tokenizer: Any,
    task: Any,
    settings: GRPOSettings,
    seed: int = 0,
    workdir: str | os.PathLike[str] | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """A GRPO-trained copy of ``reference`` (left untouched) and trl's training log."""
    try:
        from trl import GRPOConfig, GRPOTrainer
    except ImportError:
        raise ProgressAdvantageError(
            "training the policy needs trl: pip install 'progress-advantage[demo]'"
        ) from None
    if settings.steps < 1:
        raise ProgressAdvantageError(f"GRPO steps must be >= 1, got {settings.steps}")
    with tempfile.TemporaryDirectory(dir=workdir, prefix="pa-grpo-") as tmp:
        ref_dir = os.path.join(tmp, "reference")
        reference.save_pretrained(ref_dir)
        tokenizer.save_pretrained(ref_dir)
        policy = copy.deepcopy(reference)
        policy.config._name_or_path = ref_dir
        policy.train()
        dataset = task.to_dataset(
            task.generate(settings.train_prompts, seed=seed, split="train"), conversational=True
        )
        config = GRPOConfig(
            output_dir=os.path.join(tmp, "out"),
            per_device_train_batch_size=settings.prompts_per_step * settings.num_generations,
            num_generations=settings.num_generations,
            max_completion_length=settings.max_completion_length,
            max_steps=settings.steps,
            learning_rate=settings.learning_rate,
            beta=settings.beta,
            temperature=settings.temperature,
            seed=seed,
            data_seed=seed,
            logging_steps=max(1, settings.steps // 5),
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            disable_tqdm=True,
            bf16=False,
            dataloader_num_workers=0,
        )
        logging.getLogger("transformers").setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer = GRPOTrainer(
                model=policy,
                reward_funcs=task.reward_function(),
                args=config,
                train_dataset=dataset,
                processing_class=tokenizer,
            )
            trainer.train()
        model: Any = trainer.model
        model.eval()
        history = list(trainer.state.log_history)
        del trainer
    return model, history
