"""nf12-format: NF12, a lossless 12-bit storage and compute format for BF16 weights.

After a per-matrix power-of-two scale almost every trained BF16 weight has the upper exponent
nibble ``0111``; dropping it leaves a fixed 12-bit code, and the rare out-of-range groups are
stored verbatim behind a sentinel code. The public API is loaded lazily so that ``import nf12``
and ``nf12 --help`` work without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.3.0"

_LAZY = {
    "Nf12Error": "nf12.errors",
    "NF12Tensor": "nf12.format",
    "encode": "nf12.format",
    "decode": "nf12.format",
    "compress_file": "nf12.files",
    "decompress_file": "nf12.files",
    "inspect_file": "nf12.files",
    "NF12Linear": "nf12.nn",
    "NF12Conv1D": "nf12.nn",
    "quantize_model": "nf12.nn",
    "set_fused": "nf12.nn",
    "NF12Config": "nf12.hf",
    "load_compressed": "nf12.nn",
}

__all__ = ["__version__", *sorted(_LAZY)]

if TYPE_CHECKING:
    from nf12.errors import Nf12Error as Nf12Error
    from nf12.files import compress_file as compress_file
    from nf12.files import decompress_file as decompress_file
    from nf12.files import inspect_file as inspect_file
    from nf12.format import NF12Tensor as NF12Tensor
    from nf12.format import decode as decode
    from nf12.format import encode as encode
    from nf12.hf import NF12Config as NF12Config
    from nf12.nn import NF12Conv1D as NF12Conv1D
    from nf12.nn import NF12Linear as NF12Linear
    from nf12.nn import load_compressed as load_compressed
    from nf12.nn import quantize_model as quantize_model
    from nf12.nn import set_fused as set_fused


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nf12' has no attribute {name!r}")
