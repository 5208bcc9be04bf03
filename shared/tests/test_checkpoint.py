"""A bad model folder is one line naming the file, before any library sees it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paperstack.checkpoint import CheckpointError, check_model_dir, load_pretrained

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from paperstack import tiny

    path = tmp_path_factory.mktemp("model")
    tok = tiny.build_tokenizer()
    tiny.build_model("micro", tok).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_a_good_folder_loads(saved: Path) -> None:
    from transformers import AutoModelForCausalLM

    assert check_model_dir(saved) == saved
    model = load_pretrained(saved, AutoModelForCausalLM.from_pretrained)
    assert sum(p.numel() for p in model.parameters()) > 0


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.joinpath("model.safetensors").write_bytes(
            p.joinpath("model.safetensors").read_bytes()[:5000]), "truncated"),
        (lambda p: p.joinpath("model.safetensors").write_bytes(b"garbage!garbage"),
         "not a safetensors file or truncated"),
        (lambda p: p.joinpath("model.safetensors").write_bytes(b"abc"), "truncated"),
        (lambda p: p.joinpath("config.json").write_text("{not json"), "not valid JSON"),
        (lambda p: p.joinpath("config.json").unlink(), "no config.json"),
        (lambda p: p.joinpath("model.safetensors").unlink(), "no weights"),
    ],
)  # fmt: skip
def test_damaged_folders_name_the_file(saved: Path, tmp_path: Path, damage, message: str) -> None:
    from transformers import AutoModelForCausalLM

    bad = _copy(saved, tmp_path / "bad")
    damage(bad)
    with pytest.raises(CheckpointError) as info:
        load_pretrained(bad, AutoModelForCausalLM.from_pretrained)
    text = str(info.value)
    assert message in text
    assert str(bad) in text
    assert "\n" not in text


def test_missing_shard_is_named(saved: Path, tmp_path: Path) -> None:
    bad = _copy(saved, tmp_path / "sharded")
    (bad / "model.safetensors").rename(bad / "model-00001-of-00002.safetensors")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors",
                            "b": "model-00002-of-00002.safetensors"}}  # fmt: skip
    (bad / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"model-00002-of-00002\.safetensors: missing"):
        check_model_dir(bad)


def test_a_file_is_not_a_folder(tmp_path: Path) -> None:
    f = tmp_path / "x"
    f.write_text("x")
    with pytest.raises(CheckpointError, match="is a file"):
        check_model_dir(f)
