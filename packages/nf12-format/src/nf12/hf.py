"""NF12 as a transformers quantization method: ``quant_method = "nf12"``.

``import nf12.hf`` registers :class:`NF12Config` and :class:`NF12HfQuantizer` with transformers
through its public ``register_quantization_config`` / ``register_quantizer``. Then:

- ``nf12.quantize_model(model)`` (or ``from_pretrained(bf16_dir,
  quantization_config=NF12Config())``, which quantizes while loading) gives a model whose
  ``save_pretrained(dir)`` writes the NF12 planes of every converted linear layer, sharded like
  any checkpoint, with ``quantization_config`` in ``config.json``;
- ``AutoModel*.from_pretrained(dir)`` builds :class:`~nf12.nn.NF12Linear` layers on the meta
  device, loads their planes, checks each header and (``verify``, the default) the sha256 of
  every decoded weight: the model's outputs are bit-identical to the BF16 model's.

Where nf12 is not installed or not imported, transformers does not know ``nf12``, skips the
quantization with a warning, and then finds each converted layer's ``weight`` 1-D where the model
wants a matrix: the load stops with a size-mismatch error. It never gives random weights.

Tied linear layers (an ``lm_head`` sharing the input embedding) stay BF16 and tied, stored once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from transformers.core_model_loading import ConversionOps
from transformers.quantizers import HfQuantizer, register_quantization_config, register_quantizer
from transformers.utils.quantization_config import QuantizationConfigMixin

from nf12.errors import Nf12Error
from nf12.format import DEFAULT_GROUP, FORMAT_VERSION, GROUPS, encode
from nf12.nn import (
    NF12Linear,
    encoded_state,
    linear_like,
    linear_names,
    nothing_to_convert,
    replace_module,
)

__all__ = [
    "QUANT_METHOD",
    "NF12Config",
    "NF12HfQuantizer",
    "attach",
    "quantize_pretrained",
    "register",
]

QUANT_METHOD = "nf12"


class NF12Config(QuantizationConfigMixin):
    """How a model is (or is to be) stored in NF12.

    - ``group``: weights per group (the paper leaves it open; 8 keeps 99.9% of MiniLM's groups
      escape-free and makes a group one u64 + one u32);
    - ``modules_to_not_convert``: linear modules left in BF16 (tied ones are added when the
      model is converted, so the saved list is exactly what stayed BF16);
    - ``fused``: use the fused Triton GEMV/GEMM on CUDA (faster, equal up to fp32 rounding)
      instead of decode + ``F.linear`` (bit-identical to the BF16 model);
    - ``verify``: decode every layer once when loading and check its sha256.
    """

    def __init__(
        self,
        group: int = DEFAULT_GROUP,
        modules_to_not_convert: list[str] | None = None,
        fused: bool = False,
        verify: bool = True,
        format_version: int = FORMAT_VERSION,
        **kwargs: Any,
    ) -> None:
        self.quant_method = QUANT_METHOD  # type: ignore[assignment]  # not one of theirs
        if group not in GROUPS:
            raise Nf12Error(f"NF12Config: group {group} must be one of {GROUPS}")
        if format_version != FORMAT_VERSION:
            raise Nf12Error(
                f"NF12Config: format_version {format_version} (this nf12 reads {FORMAT_VERSION};"
                " upgrade nf12-format)"
            )
        self.group = group
        self.modules_to_not_convert = list(modules_to_not_convert or [])
        self.fused = bool(fused)
        self.verify = bool(verify)
        self.format_version = format_version

    def to_dict(self) -> dict[str, Any]:
        return {
            "quant_method": self.quant_method,
            "group": self.group,
            "modules_to_not_convert": list(self.modules_to_not_convert),
            "fused": self.fused,
            "verify": self.verify,
            "format_version": self.format_version,
        }


class NF12Quantize(ConversionOps):
    """The load-time op of ``from_pretrained(bf16, quantization_config=NF12Config())``: one
    checkpoint ``<module>.weight`` in, the module's five NF12 state tensors out."""

    def __init__(self, hf_quantizer: NF12HfQuantizer) -> None:
        self.hf_quantizer = hf_quantizer

    def convert(  # type: ignore[override]  # transformers' ops take and return what they need
        self, input_dict: dict[str, Any], model: Any = None, **kwargs: Any
    ) -> dict[str, torch.Tensor]:
        target, value = next(iter(input_dict.items()))
        weight = value[0] if isinstance(value, list) else value
        module_name = target.rpartition(".")[0]
        if weight.dtype != torch.bfloat16:
            weight = weight.to(torch.bfloat16)
        nt = encode(weight.contiguous(), self.hf_quantizer.quantization_config.group,
                    name=target)  # fmt: skip
        return {f"{module_name}.{k}": v for k, v in encoded_state(nt).items()}


