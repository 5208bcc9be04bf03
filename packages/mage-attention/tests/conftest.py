import os

import pytest
import torch

# The triton kernel runs interpreted where there is no CUDA device (this must be set before
# triton is imported); on a GPU machine it runs compiled, and the gpu-marked tests run too.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Models the tests train are cached in a folder of their own, not the user's cache."""
    old = os.environ.get("PAPERSTACK_CACHE")
    os.environ["PAPERSTACK_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("PAPERSTACK_CACHE", None)
    else:
        os.environ["PAPERSTACK_CACHE"] = old


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
