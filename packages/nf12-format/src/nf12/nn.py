"""NF12 in a model: :class:`NF12Linear`, :func:`quantize_model` and :func:`load_compressed`.

``NF12Linear`` holds a linear layer's weight as NF12 planes (12 bits per weight) and computes
exactly what the BF16 ``nn.Linear`` computes: it decodes the weight (bit-identical, with the
packed Triton kernel on CUDA, the torch decoder elsewhere; no host sync either way) and calls
``F.linear``, so a model's outputs are identical to the BF16 model's. With ``fused=True`` on
CUDA it never materialises the weight: the fused GEMV kernel at one row of input, the fused
small-M GEMM up to 16 rows (both accumulate in fp32 in their own order: equal to the BF16 result
up to rounding, not bit for bit), decode + ``F.linear`` above.

Its state (what ``state_dict`` and ``save_pretrained`` write) is five tensors per layer:

- ``weight``: ``uint8[R * Cp]``, the sign/mantissa plane, flat. It is named ``weight`` and made
  1-D on purpose: a loader that does not know NF12 finds a ``weight`` whose shape can never match
  a linear layer's and stops with a size-mismatch error, instead of loading random weights;
- ``weight_ex``: ``uint8[R * Cp / 2]``, the exponent nibbles, flat;
- ``weight_esc``: ``bfloat16[n_esc, G]``, the escaped groups;
- ``weight_nf12``: ``int64[8]``, the header: magic, format version, group, base, sentinel, rows,
  cols, n_esc;
- ``weight_sha256``: ``uint8[32]``, sha256 of the original BF16 bytes, checked when loaded.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nf12.errors import Nf12Error
from nf12.format import DEFAULT_GROUP, FORMAT_VERSION, GROUPS, NF12Tensor, decode, encode

__all__ = [
    "NF12Conv1D",
    "NF12Linear",
    "linear_like",
    "load_compressed",
    "quantize_model",
    "set_fused",
    "tied_linears",
]

#: ``weight_nf12[0]``: "NF12" as a little-endian int.
HEADER_MAGIC = int.from_bytes(b"NF12", "little")
#: The suffixes of one layer's state, after its module name.
STATE = ("weight", "weight_ex", "weight_esc", "weight_nf12", "weight_sha256")


def _sha256(tensor: torch.Tensor) -> torch.Tensor:
    raw = tensor.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
    return torch.frombuffer(bytearray(hashlib.sha256(raw).digest()), dtype=torch.uint8)


class NF12Linear(nn.Module):
    """A drop-in ``nn.Linear`` whose weight is stored in NF12."""

    #: The weight matrix is stored ``(in, out)`` (GPT-2's ``Conv1D``) instead of ``(out, in)``.
    transposed = False

    weight: torch.Tensor
    weight_ex: torch.Tensor
    weight_esc: torch.Tensor
    weight_nf12: torch.Tensor
    weight_sha256: torch.Tensor

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        group: int = DEFAULT_GROUP,
        fused: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        """An empty layer of the right shapes (escape buffer empty), to be loaded into.

        Use :meth:`from_linear` or :meth:`from_nf12` for a layer holding weights.
        """
        super().__init__()
        if group not in GROUPS:
            raise Nf12Error(f"group {group}: must be one of {GROUPS}")
        self.in_features = in_features
        self.out_features = out_features
        self.group = group
        self.fused = fused
        n_rows, n_cols = self.matrix_shape
        codes = n_rows * (-(-n_cols // group) * group)
        self.register_buffer("weight", torch.empty(codes, dtype=torch.uint8, device=device))
        self.register_buffer("weight_ex", torch.empty(codes // 2, dtype=torch.uint8, device=device))
        self.register_buffer(
            "weight_esc", torch.empty(0, group, dtype=torch.bfloat16, device=device)
        )
        self.register_buffer("weight_nf12", torch.zeros(8, dtype=torch.int64, device=device))
        self.register_buffer("weight_sha256", torch.zeros(32, dtype=torch.uint8, device=device))
        self.bias = (
            nn.Parameter(torch.empty(out_features, dtype=dtype, device=device),
                         requires_grad=False)
            if bias else None
        )  # fmt: skip
        self._header: tuple[int, int] | None = None  # (base, sentinel) once checked

    # ------------------------------------------------------------------ building

    @property
    def matrix_shape(self) -> tuple[int, int]:
        """Rows and columns of the stored weight matrix (``(out, in)``, or ``(in, out)`` for
        a transposed layer), which is what the NF12 planes and header describe."""
        if self.transposed:
            return (self.in_features, self.out_features)
        return (self.out_features, self.in_features)

    @classmethod
    def from_nf12(
        cls,
        nt: NF12Tensor,
        bias: torch.Tensor | None = None,
        *,
        sha256: torch.Tensor | None = None,
        fused: bool = False,
    ) -> NF12Linear:
        """A layer holding an encoded weight (``sha256`` of the original bytes if known)."""
        if len(nt.shape) != 2:
            raise Nf12Error(f"{cls.__name__}: weight shape {nt.shape} is not 2-D")
        in_features, out_features = nt.shape if cls.transposed else nt.shape[::-1]
        dtype = bias.dtype if bias is not None else torch.bfloat16
        layer = cls(in_features, out_features, bias is not None, group=nt.group, fused=fused,
                    device="meta", dtype=dtype)  # fmt: skip
        layer.load_tensors(encoded_state(nt, sha256))
        if bias is not None:
            layer.bias = nn.Parameter(bias.detach().clone(), requires_grad=False)
        return layer

    @classmethod
    def from_linear(
        cls, linear: nn.Module, group: int = DEFAULT_GROUP, *, fused: bool = False, name: str = ""
    ) -> NF12Linear:
        """Encode the weight of ``linear`` (an ``nn.Linear``, or a ``Conv1D`` for
        :class:`NF12Conv1D`; must be BF16) as stored, and keep its bias."""
        weight = linear.get_parameter("weight").detach()
        nt = encode(weight, group, name=name or "linear.weight")
        bias = linear.bias if isinstance(linear.bias, torch.Tensor) else None
        return cls.from_nf12(nt, bias, sha256=_sha256(weight), fused=fused)

    def load_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Replace this layer's state by ``tensors`` (suffix -> tensor) and check it."""
        for suffix in STATE:
            setattr(self, suffix, tensors[suffix])
        self.check()

    # ------------------------------------------------------------------ reading

    def check(self, *, verify: bool = False) -> None:
        """Check the header against the planes (one host sync); with ``verify``, also decode
        and compare the sha256 of the original weight. Raises :class:`Nf12Error`."""
        header = [int(v) for v in self.weight_nf12.tolist()]
        magic, version, group, base, sentinel, rows, cols, n_esc = header
        if magic != HEADER_MAGIC:
            raise Nf12Error("weight_nf12: no NF12 header (weights never loaded, or not NF12)")
        if version != FORMAT_VERSION:
            raise Nf12Error(f"weight_nf12: format version {version}, this nf12 reads "
                            f"{FORMAT_VERSION}")  # fmt: skip
        if (group, rows, cols) != (self.group, *self.matrix_shape):
            raise Nf12Error(
                f"weight_nf12: group {group}, shape ({rows}, {cols}) do not match the layer's "
                f"group {self.group}, shape {self.matrix_shape}"
            )
        padded = -(-cols // group) * group
        if self.weight.numel() != rows * padded or self.weight_ex.numel() != rows * padded // 2:
            raise Nf12Error(f"weight: {self.weight.numel()} codes for a {rows}x{cols} matrix")
        if tuple(self.weight_esc.shape) != (n_esc, group):
            raise Nf12Error(f"weight_esc: shape {tuple(self.weight_esc.shape)}, header says "
                            f"({n_esc}, {group})")  # fmt: skip
        self._header = (base, sentinel)
        if verify:
            weight = decode(self.nf12_tensor(), check=True)
            if not torch.equal(_sha256(weight), self.weight_sha256.cpu()):
                raise Nf12Error("weight: sha256 of the decoded weight does not match the one "
                                "recorded at compression (corrupted checkpoint)")  # fmt: skip

    def nf12_tensor(self) -> NF12Tensor:
        """The weight as an :class:`NF12Tensor` (views of the buffers, no copy)."""
        if self._header is None:
            self.check()
        assert self._header is not None
        base, sentinel = self._header
        n_rows, n_cols = self.matrix_shape
        padded = -(-n_cols // self.group) * self.group
        return NF12Tensor(
            sm=self.weight.view(n_rows, padded),
            ex=self.weight_ex.view(n_rows, padded // 2),
            esc=self.weight_esc,
            shape=(n_rows, n_cols),
            base=base,
            sentinel=sentinel,
            group=self.group,
        )

    def decoded_weight(self) -> torch.Tensor:
        """The BF16 weight, bit-identical to the one encoded (no host sync)."""
        nt = self.nf12_tensor()
        if self.weight.is_cuda and self.group >= 8 and _kernels() is not None:
            return _kernels().decode_triton(nt)  # type: ignore[union-attr]
        return decode(nt, check=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // max(self.in_features, 1)
        kernels = _kernels() if self.fused and x.is_cuda and self.group >= 8 else None
        if kernels is not None and 1 <= rows <= 16 and os.environ.get("NF12_NO_FUSED") != "1":
            flat = x.reshape(rows, self.in_features)
            if rows == 1:
                y = kernels.gemv_triton(self.nf12_tensor(), flat[0])[None]
            else:
                y = kernels.gemm_triton(self.nf12_tensor(), flat)
            if self.bias is not None:
                y = y + self.bias.float()
            return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)
        return F.linear(x, self.decoded_weight().to(x.dtype), self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"group={self.group}, escaped={int(self.weight_esc.shape[0])}, fused={self.fused}"
        )


class NF12Conv1D(NF12Linear):
    """A drop-in GPT-2 ``Conv1D`` (transformers' linear layer with its weight stored ``(in,
    out)``) whose weight is stored in NF12.

    The planes encode the matrix as ``Conv1D`` stores it, so a checkpoint's tensor is encoded as
    it is, and the forward is ``Conv1D``'s own ``addmm(bias, x, W)`` on the decoded weight:
    bit-identical to the BF16 layer. The fused kernels compute ``W x`` for an ``(out, in)``
    matrix, so this layer always decodes (``fused`` is ignored).
    """

    transposed = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size_out = (*x.shape[:-1], self.out_features)
        flat = x.reshape(-1, self.in_features)
        weight = self.decoded_weight().to(x.dtype)
        y = flat @ weight if self.bias is None else torch.addmm(self.bias, flat, weight)
        return y.view(size_out)


def encoded_state(nt: NF12Tensor, sha256: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The five state tensors of an :class:`NF12Linear` holding ``nt`` (see the module doc)."""
    if sha256 is None:
        sha256 = _sha256(decode(nt))
    rows, cols = nt.shape
    header = [HEADER_MAGIC, FORMAT_VERSION, nt.group, nt.base, nt.sentinel, rows, cols,
              nt.n_escaped]  # fmt: skip
    return {
        "weight": nt.sm.reshape(-1),
        "weight_ex": nt.ex.reshape(-1),
        "weight_esc": nt.esc,
        "weight_nf12": torch.tensor(header, dtype=torch.int64, device=nt.device),
        "weight_sha256": sha256.to(nt.device),
    }


_KERNELS: Any = None


def _kernels() -> Any:
    """``nf12.kernels`` when Triton is installed (and a GPU can run it), else None."""
    global _KERNELS
    if _KERNELS is None:
        try:
            from nf12 import kernels
        except ImportError:
            _KERNELS = False
        else:
            _KERNELS = kernels
    return _KERNELS or None


# --------------------------------------------------------------------------- whole models


def _conv1d_class() -> type[nn.Module] | None:
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - transformers is a dependency
        return None
    return Conv1D  # type: ignore[no-any-return]


def linear_like(module: nn.Module) -> type[NF12Linear] | None:
    """The NF12 layer class that replaces ``module``, or None when NF12 does not convert it.

    Linear-like means a layer that computes ``x W^T + b`` (``nn.Linear`` and its subclasses,
    which is every projection of Llama, Qwen2, Qwen3 and Mistral) or ``x W + b`` (GPT-2's
    ``Conv1D``, weight stored ``(in, out)``). Already converted layers are not linear-like.
    """
    if isinstance(module, nn.Linear):
        return NF12Linear
    conv1d = _conv1d_class()
    if conv1d is not None and isinstance(module, conv1d):
        return NF12Conv1D
    return None


def tied_linears(model: nn.Module) -> set[str]:
    """Names of the ``nn.Linear`` modules whose weight is shared with another module (a tied
    ``lm_head``): NF12 leaves them alone, so the tie holds and the weight is stored once."""
    owners: dict[int, list[str]] = {}
    for name, module in model.named_modules():
        for pname, param in module.named_parameters(recurse=False):
            owners.setdefault(id(param), []).append(f"{name}.{pname}" if name else pname)
    tied = {
        name
        for name, module in model.named_modules()
        if linear_like(module) is not None and len(owners.get(id(module.weight), ())) > 1
    }
    # transformers knows ties the module graph may not show yet (a model still on "meta").
    for target, source in (getattr(model, "all_tied_weights_keys", None) or {}).items():
        for key in (target, source):
            tied.add(key.removesuffix(".weight"))
    return tied


def linear_names(model: nn.Module, skip: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """``(converted, kept)``: the linear-like modules (:func:`linear_like`) NF12 converts, and
    those it keeps (tied, or named by a ``skip`` pattern: a module name, a prefix at a module
    boundary, a suffix)."""
    patterns = list(skip)
    tied = tied_linears(model)
    converted: list[str] = []
    kept: list[str] = []
    for name, module in model.named_modules():
        if linear_like(module) is None:
            continue
        hit = name in tied or any(
            name == p or name.startswith(p + ".") or name.endswith("." + p) for p in patterns if p
        )
        (kept if hit else converted).append(name)
    return converted, kept


def replace_module(model: nn.Module, name: str, new: nn.Module) -> None:
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
    """Replace every BF16 linear-like layer of ``model`` (in place) by an NF12 layer.

    Linear-like: ``nn.Linear`` (every projection of Llama, Qwen2, Qwen3, Mistral) becomes an
    :class:`NF12Linear`, GPT-2's ``Conv1D`` an :class:`NF12Conv1D`. Lossless: the model's
    outputs are identical to the BF16 model's. Tied linear layers (an ``lm_head`` sharing the
    input embedding) are left alone, so the tie holds. ``skip`` names modules to leave alone
    too. A layer that is not BF16 is an error (cast the model with ``model.to(torch.bfloat16)``
    first): NF12 is a BF16 format. So is a model with nothing to convert: a checkpoint saved as
    ``quant_method: nf12`` over zero NF12 layers would claim a compression that never happened.

    A transformers model comes back ready for ``save_pretrained``: its config carries an
    :class:`nf12.hf.NF12Config`, so ``from_pretrained`` rebuilds the NF12 layers (after
    ``import nf12.hf``).
    """
    if group not in GROUPS:
        raise Nf12Error(f"group {group}: must be one of {GROUPS}")
    converted, kept = linear_names(model, skip)
    if not converted:
        raise Nf12Error(nothing_to_convert(model, kept))
    for name in converted:
        weight = model.get_submodule(name).weight
        if weight.dtype != torch.bfloat16:
            raise Nf12Error(
                f"module {name!r}: weight dtype {weight.dtype} is not torch.bfloat16 "
                "(call model.to(torch.bfloat16) first)"
            )
    for name in converted:
        module = model.get_submodule(name)
        layer_class = linear_like(module)
        assert layer_class is not None
        replace_module(model, name, layer_class.from_linear(module, group, fused=fused, name=name))
    if hasattr(model, "config") and hasattr(model, "save_pretrained"):
        from nf12.hf import attach

        attach(model, group=group, fused=fused, kept=kept)
    return model


def nothing_to_convert(model: nn.Module, kept: list[str]) -> str:
    """The one-line refusal for a model in which NF12 would convert no layer."""
    what = type(model).__name__
    done = sum(isinstance(m, NF12Linear) for m in model.modules())
    if done:
        return f"{what}: nothing to quantize: its {done} linear layers are already NF12"
    if kept:
        return (
            f"{what}: nothing to quantize: every linear layer is tied or skipped "
            f"({', '.join(kept[:3])}{', ...' if len(kept) > 3 else ''})"
        )
    return (
        f"{what}: nothing to quantize: no nn.Linear or Conv1D layer (NF12 converts linear "
        "layers only)"
    )


def set_fused(model: nn.Module, fused: bool = True) -> nn.Module:
    """Switch every :class:`NF12Linear` of ``model`` to the fused kernels (or back)."""
    for module in model.modules():
        if isinstance(module, NF12Linear):
            module.fused = fused
    return model


def load_compressed(
    model: nn.Module, path: str | os.PathLike[str], *, fused: bool = False
) -> nn.Module:
    """Load an ``.nf12.safetensors`` file into ``model`` (in place), keeping linear weights in NF12.

    Every ``<module>.weight`` stored as NF12 whose module is linear-like (``nn.Linear``,
    ``Conv1D``) becomes an :class:`NF12Linear` (:class:`NF12Conv1D`) built straight from the
    file's planes; everything else is decoded and
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
            known = owner is not None and owner in modules
            layer_class = linear_like(modules[owner]) if owner is not None and known else None
            if owner is not None and layer_class is not None:
                linear = modules[owner]
                if tuple(linear.weight.shape) != item.shape:
                    raise Nf12Error(
                        f"{path}: tensor {name!r}: shape {item.shape} does not match the model's "
                        f"{tuple(linear.weight.shape)}"
                    )
                bias = linear.bias if isinstance(linear.bias, torch.Tensor) else None
                replace_module(model, owner, layer_class.from_nf12(item, bias, fused=fused))
                replaced.add(owner)
                continue
            state[name] = decode(item)
        else:
            state[name] = item
    result = model.load_state_dict(state, strict=False)
    own = {k for k in result.missing_keys if k.rpartition(".")[0] in replaced}
    missing = [k for k in result.missing_keys if k not in own]
    if missing:
        raise Nf12Error(
            f"{path}: no tensor for the model's {missing[0]!r} (and {len(missing) - 1} more)"
        )
    if result.unexpected_keys:
        raise Nf12Error(f"{path}: tensor {result.unexpected_keys[0]!r} is not in the model")
    return model
