"""Where a causal LM keeps its decoder layers, and forward hooks that read their outputs.

Llama, Qwen2/3, Mistral, Gemma and Phi-3 all expose ``model.model.layers[i]`` with an MLP whose
output projection is ``mlp.down_proj`` (the module RMU trains in the WMDP code); GPT-2/NeoX style
models are found too (``transformer.h``, ``gpt_neox.layers``) but have no ``down_proj``, which
``mlp_down`` training then reports as a one-line error. A peft wrapper is looked through.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from ra2_unlearn.errors import UnlearnError

__all__ = [
    "ablate_direction",
    "capture_layers",
    "decoder_layers",
    "down_projections",
    "replace_states",
    "select_trainable",
]

_LAYER_PATHS = ("model.layers", "model.model.layers", "transformer.h", "gpt_neox.layers", "layers")


def _unwrap(model: nn.Module) -> nn.Module:
    """Look through DDP (``.module``) and peft (``.base_model.model``) wrappers."""
    while True:
        if hasattr(model, "module") and isinstance(model.module, nn.Module):
            model = model.module
        elif type(model).__name__.startswith("Peft") and hasattr(model, "base_model"):
            inner: Any = model.base_model
            model = getattr(inner, "model", inner)
        else:
            return model


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The model's list of decoder layers (``model.model.layers`` for Llama-style models)."""
    base = _unwrap(model)
    for path in _LAYER_PATHS:
        obj: Any = base
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList) and len(obj) > 0:
            return obj
    raise UnlearnError(
        f"model {type(base).__name__}: no decoder layers found (looked for "
        f"{', '.join(_LAYER_PATHS)}); a Llama/Qwen/Mistral-style causal LM is expected"
    )


def check_layer(model: nn.Module, layer: int, field: str = "layer") -> int:
    """``layer`` if it indexes a decoder layer of ``model``, else a one-line error."""
    n = len(decoder_layers(model))
    if not 0 <= layer < n:
        raise UnlearnError(f"{field} {layer}: out of range, the model has {n} layers (0..{n - 1})")
    return layer


def down_projections(model: nn.Module, layers: Sequence[int]) -> list[nn.Module]:
    """The MLP output projections (``mlp.down_proj``) of ``layers``: what RMU trains."""
    blocks = decoder_layers(model)
    out = []
    for i in layers:
        check_layer(model, i, "trained_layers")
        mlp = getattr(blocks[i], "mlp", None)
        proj = getattr(mlp, "down_proj", None)
        if not isinstance(proj, nn.Module):
            raise UnlearnError(
                f"model {type(_unwrap(model)).__name__}: layer {i} has no mlp.down_proj "
                "(use trainable='all' or a Llama/Qwen/Mistral-style model)"
            )
        out.append(proj)
    return out


def select_trainable(model: nn.Module, which: str, layers: Sequence[int]) -> list[nn.Parameter]:
    """Freeze everything except ``which`` (``all`` or ``mlp_down`` of ``layers``); return the
    trainable parameters. With peft the adapter weights decide (anything already marked
    trainable under the chosen modules stays trainable)."""
    if which == "all":
        params = [p for p in model.parameters() if p.requires_grad] or list(model.parameters())
        for p in params:
            p.requires_grad_(True)
        return params
    chosen = {id(p) for m in down_projections(model, layers) for p in m.parameters()}
    peft = any("lora_" in n for n, _ in model.named_parameters())
    params = []
    for name, p in model.named_parameters():
        keep = id(p) in chosen and (not peft or "lora_" in name)
        p.requires_grad_(keep)
        if keep:
            params.append(p)
    if not params:
        raise UnlearnError(f"no trainable parameters in the down projections of layers {layers}")
    return params


def _hidden(output: Any) -> torch.Tensor:
    """A decoder layer's output hidden state (a tensor, or the first element of a tuple)."""
    return output[0] if isinstance(output, (tuple, list)) else output


@contextmanager
def capture_layers(model: nn.Module, layers: Sequence[int]) -> Iterator[dict[int, torch.Tensor]]:
    """Forward hooks storing each listed layer's output hidden state ``[B, T, d]`` (with its
    graph, so losses on it backpropagate) in the yielded dict, keyed by layer index."""
    blocks = decoder_layers(model)
    store: dict[int, torch.Tensor] = {}
    handles = []
    for i in layers:
        check_layer(model, i)

        def hook(_m: nn.Module, _inp: Any, out: Any, i: int = i) -> None:
            store[i] = _hidden(out)

        handles.append(blocks[i].register_forward_hook(hook))
    try:
        yield store
    finally:
        for h in handles:
            h.remove()


@contextmanager
def ablate_direction(model: nn.Module, layer: int, direction: torch.Tensor) -> Iterator[None]:
    """Project ``direction`` out of layer ``layer``'s output at every position (h - (h.u)u)."""
    blocks = decoder_layers(model)
    check_layer(model, layer)
    u = direction / direction.norm().clamp_min(1e-12)

    def hook(_m: nn.Module, _inp: Any, out: Any) -> Any:
        h = _hidden(out)
        h2 = h - (h @ u.to(h))[..., None] * u.to(h)
        if isinstance(out, tuple):
            return (h2, *out[1:])
        return h2

    handle = blocks[layer].register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def replace_states(
    model: nn.Module, layer: int, mask: torch.Tensor, values: torch.Tensor
) -> Iterator[None]:
    """Overwrite layer ``layer``'s output at the ``mask`` positions (``[B, T]`` bool) with
    ``values`` (``[mask.sum(), d]``) during one forward pass of the same shape (the patch test:
    what the model does when its states *are* the targets)."""
    blocks = decoder_layers(model)
    check_layer(model, layer)

    def hook(_m: nn.Module, _inp: Any, out: Any) -> Any:
        h = _hidden(out).clone()
        h[mask] = values.to(h)
        if isinstance(out, tuple):
            return (h, *out[1:])
        return h

    handle = blocks[layer].register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()
