"""The vLLM side of :mod:`nf12.vllm_plugin` (imports vLLM: loaded only by ``register()``).

A vLLM linear layer (``QKVParallelLinear``, ``MergedColumnParallelLinear``, ``RowParallelLinear``
...) asks its quant method for weights (:meth:`NF12LinearMethod.create_weights`), vLLM's loader
feeds the checkpoint's tensors to each parameter's ``weight_loader`` with the shard they belong to
(``q``/``k``/``v``, ``0``/``1``, or none), and every forward calls :meth:`NF12LinearMethod.apply`.
An NF12 layer's five checkpoint tensors (``weight`` = sign/mantissa plane, ``weight_ex``,
``weight_esc``, ``weight_nf12`` header, ``weight_sha256``; see :mod:`nf12.nn`) land here per shard:
the planes straight into the layer's preallocated fused planes (their sizes follow from the
shapes), the header and digest into one row per shard, and the escape buffer, whose length only
the checkpoint knows, into a list that :meth:`process_weights_after_loading` concatenates after
checking every shard's header (and, with ``verify``, the sha256 of its decoded weight).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from vllm.model_executor.layers.linear import LinearBase, LinearMethodBase, UnquantizedLinearMethod
from vllm.model_executor.layers.quantization.base_config import QuantizationConfig
from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

from nf12.errors import Nf12Error
from nf12.format import DEFAULT_GROUP, FORMAT_VERSION, GROUPS, NF12Tensor, decode
from nf12.nn import HEADER_MAGIC, _sha256
from nf12.vllm_plugin import QUANT_METHOD

#: ``weight_nf12`` fields (see :mod:`nf12.nn`).
_MAGIC, _VERSION, _GROUP, _BASE, _SENTINEL, _ROWS, _COLS, _NESC = range(8)
#: vLLM's shard ids of a fused layer, in the order of its output rows.
_QKV = {"q": 0, "k": 1, "v": 2}


def _matches(name: str, patterns: list[str]) -> bool:
    """``nf12.nn.linear_names``' rule: a module name, a prefix at a module boundary, a suffix."""
    return any(
        name == p or name.startswith(p + ".") or name.endswith("." + p) for p in patterns if p
    )


class NF12VllmConfig(QuantizationConfig):
    """``quantization_config`` of an NF12 checkpoint, as vLLM reads it from ``config.json``."""

    def __init__(
        self,
        group: int = DEFAULT_GROUP,
        modules_to_not_convert: list[str] | None = None,
        verify: bool = True,
    ) -> None:
        super().__init__()
        self.group = group
        self.modules_to_not_convert = list(modules_to_not_convert or [])
        self.verify = verify

    def __repr__(self) -> str:
        return (
            f"NF12VllmConfig(group={self.group}, verify={self.verify}, "
            f"modules_to_not_convert={self.modules_to_not_convert})"
        )

    def get_name(self) -> Any:
        return QUANT_METHOD

    def get_supported_act_dtypes(self) -> list[torch.dtype]:
        # The decoded weight is BF16 and exact in any of these; the GEMM runs in the model's.
        return [torch.bfloat16, torch.float16, torch.float32]

    @classmethod
    def get_min_capability(cls) -> int:
        return 0  # plain torch ops (decode + F.linear): any GPU, and the CPU build

    @staticmethod
    def get_config_filenames() -> list[str]:
        return []  # the config is config.json's quantization_config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> NF12VllmConfig:
        version = int(config.get("format_version", FORMAT_VERSION))
        if version != FORMAT_VERSION:
            raise Nf12Error(
                f"config.json: quantization_config.format_version {version} (this nf12 reads "
                f"{FORMAT_VERSION}; upgrade nf12-format)"
            )
        group = int(config.get("group", DEFAULT_GROUP))
        if group not in GROUPS:
            raise Nf12Error(f"config.json: quantization_config.group {group} not in {GROUPS}")
        return cls(
            group=group,
            modules_to_not_convert=list(config.get("modules_to_not_convert") or []),
            verify=bool(config.get("verify", True)),
        )

    def _shard_names(self, prefix: str) -> list[str]:
        """The checkpoint's module names behind vLLM's (fused) layer ``prefix``."""
        head, _, last = prefix.rpartition(".")
        parts = self.packed_modules_mapping.get(last)
        if not parts:
            return [prefix]
        return [f"{head}.{p}" if head else p for p in parts]

    def get_quant_method(self, layer: torch.nn.Module, prefix: str) -> Any:
        names = self._shard_names(prefix)
        kept = [_matches(n, self.modules_to_not_convert) for n in names]
        if isinstance(layer, ParallelLMHead):
            # nf12 keeps a tied lm_head in BF16 and lists it in modules_to_not_convert; vLLM
            # then ties it to the embedding. An NF12 lm_head would need an NF12 logits GEMM.
            if all(kept):
                return None
            raise Nf12Error(
                f"{prefix}: an NF12 lm_head is not served by nf12's vLLM plug-in; quantize "
                "with nf12.quantize_model(model, skip=['lm_head'])"
            )
        if not isinstance(layer, LinearBase):
            return None
        if all(kept):
            return UnquantizedLinearMethod()
        if any(kept):
            raise Nf12Error(
                f"{prefix}: vLLM fuses {', '.join(names)} into one layer, but the checkpoint "
                "keeps only some of them in BF16; keep all or none"
            )
        return NF12LinearMethod(self)


