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
  ``H_v = num_key_value_heads`` value projections; :class:`SagaQwen2ForCausalLM` (q/k/v
  biases), :class:`SagaQwen3ForCausalLM` (``q_norm``/``k_norm``) and
  :class:`SagaMistralForCausalLM` (sliding window) are the same change to those families
  (``saga_qwen2``, ``saga_qwen3``, ``saga_mistral``; :data:`FAMILIES`). Their caches store keys
  and values as separate tensors, so they hold ``(H_k + H_v) · d`` numbers per token and layer:
  the ordinary ``DynamicCache``, and a stock ``StaticCache(config=...)`` (or what
  ``generate(cache_implementation="static")`` builds), whose not yet allocated layers a SAGA
  model turns into :class:`AsymmetricStaticLayer` / :class:`AsymmetricStaticSlidingWindowLayer`
  before it writes to them (a forward pre-hook): transformers' own static layers size the value
  tensor from the keys' head count. Registered with the Auto classes, so ``from_pretrained``
  loads a saved SAGA model in any process that imported ``saga_attention.modeling``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import (
    AttentionInterface,
    AutoConfig,
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedConfig,
    PreTrainedModel,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)
from transformers.cache_utils import Cache, StaticCache, StaticLayer, StaticSlidingWindowLayer
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

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
    "FAMILIES",
    "MODES",
    "AsymmetricStaticLayer",
    "AsymmetricStaticSlidingWindowLayer",
    "SagaConfig",
    "SagaForCausalLM",
    "SagaMistralConfig",
    "SagaMistralForCausalLM",
    "SagaQwen2Config",
    "SagaQwen2ForCausalLM",
    "SagaQwen3Config",
    "SagaQwen3ForCausalLM",
    "SparseSettings",
    "asymmetric_static_cache",
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
        if settings.backend == "triton":  # flash-decoding, the kernels' own dense baseline
            from saga_attention.kernels import dense_decode_triton

            dense = dense_decode_triton(query[:, :, 0], key, value, keep, scaling)
        else:
            dense = grouped_dense_decode(query[:, :, 0], key, value, scaling, keep)
        out = dense.unsqueeze(2)
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


def _saga_post_init(config: Any) -> None:
    """What every SAGA config checks after its base class's ``__post_init__``."""
    if config.num_key_heads is None:
        config.num_key_heads = config.num_key_value_heads
    config.layout()  # validates the head counts
    SparseSettings.from_config(config)


def _layout(config: Any) -> HeadLayout:
    """``HeadLayout(H_q, H_k, H_v, d)`` of a SAGA config (``d`` from ``head_dim``, which Qwen3
    sets apart from ``hidden_size / H_q``)."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return HeadLayout(
        int(config.num_attention_heads),
        int(config.num_key_heads or config.num_key_value_heads),
        int(config.num_key_value_heads),
        int(head_dim),
    )


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
        _saga_post_init(self)

    def layout(self) -> HeadLayout:
        """``HeadLayout(H_q, H_k, H_v, d)`` of this config."""
        return _layout(self)


#: SagaConfig's own fields (name -> (annotation, default)), shared by every family's config.
_SAGA_FIELDS: dict[str, tuple[Any, Any]] = {
    name: (f.type, f.default)
    for name, f in SagaConfig.__dataclass_fields__.items()
    if name not in LlamaConfig.__dataclass_fields__
}


def _saga_config_class(base: type[PreTrainedConfig], model_type: str, name: str) -> Any:
    """``base`` (a Qwen2/Qwen3/Mistral config) plus SagaConfig's fields, as a ``model_type``
    of its own: everything of the base architecture (Qwen3's ``head_dim``, Mistral's
    ``sliding_window``, Qwen2's ``layer_types``) stays a field of the SAGA config."""

    def __post_init__(self: Any, **kwargs: Any) -> None:
        base.__post_init__(self, **kwargs)  # type: ignore[attr-defined]
        _saga_post_init(self)

    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": name,
        "__doc__": f"``{base.__name__}`` with ``num_key_heads`` (``H_k``) apart from "
        "``num_key_value_heads`` (``H_v``), and the ``saga_*`` attention settings.",
        "__annotations__": {k: t for k, (t, _) in _SAGA_FIELDS.items()},
        "model_type": model_type,
        "__post_init__": __post_init__,
        "layout": _layout,
        **{k: default for k, (_, default) in _SAGA_FIELDS.items()},
    }
    return strict(type(name, (base,), namespace))


SagaQwen2Config = _saga_config_class(Qwen2Config, "saga_qwen2", "SagaQwen2Config")
SagaQwen3Config = _saga_config_class(Qwen3Config, "saga_qwen3", "SagaQwen3Config")
SagaMistralConfig = _saga_config_class(MistralConfig, "saga_mistral", "SagaMistralConfig")


def _resize_values(layer: StaticLayer, value_states: torch.Tensor) -> None:
    """Reallocate a just-initialised static layer's value tensor with ``H_v`` heads."""
    value_heads = value_states.shape[1]
    if layer.values is None or layer.values.shape[1] != value_heads:
        shape = (layer.batch_size, value_heads, layer.max_cache_len, layer.v_head_dim)
        layer.values = torch.zeros(shape, dtype=value_states.dtype, device=layer.device)
        if not torch.compiler.is_compiling():
            torch._dynamo.mark_static_address(layer.values)


class AsymmetricStaticLayer(StaticLayer):
    """transformers' ``StaticLayer`` with the value tensor sized from the values (``H_v``).

    The stock layer allocates ``values`` with the key states' head count, so the first
    ``index_copy_`` of ``H_v != H_k`` value heads fails. Everything else (in-place updates,
    ``mark_static_address`` for CUDA graphs, the position counter) is the stock code.
    """

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        _resize_values(self, value_states)


