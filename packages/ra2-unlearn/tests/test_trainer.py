"""The Trainer subclass: every method runs in the same harness and trains what it should."""

from __future__ import annotations

import copy

import pytest
import torch
from ra2_unlearn import METHODS, UnlearnConfig
from ra2_unlearn.trainer import unlearn


@pytest.mark.parametrize("method", METHODS)
def test_every_method_runs_two_steps_and_changes_the_model(micro, splits, method):
    model, tok = micro
    before = copy.deepcopy(model)
    # A random model predicts none of the forget labels, so RA^2 attracts every forget token
    # here (attract="all"); what it attracts on a model that knows the facts is in test_ra2.
    cfg = UnlearnConfig(method=method, layer=1, k=2, attract="all")
    res = unlearn(
        copy.deepcopy(model),
        tok,
        splits.forget,
        splits.retain,
        cfg,
        steps=2,
        lr=1e-2,
        batch_size=4,
        ref_model=before,
    )
    assert len(res.log) == 2
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in res.log)
    changed = {
        n
        for (n, p), (_, q) in zip(
            res.model.named_parameters(), before.named_parameters(), strict=True
        )
        if not torch.equal(p, q)
    }
    assert changed
    if method in ("rmu", "ra2"):
        # The WMDP default: only MLP down-projections of layers l-2..l train.
        assert all("mlp.down_proj" in n for n in changed), changed


def test_ra2_forget_loss_falls_toward_the_retain_anchors(micro, splits):
    model, tok = micro
    cfg = UnlearnConfig(method="ra2", layer=1, k=4, alpha=0.1, attract="all")
    res = unlearn(
        copy.deepcopy(model),
        tok,
        splits.forget,
        splits.retain,
        cfg,
        steps=12,
        lr=1e-2,
        batch_size=8,
        ref_model=model,
    )
    first = sum(r["forget"] for r in res.log[:3]) / 3
    last = sum(r["forget"] for r in res.log[-3:]) / 3
    assert last < first


def test_retain_anchoring_leaves_a_retain_only_model_unchanged_at_step_zero(micro, splits):
    model, tok = micro
    res = unlearn(
        copy.deepcopy(model),
        tok,
        splits.forget,
        splits.retain,
        UnlearnConfig(method="ra2", layer=1),
        steps=1,
        lr=1e-3,
        batch_size=4,
        ref_model=model,
    )
    assert res.log[0]["retain"] == pytest.approx(0.0, abs=1e-10)


def test_lora_adapter_trains_and_merges(micro, splits):
    pytest.importorskip("peft")
    model, tok = micro
    res = unlearn(
        copy.deepcopy(model),
        tok,
        splits.forget,
        splits.retain,
        UnlearnConfig(method="ra2", layer=1),
        steps=2,
        lr=1e-2,
        batch_size=4,
        ref_model=model,
        lora_r=2,
    )
    assert not any("lora_" in n for n, _ in res.model.named_parameters())
    assert type(res.model).__name__ == type(model).__name__


def test_unlearn_leaves_the_callers_model_and_flags_as_they_were(micro, splits):
    model, tok = micro
    before = copy.deepcopy(model.state_dict())
    flags = [p.requires_grad for p in model.parameters()]
    res = unlearn(
        model, tok, splits.forget, splits.retain, UnlearnConfig(method="rmu", layer=1),
        steps=2, lr=1e-2, batch_size=4,
    )  # fmt: skip
    assert res.model is not model
    assert [p.requires_grad for p in model.parameters()] == flags
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lr": -1.0}, "lr -1.0"),
        ({"lr": float("nan")}, "lr nan"),
        ({"batch_size": 0}, "batch_size 0"),
    ],
)
def test_impossible_optimiser_numbers_are_named(micro, splits, kwargs, match):
    from ra2_unlearn import UnlearnError

    model, tok = micro
    with pytest.raises(UnlearnError, match=match):
        unlearn(model, tok, splits.forget, splits.retain, UnlearnConfig(layer=1), steps=1,
                **kwargs)  # fmt: skip


def test_unlearn_leaves_no_temporary_trainer_folder(micro, splits, tmp_path, monkeypatch):
    """Without ``output_dir`` the trainer's folder is a temporary one, removed after training
    (the demo's calibration makes hundreds of runs: they used to leave as many ``ra2-*`` folders
    in /tmp); a caller's ``output_dir`` is kept."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    model, tok = micro
    cfg = UnlearnConfig(method="ga")
    unlearn(copy.deepcopy(model), tok, splits.forget, splits.retain, cfg, steps=1, lr=1e-3)
    assert list(scratch.iterdir()) == []
    kept = tmp_path / "kept"
    unlearn(copy.deepcopy(model), tok, splits.forget, splits.retain, cfg, steps=1, lr=1e-3,
            output_dir=str(kept))  # fmt: skip
    assert kept.is_dir()
