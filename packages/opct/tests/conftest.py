"""Shared fixtures: one thread (CI has 2 cores, shared), quiet logging, one micro base model."""

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()


@pytest.fixture(scope="session")
def micro_path():
    """The --quick base model (micro preset on the toy world, cached): a folder."""
    from opct.demo import QUICK
    from opct.world import CAPABILITY, AlignmentWorld

    from paperstack import tiny

    args = (QUICK.preset, (AlignmentWorld(), CAPABILITY))
    tiny.pretrained(*args, steps=QUICK.base_steps, seed=0, progress=False)
    return tiny.pretrained_path(*args, steps=QUICK.base_steps, seed=0)


@pytest.fixture
def micro(micro_path):
    """A fresh copy of the micro base model and its tokenizer."""
    from paperstack import tiny

    return tiny.load(micro_path)


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory):
    """The real `opct demo --quick` (the conformance suite runs a shrunk one): its folder."""
    from opct.cli import main

    folder = tmp_path_factory.mktemp("quick")
    assert main(["demo", "--quick", "--no-progress", "--out", str(folder / "run")]) == 0
    return folder / "run"
