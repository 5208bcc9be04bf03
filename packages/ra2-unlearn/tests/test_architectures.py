"""Every zoo architecture: the MLP output projection found by architecture (GPT-2's Conv1D
``mlp.c_proj`` included), ``--layer`` from the model's depth and checked only where it is used,
and ``--trainable`` with a one-line refusal naming what a model lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from ra2_unlearn.cli import main
from ra2_unlearn.config import UnlearnConfig, parse_trainable
from ra2_unlearn.data import load_mc_jsonl
from ra2_unlearn.errors import UnlearnError
from ra2_unlearn.modules import default_layer, mlp_output_projection, select_trainable
from ra2_unlearn.trainer import load_model, unlearn

from paperstack.testing import zoo

DATA = Path(__file__).parent / "data"
PROJECTION = {"gpt2": "c_proj", "qwen2": "down_proj", "mistral": "down_proj"}


@pytest.fixture(scope="module", params=sorted(PROJECTION))
def zoo_model(request):
    model, tok = load_model(str(zoo.checkpoint(request.param)))
    return request.param, model, tok


def _data():
    return load_mc_jsonl(DATA / "forget.jsonl"), load_mc_jsonl(DATA / "retain.jsonl")


def test_projection_is_found_by_architecture(zoo_model):
    kind, model, _ = zoo_model
    assert default_layer(model) == 1  # two layers: the middle one
    for i in (0, 1):
        proj = mlp_output_projection(model, i)
        blocks = model.transformer.h if kind == "gpt2" else model.model.layers
        assert proj is getattr(blocks[i].mlp, PROJECTION[kind])


@pytest.mark.parametrize("method", ["rmu", "ra2"])
def test_latent_methods_train_only_the_projections_on_every_zoo_model(zoo_model, method):
    kind, model, tok = zoo_model
    forget, retain = _data()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    res = unlearn(model, tok, forget, retain, UnlearnConfig(method=method), steps=2,
                  lr=1e-2, batch_size=2)  # fmt: skip
    moved = {n for n, p in res.model.named_parameters() if not torch.equal(p, before[n])}
    # layer l = 1 (depth 2): trained layers 0..1, their MLP output projections only. A random
    # zoo model recalls nothing, so RA^2 may find no position carrying an answer (no move).
    assert moved or method == "ra2", kind
    assert all(f"mlp.{PROJECTION[kind]}" in n for n in moved), sorted(moved)
    assert all(torch.isfinite(p).all() for p in res.model.parameters())


def test_trainable_layers_range_trains_that_layer_only(zoo_model):
    kind, model, tok = zoo_model
    forget, retain = _data()
    kind_, layers = parse_trainable("layers:0-0")
    cfg = UnlearnConfig(method="graddiff", trainable=kind_, trained_layers=layers)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    res = unlearn(model, tok, forget, retain, cfg, steps=1, lr=1e-2, batch_size=2)
    moved = {n for n, p in res.model.named_parameters() if not torch.equal(p, before[n])}
    prefix = "transformer.h.0." if kind == "gpt2" else "model.layers.0."
    assert moved
    assert all(n.startswith(prefix) for n in moved), sorted(moved)


def test_parse_trainable_forms_and_refusals():
    assert parse_trainable("all") == ("all", None)
    assert parse_trainable("mlp") == ("mlp", None)
    assert parse_trainable("mlp:0-2") == ("mlp", (0, 1, 2))
    assert parse_trainable("layers:1,3-4") == ("layers", (1, 3, 4))
    for bad, match in [("attn", "expected auto, all, mlp"), ("mlp:2-1", "not a range"),
                       ("all:0-1", "mlp or layers only"), ("mlp:x", "not a layer")]:  # fmt: skip
        with pytest.raises(UnlearnError, match=match):
            parse_trainable(bad)


def test_mlp_training_refused_naming_what_the_model_lacks(micro):
    model, _ = micro
    import copy

    broken = copy.deepcopy(model)
    for layer in broken.model.layers:
        del layer.mlp.down_proj
        layer.mlp.down_proj = None
    lacks = r"LlamaForCausalLM: layer 0 has no MLP output projection \(looked for mlp\.down_proj"
    with pytest.raises(UnlearnError, match=lacks + r".*--trainable all"):
        UnlearnConfig(method="rmu", layer=1).for_model(broken)
    # the whole model or a layer range still trains without an MLP projection
    assert UnlearnConfig(method="rmu", layer=1, trainable="all").for_model(broken).layer == 1
    params = select_trainable(broken, "layers", (1,))
    assert params
    assert all(p.requires_grad for p in params)


def _cli(kind: str, tmp_path: Path, *extra: str) -> list[str]:
    return ["unlearn", "--model", str(zoo.checkpoint(kind)), "--forget",
            str(DATA / "forget.jsonl"), "--retain", str(DATA / "retain.jsonl"), "--out",
            str(tmp_path / "out"), "--steps", "1", "--batch-size", "2", "--no-progress",
            *extra]  # fmt: skip


def test_cli_layer_checked_only_where_used(tmp_path, capsys):
    # GA on the whole model uses no layer: --layer 7 on a 2-layer model is not an error
    assert main(_cli("gpt2", tmp_path, "--method", "ga", "--layer", "7")) == 0
    assert json.loads((tmp_path / "out" / "config.json").read_text())["n_layer"] == 2
    # RMU hooks the layer: the same flag is one line naming the depth
    with pytest.raises(SystemExit) as e:
        main(_cli("gpt2", tmp_path / "b", "--method", "rmu", "--layer", "7"))
    assert e.value.code != 0
    err = capsys.readouterr().err
    assert "layer 7: out of range, the model has 2 layers (0..1)" in err
    assert "Traceback" not in err
    assert not (tmp_path / "b" / "out").exists()


def test_cli_gpt2_default_layer_and_trainable(tmp_path, capsys):
    assert main(_cli("gpt2", tmp_path, "--method", "ra2", "--trainable", "mlp:1-1")) == 0
    with pytest.raises(SystemExit):
        main(_cli("gpt2", tmp_path / "c", "--trainable", "heads"))
    assert "--trainable 'heads': expected auto, all, mlp" in capsys.readouterr().err
