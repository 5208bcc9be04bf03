"""Shared fixtures: one thread (CI has 2 cores, shared), quiet logging, a micro model, and a
frozen heap for the modules that fine-tune in this process."""

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


@pytest.fixture(scope="session")
def frozen_heap():
    """Import trl's trainer stack once, then move every object alive now (the modules of torch,
    transformers, trl, datasets: about half a million) out of the garbage collector's reach
    with :func:`gc.freeze`. accelerate's ``free_memory()`` runs a full ``gc.collect()`` at the
    end of every ``trainer.train()``; over that heap it took 0.4-0.6 s (loaded 2-core CPU), as
    long as the 3 SFT steps of a micro model themselves, and the fast suite fine-tunes about 85
    times in this process. Garbage is collected first, so what is frozen is what lives for the
    session anyway; objects created later are collected as before. The modules that fine-tune
    in this process use it (``pytestmark``)."""
    from paperstack.contract import settled_heap

    with settled_heap("trl.SFTTrainer"):
        yield


@pytest.fixture
def micro():
    """A micro Llama built from its config (random weights) and the toy tokenizer."""
    from paperstack import tiny

    tok = tiny.build_tokenizer()
    return tiny.build_model("micro", tok, seed=0), tok
