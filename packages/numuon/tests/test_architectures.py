"""Every zoo architecture (paperstack.testing.zoo) trains a few NuMuon steps: GPT-2's Conv1D
matrices included (0.2 refused ``NuMuon(param_groups(gpt2))``: an empty Linear group beside
the named Conv1D group)."""

import pytest
import torch
from numuon import NuMuon, param_groups
from numuon.baselines import build_optimizer
from numuon.toy import load_model

from paperstack.testing import zoo

ARCHITECTURES = ["llama", "qwen2", "qwen3", "mistral", "gpt2"]


def _batch(model: torch.nn.Module) -> torch.Tensor:
    vocab = model.get_input_embeddings().weight.shape[0]
    return torch.randint(0, vocab, (2, 16), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("foreach", [False, True])
def test_numuon_trains_every_zoo_architecture(arch, foreach):
    model = load_model(str(zoo.checkpoint(arch)), 0)
    groups = param_groups(model, warn=False)
    opt = NuMuon(groups, lr=0.02, rank_schedule=0.5, adamw_lr=1e-2, foreach=foreach)
    matrices = [p for g in groups if g["use_numuon"] for _, p in g["params"]]
    assert matrices, f"{arch}: no matrix went to NuMuon"
    before = [p.detach().clone() for p in matrices]
    ids = _batch(model)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0]
    assert all(not torch.equal(a, p) for a, p in zip(before, matrices, strict=True))
    if arch == "gpt2":
        assert any(g.get("transposed") for g in groups)


@pytest.mark.parametrize("name", ["muon", "muon-polar", "muon-ns", "numuon", "adamw"])
def test_every_optimizer_of_the_demo_builds_on_gpt2(name):
    model = load_model(str(zoo.checkpoint("gpt2")), 0)
    opt = build_optimizer(name, model)
    ids = _batch(model)
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
