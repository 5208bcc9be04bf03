"""Loading a model folder so that a bad one is one line naming the file, not a library traceback.

A checkpoint folder that a user hands a package (``--model DIR``, ``convert --model DIR``) can be
truncated by a killed copy, hold a ``config.json`` that is not JSON, or lack its weights.
transformers then raises ``SafetensorError: Error while deserializing header`` from deep inside
its loader. :func:`check_model_dir` reads what the loader would (``config.json``, the safetensors
headers and sizes, the shard index) without torch, and says which file is wrong and how;
:func:`load_pretrained` runs it before any ``from_pretrained`` and turns what still goes wrong
into a :class:`~paperstack.errors.PaperstackError`.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from paperstack.errors import PaperstackError

__all__ = ["CheckpointError", "check_model_dir", "check_safetensors", "load_pretrained"]

T = TypeVar("T")

#: Weight files transformers looks for, in its order of preference.
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


class CheckpointError(PaperstackError):
    """A model folder or weight file that cannot be loaded; the message names the file."""


def check_safetensors(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Validate one ``.safetensors`` file's header against its size; return the header.

    The format is an 8-byte little-endian header length, a JSON header mapping each tensor to
    its dtype, shape and ``data_offsets``, then the data; a file shorter than the largest
    offset was cut off.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{p}: truncated ({size} bytes; not a safetensors file)")
            (length,) = struct.unpack("<Q", head)
            if length > size - 8 or length > 100_000_000:
                raise CheckpointError(
                    f"{p}: not a safetensors file or truncated (header of {length} bytes in a "
                    f"file of {size})"
                )
            raw = fh.read(length)
    except OSError as exc:
        raise CheckpointError(f"{p}: cannot read ({exc.strerror})") from None
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise CheckpointError(f"{p}: corrupt safetensors header (not JSON)") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{p}: corrupt safetensors header (not an object)")
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            _, hi = info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{p}: tensor {name!r} has no data_offsets") from None
        end = max(end, int(hi))
    if 8 + length + end > size:
        raise CheckpointError(
            f"{p}: truncated ({size} bytes, the header needs {8 + length + end}); "
            "copy or save the checkpoint again"
        )
    return header


def check_model_dir(path: str | os.PathLike[str]) -> Path:
    """Check a local model folder: ``config.json`` readable, weights present and whole."""
    p = Path(path).expanduser()
    if not p.exists():
        raise CheckpointError(f"{p}: no such directory")
    if not p.is_dir():
        raise CheckpointError(f"{p}: is a file, not a model directory")
    config = p / "config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{p}: no config.json (not a saved model folder)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{config}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{config}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{config}: expected a JSON object")
    found = [name for name in _WEIGHTS if (p / name).is_file()]
    if not found:
        raise CheckpointError(f"{p}: no weights ({', '.join(_WEIGHTS)} missing)")
    if found[0] == "model.safetensors":
        check_safetensors(p / "model.safetensors")
    elif found[0] == "model.safetensors.index.json":
        index = p / "model.safetensors.index.json"
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise CheckpointError(f"{index}: not a safetensors shard index") from None
        for shard in sorted(shards):
            if not (p / shard).is_file():
                raise CheckpointError(f"{p / shard}: missing (named in {index.name})")
            check_safetensors(p / shard)
    return p


def load_pretrained(
    name_or_path: str | os.PathLike[str], loader: Callable[..., T], **kwargs: Any
) -> T:
    """``loader(name_or_path, **kwargs)`` (a ``from_pretrained``) with one-line errors.

    A local folder is checked first (:func:`check_model_dir`); a preset of
    :mod:`paperstack.models` (``smollm2-135m-instruct``) loads from its converted folder; a hub
    id is passed through, and what fails while loading it is reported with the id.
    """
    from paperstack import models

    target = str(name_or_path)
    if models.is_preset(target) and not Path(target).exists():
        target = str(models.model_path(target))
    if Path(target).expanduser().exists():
        target = str(check_model_dir(target))
    try:
        return loader(target, **kwargs)
    except PaperstackError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"{target}: cannot load the model: {first}") from None
    except Exception as exc:  # safetensors' SafetensorError derives from Exception only
        if type(exc).__name__ != "SafetensorError":
            raise
        raise CheckpointError(f"{target}: corrupt weights: {exc}") from None
