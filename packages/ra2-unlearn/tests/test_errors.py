"""Bad input: one-line errors naming the value at fault, exit status 2 from the CLI."""

from __future__ import annotations

import copy

import pytest
import torch
from ra2_unlearn import UnlearnConfig, UnlearnError
from ra2_unlearn.cli import main
from ra2_unlearn.data import load_mc_jsonl
from ra2_unlearn.trainer import unlearn

from paperstack.tasks import Example


def test_forget_set_outside_the_vocabulary_is_refused(micro, splits):
    model, tok = micro
    alien = [Example("x", "\u4f60\u597d\u4e16\u754c", "\u732b", {})] * 4
    with pytest.raises(UnlearnError, match=r"forget set: .* vocabulary"):
        unlearn(copy.deepcopy(model), tok, alien, splits.retain, UnlearnConfig(layer=1), steps=1)


def test_empty_retain_set_is_refused(micro, splits):
    model, tok = micro
    with pytest.raises(UnlearnError, match="retain set is empty"):
        unlearn(copy.deepcopy(model), tok, splits.forget, [], UnlearnConfig(layer=1), steps=1)


def test_layer_out_of_range_names_the_layer_count(micro, splits):
    model, tok = micro
    with pytest.raises(UnlearnError, match=r"layer 9: out of range, the model has 2 layers"):
        unlearn(
            copy.deepcopy(model), tok, splits.forget, splits.retain, UnlearnConfig(layer=9), steps=1
        )


def test_model_without_decoder_layers_is_refused(micro, splits):
    _, tok = micro

    class NotALM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

    with pytest.raises(UnlearnError, match="no decoder layers found"):
        unlearn(NotALM(), tok, splits.forget, splits.retain, UnlearnConfig(layer=0), steps=1)


def test_model_without_down_proj_is_refused_for_mlp_training(micro, splits):
    model, tok = micro
    broken = copy.deepcopy(model)
    for layer in broken.model.layers:
        del layer.mlp.down_proj
        layer.mlp.down_proj = None
    with pytest.raises(UnlearnError, match=r"no mlp\.down_proj"):
        unlearn(
            broken,
            tok,
            splits.forget,
            splits.retain,
            UnlearnConfig(method="rmu", layer=1),
            steps=1,
            ref_model=model,
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "sgd"}, "method 'sgd'"),
        ({"k": 0}, "k 0"),
        ({"target": "pca"}, "needs pca_rank"),
        ({"tau": -1.0}, "tau -1.0"),
    ],
)
def test_bad_config_values_are_named(kwargs, match):
    with pytest.raises(UnlearnError, match=match):
        UnlearnConfig(**kwargs)


def test_mc_jsonl_errors_name_file_and_line(tmp_path):
    good = tmp_path / "f.jsonl"
    good.write_text('{"question": "Q?", "choices": ["a", "b", "c"], "answer": 2}\n')
    assert load_mc_jsonl(good)[0].answer == "C"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "Q?", "choices": ["a", "b"], "answer": 5}\n')
    with pytest.raises(UnlearnError, match=r"bad.jsonl:1: field 'answer' 5"):
        load_mc_jsonl(bad)
    with pytest.raises(UnlearnError, match="cannot read"):
        load_mc_jsonl(tmp_path / "missing.jsonl")


def test_cli_errors_are_one_line_with_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--out", str(tmp_path / "o"), "--methods", "ra2,sgd"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("ra2: error: --methods")
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "unlearn",
                "--model",
                str(tmp_path),
                "--forget",
                str(tmp_path / "nope.jsonl"),
                "--retain",
                str(tmp_path / "nope.jsonl"),
                "--out",
                str(tmp_path / "m"),
            ]
        )
    assert exc.value.code == 2
    assert "nope.jsonl: cannot read" in capsys.readouterr().err
