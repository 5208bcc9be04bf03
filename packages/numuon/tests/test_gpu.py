"""CUDA checks (skipped without a GPU): the same step on the device as on the CPU."""

import pytest
import torch
from numuon import NuMuon


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_step_matches_cpu_step(dtype):
    gen = torch.Generator().manual_seed(0)
    G = torch.randn(512, 6, generator=gen) @ torch.randn(6, 384, generator=gen)
    G += 0.01 * torch.randn(512, 384, generator=gen)
    out = {}
    for device in ("cpu", "cuda"):
        p = torch.nn.Parameter(torch.zeros(512, 384, device=device, dtype=dtype))
        opt = NuMuon([p], lr=1.0, rank_schedule=4 / 384)
        p.grad = G.to(device=device, dtype=dtype)
        opt.step()
        out[device] = p.detach().float().cpu()
    torch.testing.assert_close(
        out["cuda"], out["cpu"], atol=2e-2 if dtype == torch.bfloat16 else 1e-4, rtol=0
    )
