"""NF12 in a model: :class:`NF12Linear`, :func:`quantize_model` and :func:`load_compressed`.

``NF12Linear`` holds a linear layer's weight as NF12 planes (12 bits per weight) and computes
exactly what the BF16 ``nn.Linear`` computes: by default it decodes the weight (bit-identical)
and calls ``F.linear``, so a model's outputs are identical to the BF16 model's. With
``fused=True`` on CUDA, calls with at most 16 rows use the Triton fused decode+GEMV/GEMM kernels,
which read 12 bits per weight from memory but accumulate in their own order (equal to the BF16
result up to fp32 rounding, not bit for bit).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from nf12.errors import Nf12Error
from nf12.format import DEFAULT_GROUP, NF12Tensor, decode, encode

__all__ = ["NF12Linear", "load_compressed", "quantize_model"]


class NF12Linear(nn.Module):
    """A drop-in ``nn.Linear`` whose weight is stored in NF12."""

    sm: torch.Tensor
    ex: torch.Tensor
    esc: torch.Tensor

    def __init__(
        self, weight: NF12Tensor, bias: torch.Tensor | None = None, *, fused: bool = False
    ):
        super().__init__()
        if len(weight.shape) != 2:
            raise Nf12Error(f"NF12Linear: weight shape {weight.shape} is not 2-D")
        self.out_features, self.in_features = weight.shape
        self.register_buffer("sm", weight.sm)
        self.register_buffer("ex", weight.ex)
        self.register_buffer("esc", weight.esc)
        self.base = weight.base
        self.sentinel = weight.sentinel
        self.group = weight.group
        self.fused = fused
        self.bias = (
            nn.Parameter(bias.detach().clone(), requires_grad=False) if bias is not None else None
        )

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, group: int = DEFAULT_GROUP, *, fused: bool = False, name: str = ""
    ) -> NF12Linear:
        """Encode ``linear.weight`` (must be BF16) and keep its bias."""
        nt = encode(linear.weight.detach(), group, name=name or "linear.weight")
        return cls(nt, linear.bias, fused=fused)

    @property
    def weight_nf12(self) -> NF12Tensor:
        return NF12Tensor(
            sm=self.sm,
            ex=self.ex,
            esc=self.esc,
            shape=(self.out_features, self.in_features),
            base=self.base,
            sentinel=self.sentinel,
            group=self.group,
        )

    def decoded_weight(self) -> torch.Tensor:
        """The BF16 weight, bit-identical to the one encoded."""
        return decode(self.weight_nf12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // max(self.in_features, 1)
        if self.fused and x.is_cuda and 1 <= rows <= 16 and os.environ.get("NF12_NO_FUSED") != "1":
            from nf12.kernels import gemm_triton

            y = gemm_triton(self.weight_nf12, x.reshape(rows, self.in_features))
            if self.bias is not None:
                y = y + self.bias.float()
            return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)
        return F.linear(x, self.decoded_weight().to(x.dtype), self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"group={self.group}, base={self.base}, escaped={int(self.esc.shape[0])}"
        )


def _linears(model: nn.Module, skip: Iterable[str]) -> list[tuple[str, nn.Linear]]:
    skipped = tuple(skip)
    return [
        (name, mod)
        for name, mod in model.named_modules()
        if isinstance(mod, nn.Linear) and not any(s and s in name for s in skipped)
    ]


def _replace(model: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


def quantize_model(
    model: nn.Module,
    group: int = DEFAULT_GROUP,
    *,
    fused: bool = False,
    skip: Iterable[str] = (),
) -> nn.Module:
    """Replace every BF16 ``nn.Linear`` of ``model`` (in place) by an :class:`NF12Linear`.

    Lossless: the model's outputs are identical to the BF16 model's. ``skip`` names substrings of
    module names to leave alone. A linear layer that is not BF16 is an error (cast the model with
    ``model.to(torch.bfloat16)`` first): NF12 is a BF16 format.
    """
    for name, linear in _linears(model, skip):
        if linear.weight.dtype != torch.bfloat16:
            raise Nf12Error(
                f"module {name!r}: weight dtype {linear.weight.dtype} is not torch.bfloat16 "
                "(call model.to(torch.bfloat16) first)"
            )
        _replace(model, name, NF12Linear.from_linear(linear, group, fused=fused, name=name))
    return model


def load_compressed(
    model: nn.Module, path: str | os.PathLike[str], *, fused: bool = False
) -> nn.Module:
    """Load an NF12 checkpoint into ``model`` (in place), keeping linear weights in NF12.

    Every ``<module>.weight`` stored as NF12 whose module is an ``nn.Linear`` becomes an
    :class:`NF12Linear` built straight from the file's planes; everything else is decoded and
    loaded with ``load_state_dict``. Each tensor's sha256 is verified while reading. Missing or
    unexpected tensors are an error naming the first of them.
    """
    from nf12.files import iter_nf12

    modules = dict(model.named_modules())
    state: dict[str, torch.Tensor] = {}
    replaced: set[str] = set()
    for name, item in iter_nf12(path):
        owner = name[: -len(".weight")] if name.endswith(".weight") else None
        if isinstance(item, NF12Tensor):
            if owner is not None and isinstance(modules.get(owner), nn.Linear):
                linear = modules[owner]
                assert isinstance(linear, nn.Linear)
                if tuple(linear.weight.shape) != item.shape:
                    raise Nf12Error(
                        f"{path}: tensor {name!r}: shape {item.shape} does not match the model's "
                        f"{tuple(linear.weight.shape)}"
                    )
                _replace(model, owner, NF12Linear(item, linear.bias, fused=fused))
                replaced.add(name)
                continue
            state[name] = decode(item)
        else:
            state[name] = item
    result = model.load_state_dict(state, strict=False)
    own = {k for k in result.missing_keys if k.rsplit(".", 1)[-1] in ("sm", "ex", "esc")}
    missing = [k for k in result.missing_keys if k not in own]
    if missing:
        raise Nf12Error(
            f"{path}: no tensor for the model's {missing[0]!r} (and {len(missing) - 1} more)"
        )
    if result.unexpected_keys:
        raise Nf12Error(f"{path}: tensor {result.unexpected_keys[0]!r} is not in the model")
    return model
