"""Shared fixtures: one thread (CI has 2 cores, shared), quiet logging, a micro model."""

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()


@pytest.fixture
def micro():
    """A micro Llama built from its config (random weights) and the toy tokenizer."""
    from paperstack import tiny

    tok = tiny.build_tokenizer()
    return tiny.build_model("micro", tok, seed=0), tok