class NF12HfQuantizer(HfQuantizer):
    """Builds NF12 layers before the weights load and checks them after."""

    requires_calibration = False
    quantization_config: NF12Config

    def validate_environment(self, *args: Any, **kwargs: Any) -> None:
        device_map = kwargs.get("device_map")
        if isinstance(device_map, dict) and "disk" in device_map.values():
            raise Nf12Error("nf12: disk offload is not supported (the layers hold NF12 buffers)")

    def update_dtype(self, dtype: torch.dtype | None) -> torch.dtype:
        # NF12 codes BF16 weights: quantizing while loading needs them in BF16. A model already
        # in NF12 may run its other parameters in another dtype (the layers cast on the fly).
        if dtype is None or (not self.pre_quantized and dtype != torch.bfloat16):
            return torch.bfloat16
        return dtype

    def param_needs_quantization(self, model: Any, param_name: str, **kwargs: Any) -> bool:
        # A converted layer's `weight` arrives BF16 and is quantized (on the fly), and its
        # escape buffer's length is data-dependent: both may differ from the skeleton's shape.
        module_name, _, tensor = param_name.rpartition(".")
        module = model.get_submodule(module_name) if module_name else model
        return isinstance(module, NF12Linear) and tensor in ("weight", "weight_esc")

    def get_quantize_ops(self) -> NF12Quantize:
        return NF12Quantize(self)

    def _process_model_before_weight_loading(self, model: Any, **kwargs: Any) -> Any:
        config = self.quantization_config
        converted, kept = linear_names(model, config.modules_to_not_convert)
        if not converted:
            # Quantizing while loading a model with no linear layer, or a checkpoint that says
            # nf12 over none: refuse rather than save or load "nf12" that compresses nothing.
            raise Nf12Error(nothing_to_convert(model, kept))
        for name in converted:
            module = model.get_submodule(name)
            layer_class = linear_like(module)
            assert layer_class is not None
            in_features, out_features = _features(module)
            weight = module.weight
            layer = layer_class(in_features, out_features, module.bias is not None,
                                group=config.group, fused=config.fused,
                                device=weight.device, dtype=weight.dtype)  # fmt: skip
            if not self.pre_quantized:
                # The checkpoint's BF16 weight lands here first; the quantize op replaces it.
                layer.weight = torch.empty(tuple(weight.shape), dtype=torch.bfloat16,
                                           device=weight.device)  # fmt: skip
            replace_module(model, name, layer)
        config.modules_to_not_convert = sorted(kept)
        return model

    def _process_model_after_weight_loading(self, model: Any, **kwargs: Any) -> Any:
        for name, module in model.named_modules():
            if isinstance(module, NF12Linear):
                try:
                    module.check(verify=self.quantization_config.verify)
                except Nf12Error as exc:
                    raise Nf12Error(f"nf12: layer {name!r}: {exc}") from None
                module.fused = self.quantization_config.fused
        return model

    def is_serializable(self, *args: Any, **kwargs: Any) -> bool:
        return True

    @property
    def is_trainable(self) -> bool:
        return False


def _features(module: Any) -> tuple[int, int]:
    """``(in, out)`` of a linear-like module: ``nn.Linear``'s fields, or ``Conv1D``'s
    ``nx``/``nf``."""
    if hasattr(module, "in_features"):
        return int(module.in_features), int(module.out_features)
    return int(module.nx), int(module.nf)


def register() -> None:
    """Register ``nf12`` with transformers (idempotent; done on ``import nf12.hf``)."""
    for registration, cls in ((register_quantization_config, NF12Config),
                              (register_quantizer, NF12HfQuantizer)):  # fmt: skip
        with contextlib.suppress(ValueError):  # "already registered": an earlier import or call
            registration(QUANT_METHOD)(cls)


def attach(model: Any, *, group: int, fused: bool, kept: list[str]) -> None:
    """Mark a model converted by :func:`nf12.quantize_model` as NF12, the way ``from_pretrained``
    leaves a quantized model: config, quantizer and flags, so ``save_pretrained`` writes it."""
    register()
    config = NF12Config(group=group, fused=fused, modules_to_not_convert=sorted(kept))
    model.config.quantization_config = config
    model.hf_quantizer = NF12HfQuantizer(config, pre_quantized=True)
    model.is_quantized = True
    model.quantization_method = QUANT_METHOD


def quantize_pretrained(
    model_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    group: int = DEFAULT_GROUP,
    skip: Iterable[str] = (),
) -> Path:
    """Write the NF12 checkpoint of a causal LM folder (or hub id) to ``out_dir``: the model
    loaded in BF16, :func:`nf12.quantize_model`, ``save_pretrained``, and its tokenizer (when
    it has one) beside it, so ``vllm serve out_dir`` or ``from_pretrained(out_dir)`` runs it.

    A float32 checkpoint is cast to BF16 first: NF12 is lossless against that BF16 model.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from nf12.nn import quantize_model

    out = Path(out_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    quantize_model(model, group, skip=skip)
    model.save_pretrained(out)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
    except (OSError, ValueError):  # a weights-only folder: the checkpoint is still complete
        return out
    tokenizer.save_pretrained(out)
    return out


register()
