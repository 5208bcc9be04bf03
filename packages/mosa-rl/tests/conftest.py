"""Shared fixtures: one thread (CI has 2 cores, shared), quiet transformers logging."""

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    return


@pytest.fixture(scope="session")
def tiny_demo():
    """Smaller than --quick: one GRPO step per system, a handful of problems, and a one-point
    validation grid per method, so the matched-KL path runs too (seconds)."""
    from mosa_rl.demo import QUICK, DemoConfig

    return DemoConfig(
        preset="micro",
        sft_steps=QUICK.sft_steps,
        grpo_steps=1,
        prompts_per_step=2,
        num_generations=4,
        max_completion_length=6,
        eval_problems=4,
        eval_samples=4,
        ks=(1, 2, 4),
        token_kl_grid=(0.04,),
        mosa_grid=(30.0,),
        validation_problems=2,
        validation_samples=2,
    )
