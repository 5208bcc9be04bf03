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
