"""Where a causal LM keeps its decoder layers and MLP output projections, which parameters
train, and forward hooks that read the layers' outputs.

Llama, Qwen2/3, Mistral, Gemma and Phi-3 expose ``model.model.layers[i]`` with an MLP whose
output projection is ``mlp.down_proj`` (the module RMU trains in the WMDP code); GPT-2 keeps
its layers in ``transformer.h`` and the projection in ``mlp.c_proj`` (a ``Conv1D``, weights
stored transposed); GPT-NeoX in ``gpt_neox.layers`` and ``mlp.dense_4h_to_h``; Phi/OPT-style
MLPs in ``mlp.fc2``; GPT-J in ``mlp.fc_out``. The projection is found by architecture from
that table (:data:`MLP_OUTPUT_NAMES`), so one code path serves every family; a model whose
layers have none of them is refused in one line naming what it lacks and what to train
instead. A peft wrapper is looked through.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from ra2_unlearn.errors import UnlearnError

__all__ = [
    "MLP_OUTPUT_NAMES",
    "ablate_direction",
    "capture_layers",
    "decoder_layers",
    "default_layer",
    "down_projections",
    "mlp_output_projection",
    "replace_states",
    "resolve_layer",
    "select_trainable",
    "trainable_module_names",
]

_LAYER_PATHS = ("model.layers", "model.model.layers", "transformer.h", "gpt_neox.layers", "layers")
#: The MLP output projection of one decoder layer, by architecture: Llama/Qwen/Mistral/Gemma/
#: Phi-3 ``down_proj``, GPT-2 ``c_proj`` (Conv1D), GPT-NeoX ``dense_4h_to_h``, Phi/OPT ``fc2``,
#: GPT-J ``fc_out``. The first that exists under the layer's ``mlp`` wins.
MLP_OUTPUT_NAMES: tuple[str, ...] = ("down_proj", "c_proj", "dense_4h_to_h", "fc2", "fc_out")


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


def default_layer(model: nn.Module) -> int:
    """The hooked layer l when none is given: the middle decoder layer, ``n // 2``.

    The toy demo's 4-layer model has always used l = 2 (= 4 // 2); the zoo's 2-layer
    checkpoints get 1, a 30-layer SmolLM2 15. The WMDP RMU code used 7 of Zephyr's 32 (pass
    ``--layer 7`` to follow it); a depth-relative default is what lets one command line run on
    every model without an "out of range".
    """
    return len(decoder_layers(model)) // 2


def resolve_layer(model: nn.Module, layer: int | None, field: str = "layer") -> int:
    """``layer`` checked against ``model``'s depth, or :func:`default_layer` when None."""
    if layer is None:
        return default_layer(model)
    return check_layer(model, layer, field)


def check_layer(model: nn.Module, layer: int, field: str = "layer") -> int:
    """``layer`` if it indexes a decoder layer of ``model``, else a one-line error."""
    n = len(decoder_layers(model))
    if not 0 <= layer < n:
        raise UnlearnError(f"{field} {layer}: out of range, the model has {n} layers (0..{n - 1})")
    return layer


def mlp_output_projection(model: nn.Module, index: int) -> nn.Module:
    """Decoder layer ``index``'s MLP output projection (:data:`MLP_OUTPUT_NAMES`), or a
    one-line error naming the model, the layer and what was looked for."""
    blocks = decoder_layers(model)
    check_layer(model, index, "trained_layers")
    mlp = getattr(blocks[index], "mlp", None)
    for name in MLP_OUTPUT_NAMES:
        proj = getattr(mlp, name, None)
        if isinstance(proj, nn.Module):
            return proj
    looked = ", ".join(f"mlp.{n}" for n in MLP_OUTPUT_NAMES)
    raise UnlearnError(
        f"model {type(_unwrap(model)).__name__}: layer {index} has no MLP output projection "
        f"(looked for {looked}); use --trainable all or --trainable layers:A-B "
        "(trainable='all' / 'layers' in the API)"
    )


def down_projections(model: nn.Module, layers: Sequence[int]) -> list[nn.Module]:
    """The MLP output projections of ``layers`` (``mlp.down_proj``, GPT-2's ``mlp.c_proj``,
    ...): what RMU trains in the WMDP code."""
    return [mlp_output_projection(model, i) for i in layers]


def _chosen_modules(model: nn.Module, which: str, layers: Sequence[int]) -> list[nn.Module]:
    if which in ("mlp", "mlp_down"):
        return down_projections(model, layers)
    if which == "layers":
        blocks = decoder_layers(model)
        for i in layers:
            check_layer(model, i, "trained_layers")
        return [blocks[i] for i in layers]
    raise UnlearnError(f"trainable {which!r}: not one of all, mlp, layers")


def select_trainable(model: nn.Module, which: str, layers: Sequence[int]) -> list[nn.Parameter]:
    """Freeze everything except ``which`` and return the trainable parameters.

    ``all``: the whole model; ``mlp`` (alias ``mlp_down``): the MLP output projections of
    ``layers``; ``layers``: every parameter of decoder ``layers``. With peft the adapter
    weights decide (anything already marked trainable under the chosen modules stays
    trainable)."""
    if which == "all":
        params = [p for p in model.parameters() if p.requires_grad] or list(model.parameters())
        for p in params:
            p.requires_grad_(True)
        return params
    chosen = {id(p) for m in _chosen_modules(model, which, layers) for p in m.parameters()}
    peft = any("lora_" in n for n, _ in model.named_parameters())
    params = []
    for name, p in model.named_parameters():
        keep = id(p) in chosen and (not peft or "lora_" in name)
        p.requires_grad_(keep)
        if keep:
            params.append(p)
    if not params:
        raise UnlearnError(f"no trainable parameters in {which} of layers {list(layers)}")
    return params


def trainable_module_names(model: nn.Module, which: str, layers: Sequence[int]) -> list[str]:
    """Qualified names of the Linear/Conv1D modules ``which`` trains (LoRA's targets)."""
    base = _unwrap(model)
    if which == "all":
        roots: list[nn.Module] = list(decoder_layers(base))
    else:
        roots = _chosen_modules(base, which, layers)
    wanted = {id(m) for r in roots for m in r.modules()}
    return [
        name
        for name, m in base.named_modules()
        if id(m) in wanted and type(m).__name__ in ("Linear", "Conv1D")
    ]


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
