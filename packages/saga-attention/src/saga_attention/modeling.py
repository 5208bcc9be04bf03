"""SAGA inside transformers: a registered attention function and a Llama-style model class.

Two pieces, so that every baseline runs through the same code:

- :func:`saga_attention_forward`, registered with ``transformers.AttentionInterface`` (and its
  mask with ``AttentionMaskInterface``) under the name ``"saga"``. It takes any number of key
  and value heads and reads its settings from the model config (``saga_mode`` = ``dense`` /
  ``exact`` / ``atop``, ``saga_top_n``...). Prefill runs dense; a decode step (one query
  token) runs sparse when the cache holds more than ``N`` tokens. Any Llama/Qwen-style model
  switches to it with :func:`enable_saga_attention`; a GQA model so switched is the
  "GQA + the same sparse attention" baseline.
- :class:`SagaForCausalLM` (config :class:`SagaConfig`, ``model_type="saga_llama"``): a
  ``LlamaForCausalLM`` whose attention has ``H_k = num_key_heads`` key projections and
  ``H_v = num_key_value_heads`` value projections. Its caches store keys and values as
  separate tensors, so they hold ``(H_k + H_v) · d`` numbers per token and layer: the ordinary
  ``DynamicCache``, and a static cache (:class:`AsymmetricStaticLayer`, what
  ``generate(cache_implementation="static")`` builds for it) whose value tensors get ``H_v``
  heads; transformers' own static layer sizes both from the keys. Registered with the Auto
  classes, so ``from_pretrained`` loads a saved SAGA model.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import (
    AttentionInterface,
    AutoConfig,
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
)
from transformers.cache_utils import Cache, StaticCache, StaticLayer
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.models.llama.modeling_llama import LlamaAttention

from saga_attention.attention import (
    _check_mask,
    aggregate_scores,
    dense_attention,
    grouped_dense_decode,
    sparse_attention,
    sparse_decode,
)
from saga_attention.heads import HeadLayout, SagaError
from saga_attention.selection import AtopConfig, atop_n, exact_top_n, selection_recall

__all__ = [
    "ATTENTION_NAME",
    "MODES",
    "AsymmetricStaticLayer",
    "SagaAttention",
    "SagaConfig",
    "SagaForCausalLM",
    "SparseSettings",
    "cache_kwargs",
    "enable_saga_attention",
    "kv_cache_bytes",
    "measure_recall",
    "register",
    "saga_attention_forward",
]

ATTENTION_NAME = "saga"
MODES = ("dense", "exact", "atop")
BACKENDS = ("torch", "triton")


@dataclass(frozen=True)
class SparseSettings:
    """The attention settings a model config carries (``saga_*`` attributes)."""

    mode: str = "dense"
    top_n: int = 64
    sparse_prefill: bool = False
    backend: str = "torch"
    atop: AtopConfig = field(default_factory=AtopConfig)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SagaError(f"saga_mode: must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.backend not in BACKENDS:
            raise SagaError(
                f"saga_backend: must be one of {', '.join(BACKENDS)}, got {self.backend!r}"
            )
        if not isinstance(self.top_n, int) or self.top_n < 1:
            raise SagaError(f"saga_top_n: must be a positive integer, got {self.top_n!r}")

    @classmethod
    def from_config(cls, config: Any) -> SparseSettings:
        return cls(
            mode=getattr(config, "saga_mode", "dense"),
            top_n=getattr(config, "saga_top_n", 64),
            sparse_prefill=bool(getattr(config, "saga_sparse_prefill", False)),
            backend=getattr(config, "saga_backend", "torch"),
            atop=AtopConfig(
                stride=getattr(config, "saga_atop_stride", 8),
                oversample=getattr(config, "saga_atop_oversample", 2.0),
                cap_factor=getattr(config, "saga_atop_cap_factor", 4.0),
            ),
        )


def saga_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The ``"saga"`` attention function: ``q[B,H_q,T,d]``, ``k[B,H_k,L,d]``, ``v[B,H_v,L,d]``.

    Dense when ``saga_mode="dense"``, when the cache holds at most ``N`` tokens, or for a
    prefill (``T > 1``) unless ``saga_sparse_prefill`` asks every row to use the decode-time
    selection (used to score a whole sequence under sparse decoding in one pass). Returns
    ``(out[B, T, H_q, d], None)`` like transformers' own attention functions.
    """
    settings = SparseSettings.from_config(module.config)
    t, length = query.shape[2], key.shape[2]
    sparse = (
        settings.mode != "dense" and length > settings.top_n and (t == 1 or settings.sparse_prefill)
    )
    if sparse and _PROBES:
        _probe(query, key, attention_mask, scaling, settings)
    if not sparse and t == 1:  # a dense decode step: no copy of the cache to H_q heads
        keep = _check_mask(attention_mask, query, length)[:, 0, 0, :]
        keep = keep.expand(query.shape[0], length)
        out = grouped_dense_decode(query[:, :, 0], key, value, scaling, keep).unsqueeze(2)
    elif not sparse:
        out = dense_attention(query, key, value, attention_mask, scaling)
    elif t == 1:
        keep = _check_mask(attention_mask, query, length)[:, 0, 0, :]
        keep = keep.expand(query.shape[0], length)
        if settings.backend == "triton":
            from saga_attention.kernels import sparse_decode_triton

            out = sparse_decode_triton(
                query[:, :, 0],
                key,
                value,
                settings.top_n,
                keep,
                scaling,
                settings.mode,
                settings.atop,
            ).unsqueeze(2)
        else:
            decoded = sparse_decode(
                query[:, :, 0],
                key,
                value,
                settings.top_n,
                keep,
                scaling,
                settings.mode,
                settings.atop,
            )
            assert isinstance(decoded, torch.Tensor)
            out = decoded.unsqueeze(2)
    else:
        out = sparse_attention(
            query,
            key,
            value,
            settings.top_n,
            attention_mask,
            scaling,
            settings.mode,
            settings.atop,
        )
    return out.transpose(1, 2).contiguous(), None


