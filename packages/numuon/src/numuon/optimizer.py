"""NuMuon: Muon whose orthogonal update is restricted to the top-k singular subspace.

Muon (Jordan et al., 2024) replaces a matrix parameter's momentum ``M`` by its polar factor
``U Vᵀ`` (all singular values set to one): the steepest-descent direction under the spectral
norm. NuMuon constrains the update direction with a nuclear-norm budget as well: it keeps only
the top ``k`` singular directions, ``U_k V_kᵀ``, with ``k`` from a rank schedule. ``k = 1`` is
the nuclear-norm linear minimisation oracle (a Frank-Wolfe step), ``k = min(d_out, d_in)`` is
Muon. Rank-limited updates add up to weights whose spectrum decays faster (lower stable rank),
which is why NuMuon-trained models lose less when they are compressed by truncated SVD.

The top-``k`` subspace comes from :func:`numuon.krylov.block_krylov_svd`, warm-started from the
previous step's subspace, so each step costs a few thin matrix products and QRs, not an SVD.

Parameters that are not hidden matrices (embeddings, the output head, norms, biases) go to an
AdamW group (``use_numuon=False``), as in Keller Jordan's ``MuonWithAuxAdam``; build the two
groups with :func:`param_groups`.

Distributed training: under ``DistributedDataParallel`` (``accelerate launch``, ``torchrun``,
the HF Trainer) gradients are all-reduced before ``step()``, so every rank holds the same full
matrices and gradients. The SVD work is then sharded as in Keller Jordan's ``Muon``: matrices of
one shape are dealt out round-robin, each rank computes the update of the matrices it owns
(their momentum and Krylov state live only there) and the updated matrices are all-gathered, so
a step costs ``1 / world_size`` of the SVD work per rank and replicas stay identical. The random
Krylov start blocks come from generators seeded by ``seed``, the step and the parameter's index,
never from the global RNG, so the result does not depend on the number of ranks. Sharded
parameters (FSDP2 ``DTensor``) are refused with one clear error: the top-``k`` subspace needs the
whole matrix.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch import nn

from numuon.errors import NumuonError
from numuon.krylov import block_krylov_svd, block_krylov_svd_batched
from numuon.schedule import Constant, RankSchedule, check_ratio, rank_for

__all__ = ["NuMuon", "muon_scale", "param_groups"]


def muon_scale(shape: torch.Size | tuple[int, ...], transposed: bool = False) -> float:
    """Muon's shape-dependent step scale ``sqrt(max(1, d_out / d_in))`` (Keller Jordan's
    ``muon.py`` and ``torch.optim.Muon``'s ``adjust_lr_fn="original"``): it keeps the update's
    per-coordinate RMS comparable across rectangular matrices. ``transposed``: the parameter is
    stored ``d_in x d_out`` (transformers' ``Conv1D`` in GPT-2), so the ratio is read the other
    way round."""
    d_out, d_in = (shape[1], shape[0]) if transposed else (shape[0], shape[1])
    return math.sqrt(max(1.0, d_out / d_in))


def _conv1d_type() -> type[nn.Module] | None:
    """transformers' ``Conv1D`` (GPT-2's linear layer, weight stored ``d_in x d_out``)."""
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - transformers is a base dependency
        return None
    return Conv1D  # type: ignore[no-any-return]


def param_groups(
    model: nn.Module, *, exclude_output_head: bool = True, warn: bool = True
) -> list[dict[str, Any]]:
    """Split ``model``'s trainable parameters into NuMuon groups and an AdamW group.

    NuMuon gets the weights of ``nn.Linear`` layers and of transformers' ``Conv1D`` (GPT-2's
    attention and MLP projections, stored transposed: a group of their own with
    ``transposed=True``, so Muon's shape scale reads ``d_out / d_in`` right); AdamW gets
    everything else: embeddings, the output head (``model.get_output_embeddings()`` for
    transformers models, which may be tied to the input embedding), norms and biases. The
    embedding and head are excluded because their rows are per-token vectors, not a linear map
    whose spectrum matters (Muon's authors do the same). Any other parameter with two or more
    dimensions (a bare ``nn.Parameter`` matrix, a convolution kernel) also goes to AdamW, with a
    warning naming it, since it may be a matrix the caller meant NuMuon to train. Parameter
    names are kept, so errors name the parameter. Groups come in the order Linear, Conv1D,
    AdamW; an empty one is left out (GPT-2 has no Linear matrix but its head).
    """
    head: set[int] = set()
    getter = getattr(model, "get_output_embeddings", None)
    if exclude_output_head and callable(getter):
        out = getter()
        if isinstance(out, nn.Module):
            head = {id(p) for p in out.parameters()}
    conv1d = _conv1d_type()
    linear_ids: set[int] = set()
    conv_ids: set[int] = set()
    known: set[int] = set(head)
    for m in model.modules():
        weight = getattr(m, "weight", None)
        if not isinstance(weight, torch.Tensor) or id(weight) in head:
            continue
        if isinstance(m, nn.Linear) and weight.ndim == 2:
            linear_ids.add(id(weight))
        elif conv1d is not None and isinstance(m, conv1d) and weight.ndim == 2:
            conv_ids.add(id(weight))
        elif isinstance(m, (nn.Embedding, nn.EmbeddingBag)):
            known.add(id(weight))
    linear: list[tuple[str, nn.Parameter]] = []
    conv: list[tuple[str, nn.Parameter]] = []
    adamw: list[tuple[str, nn.Parameter]] = []
    unclaimed: list[str] = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if id(p) in linear_ids:
            linear.append((name, p))
        elif id(p) in conv_ids:
            conv.append((name, p))
        else:
            adamw.append((name, p))
            if p.ndim >= 2 and id(p) not in known:
                unclaimed.append(f"{name} {tuple(p.shape)}")
    if warn and unclaimed:
        more = f" and {len(unclaimed) - 5} more" if len(unclaimed) > 5 else ""
        shown = ", ".join(unclaimed[:5]) + more
        warnings.warn(
            f"numuon.param_groups: {len(unclaimed)} parameter(s) with 2+ dimensions are not "
            f"nn.Linear/Conv1D weights and go to AdamW: {shown}; build your own groups to train "
            "them with NuMuon (2-D only)",
            stacklevel=2,
        )
    # Empty groups are left out: torch.optim.Optimizer refuses to mix named groups with one
    # whose (empty) list carries no names ("all optimizer param groups should be with/without
    # names"), which is what GPT-2 (Conv1D only, no nn.Linear matrix) used to hit.
    groups: list[dict[str, Any]] = []
    if linear:
        groups.append({"params": linear, "use_numuon": True})
    if conv:
        groups.append({"params": conv, "use_numuon": True, "transposed": True})
    if adamw:
        groups.append({"params": adamw, "use_numuon": False})
    return groups


class NuMuon(torch.optim.Optimizer):
    """NuMuon for ``use_numuon`` groups, AdamW for the others.

    For a matrix ``W`` (``d_out x d_in``) with gradient ``G_t`` at step ``t``:

        M_t = β M_{t-1} + (1 - β) G_t                       (momentum, ``momentum`` = β)
        N_t = (1 - β) G_t + β M_t   if nesterov else M_t     (Nesterov look-ahead)
        k_t = ⌈r(t) · min(d_out, d_in)⌉                      (``rank_schedule`` = r)
        U_k, V_k = top-k singular vectors of N_t            (warm-started block Krylov)
        W ← (1 - γ λ) W - γ · s · U_k V_kᵀ                  (``lr`` = γ, ``weight_decay`` = λ)

    with ``s = sqrt(max(1, d_out / d_in))`` (Muon's shape scale) and, when ``rms_match`` is
    set, an extra ``sqrt(min(d_out, d_in) / k)`` so the update's Frobenius norm equals Muon's
    at every ``k`` (off by default: the paper keeps Muon's scaling, so the spectral norm of
    the step is the same as Muon's and only its rank shrinks). The momentum convention
    (``lerp``) is ``torch.optim.Muon``'s, so ``rank_schedule=1.0`` with an exact polar factor
    is Muon with the SVD in place of Newton-Schulz.

    Args:
        params: parameters or groups; a group's ``use_numuon`` (default True) picks the rule.
            :func:`param_groups` builds the usual split from a model.
        lr: NuMuon step size γ (Muon's default 0.02).
        momentum: β. nesterov: use the look-ahead ``N_t``.
        weight_decay: decoupled decay λ for NuMuon groups.
        rank_schedule: ``r(t)`` as a float or a callable ``step -> (0, 1]`` (see
            :mod:`numuon.schedule`); checked every step. Kept out of the state dict (a
            callable does not survive ``weights_only`` loading): pass the same one on resume.
        n_iter, oversample: Krylov power steps and extra block columns.
        rms_match: scale by ``sqrt(min(d)/k)`` as described above.
        adamw_lr, adamw_betas, adamw_eps, adamw_weight_decay: defaults for AdamW groups.
        seed: seeds the random start blocks (deterministic across ranks and resumes).
        nonfinite: what a step with a NaN or infinite gradient does. ``"raise"`` (default): a
            :class:`NumuonError` naming the parameter, before anything changes. ``"skip"``:
            the whole step is skipped (no weight, momentum or Krylov state changes, the rank
            schedule does not advance), counted in :attr:`skipped_steps`, with a warning; for
            long runs where a rare bad batch should not end training.
        distributed: shard the SVD work across ranks (see the module docstring). ``None``
            (default): whenever ``torch.distributed`` is initialised with more than one rank.
            Every rank must call ``step()`` with the same (all-reduced) gradients, as DDP does.
        foreach: the multi-tensor path, as ``torch.optim`` optimizers offer it: momentum,
            weight decay and the step run as ``torch._foreach_*`` ops over a group's matrices,
            and matrices of one shape (and rank ``k``) share one batched Krylov iteration
            (:func:`numuon.krylov.block_krylov_svd_batched`: batched products, QRs and SVDs)
            instead of a Python loop of small ones. The same update as the per-tensor path up
            to floating-point summation order (tested). ``None`` (default): on when every
            matrix is on a CUDA device, as in ``torch.optim``. Under sharding (``distributed``)
            the per-tensor path runs: each rank owns different matrices.
        matmul_dtype: the dtype of the Krylov iteration's products with the momentum matrix
            (``None``: float32). ``torch.bfloat16`` matches ``torch.optim.Muon``, whose
            Newton-Schulz products run in bfloat16; QRs and the small SVD stay in float32.

    A group's ``transposed=True`` marks matrices stored ``d_in x d_out`` (GPT-2's ``Conv1D``;
    :func:`param_groups` sets it) for Muon's shape scale.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = True,
        weight_decay: float = 0.0,
        rank_schedule: RankSchedule | float = 0.25,
        n_iter: int = 2,
        oversample: int = 8,
        rms_match: bool = False,
        adamw_lr: float = 3e-4,
        adamw_betas: tuple[float, float] = (0.9, 0.95),
        adamw_eps: float = 1e-8,
        adamw_weight_decay: float = 0.0,
        seed: int = 0,
        nonfinite: Literal["raise", "skip"] = "raise",
        distributed: bool | None = None,
        foreach: bool | None = None,
        matmul_dtype: torch.dtype | None = None,
    ) -> None:
        if nonfinite not in ("raise", "skip"):
            raise NumuonError(f"nonfinite: {nonfinite!r} must be 'raise' or 'skip'")
        for name, value in (("lr", lr), ("adamw_lr", adamw_lr)):
            if not (math.isfinite(value) and value >= 0):
                raise NumuonError(f"{name}: {value!r} must be a finite number >= 0")
        if not 0.0 <= momentum < 1.0:
            raise NumuonError(f"momentum: {momentum!r} must be in [0, 1)")
        if n_iter < 0 or oversample < 0:
            raise NumuonError(f"n_iter={n_iter}, oversample={oversample}: must be >= 0")
        if isinstance(rank_schedule, (int, float)):
            rank_schedule = Constant(check_ratio(rank_schedule, "rank_schedule"))
        elif not callable(rank_schedule):
            raise NumuonError(f"rank_schedule: {rank_schedule!r} is neither a number nor callable")
        self.rank_schedule: Callable[[int], float] = rank_schedule
        self.seed = int(seed)
        self.nonfinite = nonfinite
        self.distributed = distributed
        self.foreach = foreach
        self.matmul_dtype = matmul_dtype
        #: Steps skipped for non-finite gradients (``nonfinite="skip"``).
        self.skipped_steps = 0
        #: Update directions this process computed (under sharding, its own matrices only).
        self.directions_computed = 0
        groups = list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        adamw_defaults: dict[str, Any] = {
            "lr": adamw_lr,
            "betas": tuple(adamw_betas),
            "eps": adamw_eps,
            "weight_decay": adamw_weight_decay,
        }
        prepared = []
        for given in groups:
            group: dict[str, Any] = dict(given)
            group.setdefault("use_numuon", True)
            if not group["use_numuon"]:
                for key, value in adamw_defaults.items():
                    group.setdefault(key, value)
            prepared.append(group)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "nesterov": nesterov,
            "weight_decay": weight_decay,
            "n_iter": n_iter,
            "oversample": oversample,
            "rms_match": rms_match,
            "transposed": False,
            "use_numuon": True,
            "betas": tuple(adamw_betas),
            "eps": adamw_eps,
        }
        super().__init__(prepared, defaults)
        for gi, group in enumerate(self.param_groups):
            if not group["use_numuon"]:
                continue
            for pi, p in enumerate(group["params"]):
                if p.ndim != 2:
                    raise NumuonError(
                        f"param_groups[{gi}] ({self._name(group, pi)}): shape {tuple(p.shape)} is "
                        "not 2-D; NuMuon groups take matrices only, put it in a use_numuon=False "
                        "(AdamW) group, e.g. with numuon.param_groups(model)"
                    )
                if _is_dtensor(p):
                    raise NumuonError(
                        f"param_groups[{gi}] ({self._name(group, pi)}): a sharded DTensor; NuMuon "
                        "needs whole matrices (use DDP, or gather the parameter)"
                    )

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _name(group: dict[str, Any], index: int) -> str:
        names = group.get("param_names")
        return str(names[index]) if names else f"params[{index}]"

    def _nonfinite_gradient(self) -> str | None:
        """Where the first NaN or infinite gradient is (``param_groups[i] (name)``), or None.

        Checked before any state or weight changes: one non-finite entry would turn the
        momentum, and with it every later update, into NaN (an SVD of a NaN matrix is NaN
        everywhere). One fused reduction per group, so the check costs one sync, not one per
        parameter.
        """
        for gi, group in enumerate(self.param_groups):
            grads = [p.grad for p in group["params"] if p.grad is not None]
            if not grads:
                continue
            finite = torch.stack([torch.isfinite(g).all() for g in grads])
            if bool(finite.all()):
                continue
            with_grad = [i for i, p in enumerate(group["params"]) if p.grad is not None]
            bad = with_grad[int((~finite).nonzero()[0, 0])]
            return f"param_groups[{gi}] ({self._name(group, bad)})"
        return None

    def _world(self) -> tuple[int, int]:
        """``(rank, world_size)`` for sharding the SVD work; ``(0, 1)`` when not sharding."""
        use = self.distributed
        if use is None:
            use = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        if not use:
            return 0, 1
        if not (dist.is_available() and dist.is_initialized()):
            raise NumuonError("distributed=True: torch.distributed is not initialised")
        return dist.get_rank(), dist.get_world_size()

    def _ratio(self, step: int) -> float:
        return check_ratio(self.rank_schedule(step), f"rank_schedule({step})")

    def _generator(self, index: int, step: int, device: torch.device) -> torch.Generator:
        """A generator for parameter ``index`` at ``step``: the same on every rank and resume."""
        gen = torch.Generator(device=device)
        gen.manual_seed((self.seed * 1_000_003 + step * 10_007 + index) % (2**63 - 1))
        return gen

    def direction(
        self, update: torch.Tensor, k: int, state: dict[str, Any], group: dict[str, Any], gen: Any
    ) -> torch.Tensor:
        """The orthogonal update direction ``U_k V_kᵀ`` of ``update`` (rank ``k``).

        Subclasses change only this (the Newton-Schulz Muon baseline does), so every optimizer
        in a comparison shares the momentum, scaling, weight decay and AdamW fallback.
        """
        sub = block_krylov_svd(
            update,
            k,
            init=state.get("krylov_basis"),
            n_iter=group["n_iter"],
            oversample=group["oversample"],
            generator=gen,
            matmul_dtype=self.matmul_dtype,
        )
        state["krylov_basis"] = sub.basis
        # A zero momentum has no singular directions: step by zero, not by an arbitrary basis.
        nonzero = (sub.S[:1] > 0).to(sub.U.dtype)
        return (sub.U * nonzero) @ sub.V.mT

    # ------------------------------------------------------------------ step

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """One NuMuon/AdamW step; see the class docstring for the update."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        bad = self._nonfinite_gradient()
        if bad is not None:
            if self.nonfinite == "raise":
                raise NumuonError(
                    f"{bad}: gradient has NaN or infinite values; no parameter was updated "
                    "(NuMuon(..., nonfinite='skip') skips such steps)"
                )
            self.skipped_steps += 1
            warnings.warn(
                f"NuMuon: skipped a step, {bad} has a NaN or infinite gradient "
                f"({self.skipped_steps} skipped so far)",
                stacklevel=2,
            )
            return loss
        # Every parameter that will move, with its index over all groups (the index seeds its
        # Krylov generator, so it must not depend on sharding).
        todo: list[tuple[int, torch.Tensor, dict[str, Any]]] = []
        index = 0
        for group in self.param_groups:
            for p in group["params"]:
                index += 1
                if p.grad is not None:
                    todo.append((index, p, group))
        ratios: dict[int, float] = {}
        for _, p, group in todo:
            state = self.state[p]
            step = int(state["step"]) if "step" in state else 0
            if group["use_numuon"] and step not in ratios:
                ratios[step] = self._ratio(step)  # validated before any weight moves
        rank, world = self._world()
        matrices = [t for t in todo if t[2]["use_numuon"]]
        if world == 1 and self._use_foreach(matrices):
            self._foreach_updates(matrices, ratios)
        elif world == 1:
            for index, p, group in matrices:
                self._numuon_update(p, group, index, ratios)
        else:
            self._sharded_updates(matrices, ratios, rank, world)
        for _, p, group in todo:
            if not group["use_numuon"]:
                self._adamw_update(p, group)
        return loss

    def _sharded_updates(
        self,
        matrices: list[tuple[int, torch.Tensor, dict[str, Any]]],
        ratios: dict[int, float],
        rank: int,
        world: int,
    ) -> None:
        """Keller Jordan's sharding: matrices of one shape (and dtype, device) in chunks of
        ``world``; rank ``r`` updates the ``r``-th of each chunk, then one ``all_gather`` per
        chunk hands every rank every updated matrix. A short last chunk is padded with a
        scratch tensor."""
        buckets: dict[tuple[Any, ...], list[tuple[int, torch.Tensor, dict[str, Any]]]] = {}
        for item in matrices:
            p = item[1]
            buckets.setdefault((tuple(p.shape), p.dtype, p.device), []).append(item)
        for items in buckets.values():
            for start in range(0, len(items), world):
                chunk = items[start : start + world]
                if rank < len(chunk):
                    index, p, group = chunk[rank]
                    self._numuon_update(p, group, index, ratios)
                    mine = p.data
                else:
                    mine = torch.empty_like(chunk[0][1].data)
                outputs = [item[1].data for item in chunk]
                outputs += [torch.empty_like(mine) for _ in range(world - len(chunk))]
                dist.all_gather(outputs, mine)

    def _use_foreach(self, matrices: list[tuple[int, torch.Tensor, dict[str, Any]]]) -> bool:
        if self.foreach is not None:
            return bool(self.foreach)
        return bool(matrices) and all(p.is_cuda for _, p, _ in matrices)

    def directions(
        self,
        updates: list[torch.Tensor],
        k: int,
        states: list[dict[str, Any]],
        group: dict[str, Any],
        gens: list[Any],
    ) -> list[torch.Tensor]:
        """:meth:`direction` of several same-shape matrices at once (the ``foreach`` path):
        one batched Krylov iteration. A subclass that overrides only :meth:`direction` (the
        Newton-Schulz baseline) gets a loop over it instead, so it stays correct."""
        if type(self).direction is not NuMuon.direction:
            return [
                self.direction(u, k, st, group, g)
                for u, st, g in zip(updates, states, gens, strict=True)
            ]
        inits = [st.get("krylov_basis") for st in states]
        sub = block_krylov_svd_batched(
            torch.stack(updates),
            k,
            inits,
            n_iter=group["n_iter"],
            oversample=group["oversample"],
            generators=gens,
            matmul_dtype=self.matmul_dtype,
        )
        for i, st in enumerate(states):
            st["krylov_basis"] = sub.basis[i]
        nonzero = (sub.S[..., :1] > 0).to(sub.U.dtype).unsqueeze(-1)
        return list(((sub.U * nonzero) @ sub.V.mT).unbind(0))

    def _foreach_updates(
        self, matrices: list[tuple[int, torch.Tensor, dict[str, Any]]], ratios: dict[int, float]
    ) -> None:
        """The multi-tensor path (``foreach=True``): per group, the momentum, Nesterov look-ahead,
        weight decay and step as ``torch._foreach_*`` ops; the directions batched per shape and
        rank. The same arithmetic as :meth:`_numuon_update`, in the same order."""
        by_group: dict[int, list[tuple[int, torch.Tensor, dict[str, Any]]]] = {}
        for item in matrices:
            by_group.setdefault(id(item[2]), []).append(item)
        for items in by_group.values():
            group = items[0][2]
            params = [p for _, p, _ in items]
            states = [self.state[p] for p in params]
            for p, st in zip(params, states, strict=True):
                if "step" not in st:
                    st["step"] = torch.tensor(0.0)
                    st["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            grads = [p.grad for p in params if p.grad is not None]
            assert len(grads) == len(params)  # the caller kept only parameters with a gradient
            bufs = [st["momentum_buffer"] for st in states]
            beta = group["momentum"]
            torch._foreach_lerp_(bufs, grads, 1 - beta)
            updates = torch._foreach_lerp(grads, bufs, beta) if group["nesterov"] else bufs
            steps = [int(st["step"]) for st in states]
            ks = [rank_for(ratios[t], p.shape) for t, p in zip(steps, params, strict=True)]
            buckets: dict[tuple[Any, ...], list[int]] = {}
            for i, p in enumerate(params):
                buckets.setdefault((tuple(p.shape), p.dtype, p.device, ks[i]), []).append(i)
            dirs: list[torch.Tensor] = [torch.empty(0)] * len(params)
            for (_, _, _, k), idx in buckets.items():
                gens = [self._generator(items[i][0], steps[i], params[i].device) for i in idx]
                out = self.directions(
                    [updates[i] for i in idx], k, [states[i] for i in idx], group, gens
                )
                for i, d in zip(idx, out, strict=True):
                    dirs[i] = d.to(params[i].dtype)
            self.directions_computed += len(params)
            scales = []
            for p, k in zip(params, ks, strict=True):
                scale = muon_scale(p.shape, group.get("transposed", False))
                if group["rms_match"]:
                    scale *= math.sqrt(min(p.shape) / k)
                scales.append(-group["lr"] * scale)
            torch._foreach_mul_(params, 1 - group["lr"] * group["weight_decay"])
            torch._foreach_mul_(dirs, scales)
            torch._foreach_add_(params, dirs)
            for st in states:
                st["step"] += 1

    def _numuon_update(
        self, p: torch.Tensor, group: dict[str, Any], index: int, ratios: dict[int, float]
    ) -> None:
        grad = p.grad
        assert grad is not None
        state = self.state[p]
        if "step" not in state:
            state["step"] = torch.tensor(0.0)
            state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        step = int(state["step"])
        beta = group["momentum"]
        buf = state["momentum_buffer"]
        buf.lerp_(grad, 1 - beta)
        update = grad.lerp(buf, beta) if group["nesterov"] else buf
        k = rank_for(ratios[step], p.shape)
        gen = self._generator(index, step, p.device)
        direction = self.direction(update, k, state, group, gen).to(p.dtype)
        self.directions_computed += 1
        scale = muon_scale(p.shape, group.get("transposed", False))
        if group["rms_match"]:
            scale *= math.sqrt(min(p.shape) / k)
        p.mul_(1 - group["lr"] * group["weight_decay"])
        p.add_(direction, alpha=-group["lr"] * scale)
        state["step"] += 1

    def _adamw_update(self, p: torch.Tensor, group: dict[str, Any]) -> None:
        """AdamW (Loshchilov and Hutter, 2019) with bias correction, for non-matrix parameters:

        m ← β₁ m + (1 - β₁) g,  v ← β₂ v + (1 - β₂) g²,
        p ← (1 - γλ) p - γ · (m / (1 - β₁ᵗ)) / (sqrt(v / (1 - β₂ᵗ)) + ε).
        """
        grad = p.grad
        assert grad is not None
        state = self.state[p]
        if "step" not in state:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["step"] += 1
        t = float(state["step"])
        beta1, beta2 = group["betas"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m.lerp_(grad, 1 - beta1)
        v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (v / (1 - beta2**t)).sqrt_().add_(group["eps"])
        p.mul_(1 - group["lr"] * group["weight_decay"])
        p.addcdiv_(m, denom, value=-group["lr"] / (1 - beta1**t))


def _is_dtensor(p: torch.Tensor) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - builds without distributed
        return False
    return isinstance(p, DTensor)
