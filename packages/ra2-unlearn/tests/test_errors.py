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
    with pytest.raises(
        UnlearnError, match=r"layer 0 has no MLP output projection \(looked for mlp\.down_proj"
    ):
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


def _one_line_error(capsys, argv: list[str]) -> str:
    """Run the CLI on ``argv``; it must exit 2 with exactly one line on stderr."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


def _usage_error(capsys, argv: list[str]) -> str:
    """A bad number on the command line: argparse's usage, then one ``error:`` line, exit 2."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("ra2 "), err
    assert ": error: " in last, err
    return last


def test_cli_errors_are_one_line_with_exit_2(tmp_path, capsys):
    out = tmp_path / "o"
    err = _one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--methods", "ra2,sgd"])
    assert err.startswith("ra2: error: --methods")
    assert not out.exists()  # the folder the failed run created is removed again
    err = _one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--device", "cuda"])
    assert "--device cuda" in err
    err = _one_line_error(
        capsys, ["demo", "--quick", "--out", str(out), "--model", str(tmp_path / "nope")]
    )
    assert "no such directory" in err
    err = _usage_error(capsys, ["demo", "--quick", "--out", str(out), "--steps", "0"])
    assert "--steps" in err
    err = _usage_error(capsys, ["demo", "--quick", "--out", str(out), "--adjacency", "topic"])
    assert "--adjacency" in err
    err = _one_line_error(
        capsys, ["demo", "--real", "--quick", "--out", str(out), "--adjacency", "entity"]
    )
    assert err.startswith("ra2: error: --adjacency")
    assert not out.exists()


def _unlearn_argv(tmp_path, *extra: str) -> list[str]:
    data = tmp_path / "f.jsonl"
    data.write_text('{"question": "Q?", "choices": ["a", "b", "c"], "answer": 2}\n')
    return [
        "unlearn", "--model", str(tmp_path), "--forget", str(data), "--retain", str(data),
        "--out", str(tmp_path / "m"), *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (("--lr", "-1"), "argument --lr: must be > 0, got -1"),
        (("--lr", "nan"), "argument --lr: must be a finite number, got 'nan'"),
        (("--batch-size", "0"), "argument --batch-size: must be >= 1, got 0"),
        (("--steps", "0"), "argument --steps: must be >= 1, got 0"),
        (("--alpha", "-2"), "argument --alpha: must be >= 0, got -2"),
    ],
)
def test_unlearn_refuses_impossible_numbers(tmp_path, capsys, extra, match):
    err = _usage_error(capsys, _unlearn_argv(tmp_path, *extra))
    assert match in err


def test_unlearn_names_missing_and_directory_data_files(tmp_path, capsys):
    argv = _unlearn_argv(tmp_path)
    argv[argv.index("--forget") + 1] = str(tmp_path / "nope.jsonl")
    assert "nope.jsonl: cannot read" in _one_line_error(capsys, argv)
    argv = _unlearn_argv(tmp_path, "--format", "corpus")
    argv[argv.index("--forget") + 1] = str(tmp_path)
    assert "is a directory" in _one_line_error(capsys, argv)


def test_truncated_checkpoint_is_one_line_naming_the_file(micro, tmp_path, capsys):
    model, tok = micro
    folder = tmp_path / "ckpt"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    argv = _unlearn_argv(tmp_path)
    argv[argv.index("--model") + 1] = str(folder)
    err = _one_line_error(capsys, argv)
    assert "model.safetensors" in err
    assert "truncated" in err
    (folder / "config.json").write_text("{not json")
    assert "config.json: not valid JSON" in _one_line_error(capsys, argv)
    err = _one_line_error(capsys, ["demo", "--quick", "--out", str(tmp_path / "o"),
                                   "--model", str(folder)])  # fmt: skip
    assert "config.json" in err


@pytest.mark.parametrize("fmt", ["mc", "corpus"])
def test_evaluate_on_a_binary_file_is_one_line_naming_it(tmp_path, capsys, fmt):
    """Issue #46: ``ra2 evaluate`` on a binary file raised UnicodeDecodeError."""
    binary = tmp_path / "forget.jsonl"
    binary.write_bytes(bytes(range(256)) * 4)
    argv = ["evaluate", "--model", str(tmp_path), "--forget", str(binary), "--format", fmt,
            "--out", str(tmp_path / "eval")]  # fmt: skip
    err = _one_line_error(capsys, argv)
    assert f"{binary}: not UTF-8 text" in err
    assert not (tmp_path / "eval").exists()


def test_mc_jsonl_refuses_huge_and_deep_json_in_one_line(tmp_path):
    huge = tmp_path / "huge.jsonl"
    huge.write_text('{"question": "Q?", "choices": ["a", "b"], "answer": ' + "9" * 5000 + "}\n")
    with pytest.raises(UnlearnError, match=r"huge\.jsonl:1: not a question/choices/answer"):
        load_mc_jsonl(huge)
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(UnlearnError, match=r"deep\.jsonl:1: not a question/choices/answer"):
        load_mc_jsonl(deep)