class AsymmetricStaticSlidingWindowLayer(StaticSlidingWindowLayer):
    """``StaticSlidingWindowLayer`` (Mistral's sliding window in a static cache) with ``H_v``
    value heads, for the same reason as :class:`AsymmetricStaticLayer`."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        _resize_values(self, value_states)


_ASYMMETRIC: dict[type, type] = {
    StaticLayer: AsymmetricStaticLayer,
    StaticSlidingWindowLayer: AsymmetricStaticSlidingWindowLayer,
}


def asymmetric_static_cache(cache: Cache) -> Cache:
    """Make every not yet allocated stock static layer of ``cache`` (full or sliding-window) its
    asymmetric subclass, in place; returns ``cache``. SAGA models call it on every cache they are
    given, so a stock ``StaticCache(config=...)`` works with them."""
    for layer in getattr(cache, "layers", []):
        swap = _ASYMMETRIC.get(type(layer))
        if swap is not None and not getattr(layer, "is_initialized", False):
            layer.__class__ = swap
    return cache


def static_cache(config: SagaConfig | Any, max_cache_len: int) -> StaticCache:
    """A ``StaticCache`` for a SAGA (or any) model whose value heads differ from its key heads."""
    cache = StaticCache(config=config, max_cache_len=max_cache_len)
    asymmetric_static_cache(cache)
    return cache


def _asymmetric_caches(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Forward pre-hook of every SAGA model: the caches it is handed get ``H_v`` value heads."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, Cache):
            asymmetric_static_cache(value)


if TYPE_CHECKING:
    _CausalLMBase = PreTrainedModel
else:
    _CausalLMBase = object


class _SagaCausalLM(_CausalLMBase):
    """What turns a family's ``*ForCausalLM`` into SAGA: ``H_k`` key projections, ``"saga"``
    attention, value-sized static caches.

    Only ``k_proj`` changes size: the Llama, Qwen2, Qwen3 and Mistral attentions infer the head
    count from the projection (``view(..., -1, head_dim)``), normalise per head where they do
    (Qwen3's ``k_norm`` has ``head_dim`` weights, shared by the heads), apply RoPE and store keys
    and values separately in the cache, so the rest carries over; the head mapping lives in the
    registered attention function. Biases (Qwen2's) and the sliding window (Mistral's, applied by
    the mask) are the base class's.
    """

    def __init__(self, config: Any) -> None:
        register()
        config._attn_implementation = ATTENTION_NAME
        super().__init__(config)
        layout = config.layout()
        decoder: Any = self.model
        for layer in decoder.layers:
            attn = layer.self_attn
            old = attn.k_proj
            k_proj = nn.Linear(
                old.in_features, layout.num_key_heads * layout.head_dim, bias=old.bias is not None
            )
            nn.init.normal_(k_proj.weight, std=config.initializer_range)
            if k_proj.bias is not None:
                nn.init.zeros_(k_proj.bias)
            attn.k_proj = k_proj
        self.config._attn_implementation = ATTENTION_NAME
        self.register_forward_pre_hook(_asymmetric_caches, with_kwargs=True)

    def _prepare_static_cache(self, *args: Any, **kwargs: Any) -> Cache:
        """``generate(cache_implementation="static")``: transformers' static cache, with value
        tensors of ``H_v`` heads. Allocation stays lazy (from the first key and value states):
        transformers' eager path sizes every tensor from one head count."""
        if "prefill_chunk_size" in kwargs:
            kwargs["prefill_chunk_size"] = None
        elif len(args) >= 4:
            args = (*args[:3], None, *args[4:])
        prepare: Any = super()._prepare_static_cache  # type: ignore[misc]
        return asymmetric_static_cache(prepare(*args, **kwargs))


class SagaForCausalLM(_SagaCausalLM, LlamaForCausalLM):
    """``LlamaForCausalLM`` with ``H_k`` key heads and ``"saga"`` attention."""

    config_class = SagaConfig


class SagaQwen2ForCausalLM(_SagaCausalLM, Qwen2ForCausalLM):
    """``Qwen2ForCausalLM`` (q/k/v biases) with ``H_k`` key heads and ``"saga"`` attention."""

    config_class = SagaQwen2Config


class SagaQwen3ForCausalLM(_SagaCausalLM, Qwen3ForCausalLM):
    """``Qwen3ForCausalLM`` (``q_norm``/``k_norm``) with ``H_k`` key heads and ``"saga"``
    attention."""

    config_class = SagaQwen3Config


class SagaMistralForCausalLM(_SagaCausalLM, MistralForCausalLM):
    """``MistralForCausalLM`` (sliding window) with ``H_k`` key heads and ``"saga"`` attention."""

    config_class = SagaMistralConfig


#: Source ``model_type`` -> its SAGA model class (what ``saga convert`` accepts).
FAMILIES: dict[str, type[_SagaCausalLM]] = {
    "llama": SagaForCausalLM,
    "qwen2": SagaQwen2ForCausalLM,
    "qwen3": SagaQwen3ForCausalLM,
    "mistral": SagaMistralForCausalLM,
}


def register() -> None:
    """Register ``"saga"`` with transformers' attention and mask interfaces and the Auto classes.

    Idempotent; called on import of this module.
    """
    AttentionInterface.register(ATTENTION_NAME, saga_attention_forward)
    AttentionMaskInterface.register(ATTENTION_NAME, _saga_mask)
    for model_class in FAMILIES.values():
        config_class: Any = model_class.config_class
        with contextlib.suppress(ValueError):  # already registered
            AutoConfig.register(config_class.model_type, config_class)
        with contextlib.suppress(ValueError):
            AutoModelForCausalLM.register(config_class, model_class)


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