class RecallProbe:
    """Collects Atop-N's recall against exact top-N on every sparse attention call it sees.

    One value per (batch row, key head, query position) whose context holds more than
    ``cap = cap_factor · N`` valid tokens (shorter rows are exact by construction); see
    :func:`measure_recall`.
    """

    def __init__(self) -> None:
        self.values: list[torch.Tensor] = []

    def add(self, recall: torch.Tensor) -> None:
        self.values.append(recall.detach().flatten().cpu())

    def recalls(self) -> torch.Tensor:
        return torch.cat(self.values) if self.values else torch.empty(0)


_PROBES: list[RecallProbe] = []


@contextlib.contextmanager
def measure_recall() -> Iterator[RecallProbe]:
    """Within the block, every sparse attention call also measures Atop-N recall@N.

    Costs an extra scoring pass and two selections per call, so it is for evaluation only.
    """
    probe = RecallProbe()
    _PROBES.append(probe)
    try:
        yield probe
    finally:
        _PROBES.remove(probe)


def _probe(
    query: torch.Tensor,
    key: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None,
    settings: SparseSettings,
) -> None:
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    keep = _check_mask(attention_mask, query, key.shape[2])
    with torch.no_grad():
        scores = aggregate_scores(query, key, scaling)  # [B, H_k, T, L]
        valid = keep.expand_as(scores)
        approx = atop_n(scores, settings.top_n, valid, settings.atop)
        exact = exact_top_n(scores, settings.top_n, valid)
        recall = selection_recall(*approx, *exact)
        # rows of at most cap = cap_factor · N tokens are exact by construction (they skip the
        # threshold), so they would only inflate the recall: count the others
        cap = math.ceil(settings.atop.cap_factor * settings.top_n)
        nontrivial = valid.sum(-1) > cap
        for probe in _PROBES:
            probe.add(recall[nontrivial])


def _saga_mask(*args: Any, **kwargs: Any) -> torch.Tensor | None:
    """transformers' boolean SDPA mask, always materialised (True = may attend)."""
    kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(*args, **kwargs)


@strict
class SagaConfig(LlamaConfig):
    """A Llama config with ``num_key_heads`` (``H_k``) apart from ``num_key_value_heads`` (``H_v``).

    Defaults follow the paper's setting: sparse decoding with Atop-N; ``saga_top_n=64`` is the
    notes' ``N`` for 4K-64K contexts (the demo's short toy contexts use a smaller ``N``).
    """

    model_type = "saga_llama"

    num_key_heads: int | None = None
    saga_mode: str = "atop"
    saga_top_n: int = 64
    saga_sparse_prefill: bool = False
    saga_backend: str = "torch"
    saga_atop_stride: int = 8
    saga_atop_oversample: float = 2.0
    saga_atop_cap_factor: float = 4.0

    def __post_init__(self, **kwargs: Any) -> None:
        super().__post_init__(**kwargs)
        if self.num_key_heads is None:
            self.num_key_heads = self.num_key_value_heads
        self.layout()  # validates the head counts
        SparseSettings.from_config(self)

    def layout(self) -> HeadLayout:
        """``HeadLayout(H_q, H_k, H_v, d)`` of this config."""
        assert self.num_key_value_heads is not None
        assert self.head_dim is not None
        return HeadLayout(
            int(self.num_attention_heads),
            int(self.num_key_heads or self.num_key_value_heads),
            int(self.num_key_value_heads),
            int(self.head_dim),
        )


class SagaAttention(LlamaAttention):
    """Llama attention with ``H_k`` key and ``H_v`` value projections.

    Only ``k_proj`` changes size: Llama's forward infers the head count from the projection
    (``view(..., -1, head_dim)``), applies RoPE to queries and keys, and stores keys and values
    separately in the cache, so the rest carries over; the head mapping lives in the registered
    attention function.
    """

    def __init__(self, config: SagaConfig, layer_idx: int) -> None:
        super().__init__(config, layer_idx)
        layout = config.layout()
        self.layout = layout
        self.k_proj = nn.Linear(
            config.hidden_size, layout.num_key_heads * layout.head_dim, bias=config.attention_bias
        )
        nn.init.normal_(self.k_proj.weight, std=config.initializer_range)
        if self.k_proj.bias is not None:
            nn.init.zeros_(self.k_proj.bias)


