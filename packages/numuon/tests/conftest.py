"""One thread per test process: the CI machine has two cores and other suites run beside ours."""

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)
