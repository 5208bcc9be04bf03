import os

# The triton kernels run interpreted on the CPU; this must be set before triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
