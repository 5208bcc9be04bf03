import os

import pytest
import torch

# The triton kernels run interpreted where there is no CUDA device (this must be set before
# triton is imported); on a GPU machine they run compiled, and the gpu-marked tests run too.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
