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
