"""NF12 checkpoints in vLLM: a quantization plug-in (``quant_method = "nf12"``).

vLLM finds out-of-tree quantization methods the way it finds every plug-in: the entry point
``vllm.general_plugins`` (this package declares ``nf12 = "nf12.vllm_plugin:register"``) is
loaded in each of vLLM's processes (the API server, the engine core, the workers), and
:func:`register` adds ``nf12`` through vLLM's public ``register_quantization_config``. Then a
checkpoint saved by ``nf12.quantize_model(model).save_pretrained(dir)`` is served as written::

    pip install './packages/nf12-format[vllm]'
    vllm serve ./smollm2-nf12 --enforce-eager

(vLLM reads ``quantization_config.quant_method`` from ``config.json``; no ``--quantization``
flag is needed.) Each linear layer keeps its weight as NF12 planes in memory (12 bits per weight
plus escapes) and decodes it, bit-exactly, right before its GEMM: the weights vLLM multiplies are
the BF16 checkpoint's, and the memory they leave free goes to the KV cache. vLLM fuses q/k/v and
gate/up into one layer; an NF12 checkpoint stores them separately (each with its own exponent
window and sentinel), so a fused layer holds one NF12 matrix per shard, decoded shard by shard.

vLLM is imported only inside :func:`register`: ``import nf12.vllm_plugin`` and the package's
tests work without vLLM. Scope: one process per model (tensor parallel size 1; a sharded NF12
matrix would need its escape buffer split by rows, refused in one line), decode + GEMM (the
fused Triton GEMV is not wired into vLLM), ``lm_head`` NF12 only when it is tied (an untied
NF12 ``lm_head`` is refused in one line: quantize with ``skip=["lm_head"]``).
"""

from __future__ import annotations

import logging

__all__ = ["QUANT_METHOD", "register"]

QUANT_METHOD = "nf12"

log = logging.getLogger(__name__)


def register() -> None:
    """Register ``nf12`` with vLLM (idempotent: vLLM loads plug-ins once per process, and a
    second call changes nothing). Called by vLLM through the ``vllm.general_plugins`` entry
    point; call it yourself before building a ``vllm.LLM`` where the package is not installed
    (a source checkout on ``PYTHONPATH``)."""
    from vllm.model_executor.layers.quantization import (
        _CUSTOMIZED_METHOD_TO_QUANT_CONFIG,
        register_quantization_config,
    )

    if QUANT_METHOD in _CUSTOMIZED_METHOD_TO_QUANT_CONFIG:
        return
    from nf12._vllm import NF12VllmConfig

    register_quantization_config(QUANT_METHOD)(NF12VllmConfig)
    log.debug("nf12: registered quant_method %r with vLLM", QUANT_METHOD)
