"""Test setup: one CPU thread (CI shares two cores), Triton's interpreter only without a GPU.

On a CUDA machine the kernels must run compiled: the interpreter there would time a NumPy
emulation (seconds per call) and test nothing the GPU runs.
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first `import triton`
elif os.environ.get("TRITON_INTERPRET") == "1":
    raise pytest.UsageError("TRITON_INTERPRET=1 on a CUDA machine: unset it to test the kernels")

torch.set_num_threads(1)


def all_bf16_patterns() -> torch.Tensor:
    """Every one of the 65,536 BF16 bit patterns, as a 256 x 256 matrix."""
    return (
        torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).view(256, 256)
    )


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.view(torch.int16), b.view(torch.int16))


@pytest.fixture
def gaussian() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(96, 200, generator=gen) * 0.02).to(torch.bfloat16)
