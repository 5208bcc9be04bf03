"""On a CUDA device: every method trains there, and RA^2's targets equal the CPU's."""

from __future__ import annotations

import copy

import pytest
import torch
from ra2_unlearn import METHODS, UnlearnConfig
from ra2_unlearn.trainer import build_anchor_bank, unlearn

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("method", METHODS)
def test_every_method_trains_on_cuda(micro, splits, method):
    model, tok = micro
    res = unlearn(copy.deepcopy(model).cuda(), tok, splits.forget, splits.retain,
                  UnlearnConfig(method=method, layer=1, k=2, attract="all"), steps=2, lr=1e-2,
                  batch_size=4, device="cuda")  # fmt: skip
    assert next(res.model.parameters()).is_cuda
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in res.log)


def test_anchor_targets_on_cuda_equal_the_cpu(micro, splits):
    model, tok = micro
    cfg = UnlearnConfig(layer=1, k=4)
    cpu = build_anchor_bank(model, tok, splits.retain, cfg)
    gpu = build_anchor_bank(copy.deepcopy(model).cuda(), tok, splits.retain, cfg).to("cuda")
    queries = cpu.anchors[:16] + 0.01
    exclude = cpu.support[:16]
    t_cpu = cpu.targets(queries, 4, None, exclude=exclude)
    t_gpu = gpu.targets(queries.cuda(), 4, None, exclude=exclude.cuda()).cpu()
    assert torch.allclose(t_cpu, t_gpu, atol=1e-4)