class AsymmetricStaticLayer(StaticLayer):
    """transformers' ``StaticLayer`` with the value tensor sized from the values (``H_v``).

    The stock layer allocates ``values`` with the key states' head count, so the first
    ``index_copy_`` of ``H_v != H_k`` value heads fails. Everything else (in-place updates,
    ``mark_static_address`` for CUDA graphs, the position counter) is the stock code.
    """

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        value_heads = value_states.shape[1]
        if self.values is None or self.values.shape[1] != value_heads:
            shape = (self.batch_size, value_heads, self.max_cache_len, self.v_head_dim)
            self.values = torch.zeros(shape, dtype=value_states.dtype, device=self.device)
            if not torch.compiler.is_compiling():
                torch._dynamo.mark_static_address(self.values)


def asymmetric_static_cache(cache: Cache) -> Cache:
    """Make every (not yet allocated) stock static layer of ``cache`` an
    :class:`AsymmetricStaticLayer`, in place; returns ``cache``."""
    for layer in getattr(cache, "layers", []):
        if type(layer) is StaticLayer:
            layer.__class__ = AsymmetricStaticLayer
    return cache


def static_cache(config: SagaConfig | Any, max_cache_len: int) -> StaticCache:
    """A ``StaticCache`` for a SAGA (or any) model whose value heads differ from its key heads."""
    cache = StaticCache(config=config, max_cache_len=max_cache_len)
    asymmetric_static_cache(cache)
    return cache


class SagaForCausalLM(LlamaForCausalLM):
    """``LlamaForCausalLM`` with :class:`SagaAttention` in every layer and ``"saga"`` attention."""

    config_class = SagaConfig

    def _prepare_static_cache(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> Cache:
        """``generate(cache_implementation="static")``: transformers' static cache, with value
        tensors of ``H_v`` heads. Allocation stays lazy (from the first key and value states):
        transformers' eager path sizes every tensor from one head count."""
        if "prefill_chunk_size" in kwargs:
            kwargs["prefill_chunk_size"] = None
        elif len(args) >= 4:
            args = (*args[:3], None, *args[4:])
        prepare: Any = super()._prepare_static_cache  # type: ignore[misc]
        return asymmetric_static_cache(prepare(*args, **kwargs))

    def __init__(self, config: SagaConfig) -> None:
        register()
        config._attn_implementation = ATTENTION_NAME
        super().__init__(config)
        for i, layer in enumerate(self.model.layers):
            layer.self_attn = SagaAttention(config, i)
        self.config._attn_implementation = ATTENTION_NAME


def register() -> None:
    """Register ``"saga"`` with transformers' attention and mask interfaces and the Auto classes.

    Idempotent; called on import of this module.
    """
    AttentionInterface.register(ATTENTION_NAME, saga_attention_forward)
    AttentionMaskInterface.register(ATTENTION_NAME, _saga_mask)
    with contextlib.suppress(ValueError):  # already registered
        AutoConfig.register(SagaConfig.model_type, SagaConfig)
    with contextlib.suppress(ValueError):
        AutoModelForCausalLM.register(SagaConfig, SagaForCausalLM)


def enable_saga_attention(
    model: PreTrainedModel,
    mode: str = "atop",
    top_n: int = 64,
    *,
    sparse_prefill: bool = False,
    backend: str = "torch",
    atop: AtopConfig | None = None,
) -> PreTrainedModel:
    """Switch ``model`` (a SAGA model or any Llama/Qwen-style model) to ``"saga"`` attention.

    Sets the ``saga_*`` attributes of ``model.config`` (which every layer reads at each call)
    and the attention implementation; returns the model for chaining.
    """
    atop = atop or AtopConfig()
    SparseSettings(mode, top_n, sparse_prefill, backend, atop)  # validate first
    register()
    cfg = model.config
    cfg.saga_mode = mode
    cfg.saga_top_n = top_n
    cfg.saga_sparse_prefill = sparse_prefill
    cfg.saga_backend = backend
    cfg.saga_atop_stride = atop.stride
    cfg.saga_atop_oversample = atop.oversample
    cfg.saga_atop_cap_factor = atop.cap_factor
    cfg._attn_implementation = ATTENTION_NAME
    return model


def cache_kwargs(model: Any, cache: Cache) -> dict[str, Cache]:
    """``{name: cache}`` for ``model(...)``: transformers 5.24 renamed ``past_key_values`` to
    ``cache`` (the old name warns); 5.17, the GPU machine's version, knows only the old one."""
    import inspect

    params = inspect.signature(type(model).forward).parameters
    return {"cache": cache} if "cache" in params else {"past_key_values": cache}


def kv_cache_bytes(cache: Any) -> int:
    """Bytes held by a transformers cache: every layer's key and value tensors."""
    total = 0
    for layer in getattr(cache, "layers", []):
        for name in ("keys", "values"):
            tensor = getattr(layer, name, None)
            if isinstance(tensor, torch.Tensor):
                total += tensor.numel() * tensor.element_size()
    return total


register()