class NF12LinearMethod(LinearMethodBase):
    """NF12 planes in memory, decoded (bit-exact BF16) before each GEMM."""

    def __init__(self, config: NF12VllmConfig) -> None:
        self.config = config

    def create_weights(
        self,
        layer: Any,
        input_size_per_partition: int,
        output_partition_sizes: list[int],
        input_size: int,
        output_size: int,
        params_dtype: torch.dtype,
        **extra_weight_attrs: Any,
    ) -> None:
        prefix = getattr(layer, "prefix", type(layer).__name__)
        if input_size_per_partition != input_size or sum(output_partition_sizes) != output_size:
            raise Nf12Error(
                f"{prefix}: nf12's vLLM plug-in serves an unsharded model "
                "(--tensor-parallel-size 1)"
            )
        group = self.config.group
        padded = -(-input_size // group) * group
        rows = sum(output_partition_sizes)
        layer.nf12_prefix = prefix
        layer.nf12_rows = list(output_partition_sizes)
        layer.nf12_cols = input_size
        layer.nf12_padded = padded
        layer.nf12_group = group
        layer.nf12_esc_parts = [None] * len(output_partition_sizes)
        layer.nf12_loaded = [set() for _ in output_partition_sizes]

        def param(shape: tuple[int, ...], dtype: torch.dtype) -> torch.nn.Parameter:
            p = torch.nn.Parameter(torch.zeros(shape, dtype=dtype), requires_grad=False)
            p.weight_loader = _loader(layer)  # type: ignore[attr-defined]
            return p

        n = len(output_partition_sizes)
        layer.register_parameter("weight", param((rows * padded,), torch.uint8))
        layer.register_parameter("weight_ex", param((rows * padded // 2,), torch.uint8))
        layer.register_parameter("weight_esc", param((0, group), torch.bfloat16))
        layer.register_parameter("weight_nf12", param((n, 8), torch.int64))
        layer.register_parameter("weight_sha256", param((n, 32), torch.uint8))

    def process_weights_after_loading(self, layer: Any) -> None:
        prefix = layer.nf12_prefix
        for i, got in enumerate(layer.nf12_loaded):
            missing = {"weight", "weight_ex", "weight_esc", "weight_nf12", "weight_sha256"} - got
            if missing:
                raise Nf12Error(
                    f"{prefix}: shard {i}: the checkpoint has no {sorted(missing)[0]!r} "
                    "(not an NF12 checkpoint, or a layer saved in BF16)"
                )
        esc = torch.cat([p.to(torch.bfloat16) for p in layer.nf12_esc_parts], dim=0)
        layer.weight_esc = torch.nn.Parameter(esc.contiguous(), requires_grad=False)
        layer.nf12_esc_parts = None
        tensors = []
        start = 0
        for i, rows in enumerate(layer.nf12_rows):
            head = [int(v) for v in layer.weight_nf12[i].tolist()]
            _check_header(prefix, i, head, rows, layer.nf12_cols, self.config.group)
            nt = _shard(layer, i, start, head)
            if self.config.verify:
                digest = _sha256(decode(nt, check=True))
                if not torch.equal(digest, layer.weight_sha256[i]):
                    raise Nf12Error(
                        f"{prefix}: shard {i}: sha256 of the decoded weight does not match the "
                        "one recorded at compression (corrupted checkpoint)"
                    )
            tensors.append(nt)
            start += head[_NESC]
        layer.nf12_tensors = tensors

    def apply(self, layer: Any, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        parts = [decode(nt, check=False) for nt in layer.nf12_tensors]
        weight = parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)
        return F.linear(x, weight.to(x.dtype), bias)


def _loader(layer: Any) -> Any:
    """The ``weight_loader`` of an NF12 layer's parameters: one shard's tensor into place."""

    def load(param: torch.nn.Parameter, loaded: torch.Tensor, shard_id: Any = None) -> None:
        if shard_id is None:
            shard_id = getattr(loaded, "shard_id", None)
        index = _QKV.get(shard_id, shard_id) if isinstance(shard_id, str) else shard_id
        index = 0 if index is None else int(index)
        name = next(k for k, v in layer.named_parameters(recurse=False) if v is param)
        prefix = layer.nf12_prefix
        rows, padded = layer.nf12_rows, layer.nf12_padded
        if not 0 <= index < len(rows):
            raise Nf12Error(f"{prefix}.{name}: shard {shard_id!r} of a {len(rows)}-shard layer")
        if name == "weight_esc":
            layer.nf12_esc_parts[index] = loaded.detach().clone()
        elif name in ("weight_nf12", "weight_sha256"):
            if loaded.numel() != param.shape[1]:
                raise Nf12Error(f"{prefix}.{name}: {loaded.numel()} values, expected "
                                f"{param.shape[1]}")  # fmt: skip
            param.data[index].copy_(loaded.reshape(-1))
        else:
            per_row = padded if name == "weight" else padded // 2
            start, count = sum(rows[:index]) * per_row, rows[index] * per_row
            if loaded.dtype != torch.uint8 or loaded.numel() != count:
                raise Nf12Error(
                    f"{prefix}.{name}: shard {index}: got {loaded.dtype} {tuple(loaded.shape)}, "
                    f"expected uint8 [{count}] (an NF12 plane for {rows[index]}x"
                    f"{layer.nf12_cols} at group {layer.nf12_group})"
                )
            param.data[start : start + count].copy_(loaded.reshape(-1))
        layer.nf12_loaded[index].add(name)

    return load


def _check_header(prefix: str, i: int, head: list[int], rows: int, cols: int, group: int) -> None:
    where = f"{prefix}: shard {i}: weight_nf12"
    if head[_MAGIC] != HEADER_MAGIC:
        raise Nf12Error(f"{where}: no NF12 header")
    if head[_VERSION] != FORMAT_VERSION:
        raise Nf12Error(f"{where}: format version {head[_VERSION]}, this nf12 reads "
                        f"{FORMAT_VERSION}")  # fmt: skip
    if (head[_GROUP], head[_ROWS], head[_COLS]) != (group, rows, cols):
        raise Nf12Error(
            f"{where}: group {head[_GROUP]}, shape ({head[_ROWS]}, {head[_COLS]}); the layer "
            f"wants group {group}, shape ({rows}, {cols})"
        )


def _shard(layer: Any, i: int, esc_start: int, head: list[int]) -> NF12Tensor:
    """Shard ``i`` of a layer as an :class:`NF12Tensor` (views of the layer's planes)."""
    rows, padded = layer.nf12_rows, layer.nf12_padded
    r0, r = sum(rows[:i]), rows[i]
    n_esc = head[_NESC]
    esc = layer.weight_esc[esc_start : esc_start + n_esc]
    if esc.shape[0] != n_esc:
        raise Nf12Error(f"{layer.nf12_prefix}: shard {i}: weight_esc has fewer than the "
                        f"header's {n_esc} groups")  # fmt: skip
    return NF12Tensor(
        sm=layer.weight.data[r0 * padded : (r0 + r) * padded].view(r, padded),
        ex=layer.weight_ex.data[r0 * padded // 2 : (r0 + r) * padded // 2].view(r, padded // 2),
        esc=esc.data,
        shape=(r, layer.nf12_cols),
        base=head[_BASE],
        sentinel=head[_SENTINEL],
        group=head[_GROUP],
    )
