"""Merged references: the denominator of progress advantage moved toward the policy.

The authors' code (``pa/merging.py``) can replace ``π_ref`` by a weight-space merge

    π_α = π_ref + α · τ,    τ = θ_RL − θ_ref (the task vector),

with ``α = 0`` the reference and ``α = 1`` the policy (exactly, for ``linear``). With one task
vector their sparsified variants reduce to: ``ties`` keeps the ``density`` fraction of ``τ``'s
entries of largest magnitude (per tensor; sign election needs two or more task vectors), and
``dare_linear`` keeps a random ``density`` fraction and divides by ``density``. The authors'
two other names are accepted for the same reason: with one task vector their ``dare_ties`` is
``dare_linear`` (the sign election has one voter) and ``emr`` is ``linear`` (the elected vector
is ``τ`` and its rescaling factor is 1). Only floating-point tensors are merged; integer
buffers are copied from the reference.
"""

from __future__ import annotations

import copy
from typing import Any

from progress_advantage.errors import ProgressAdvantageError

__all__ = ["MERGE_METHODS", "merged_reference"]

MERGE_METHODS = ("linear", "ties", "dare_linear", "dare_ties", "emr")
#: What the authors' methods reduce to with a single (policy, reference) task vector.
_SINGLE_VECTOR = {"dare_ties": "dare_linear", "emr": "linear"}


def merged_reference(
    policy: Any,
    reference: Any,
    alpha: float,
    method: str = "linear",
    density: float = 0.2,
    seed: int = 0,
) -> Any:
    """A copy of ``reference`` whose weights are ``θ_ref + α · sparsify(θ_RL − θ_ref)``."""
    import torch

    if not 0.0 <= alpha <= 1.0:
        raise ProgressAdvantageError(f"merge alpha must be in [0, 1], got {alpha}")
    if method not in MERGE_METHODS:
        raise ProgressAdvantageError(f"merge method {method!r} is not one of {MERGE_METHODS}")
    if not 0.0 < density <= 1.0:
        raise ProgressAdvantageError(f"merge density must be in (0, 1], got {density}")
    method = _SINGLE_VECTOR.get(method, method)
    pol = policy.state_dict()
    merged = copy.deepcopy(reference)
    gen = torch.Generator().manual_seed(seed)
    seen: set[int] = set()  # tied weights (embeddings = output layer) are one tensor: merge once
    with torch.no_grad():
        for name, param in merged.state_dict().items():
            if param.data_ptr() in seen:
                continue
            seen.add(param.data_ptr())
            if name not in pol or pol[name].shape != param.shape:
                raise ProgressAdvantageError(
                    f"merge: policy and reference differ at {name!r}; they must share one "
                    "architecture"
                )
            if not param.dtype.is_floating_point:
                continue
            tau = pol[name].float() - param.float()
            if method == "ties" and density < 1.0:
                k = max(1, int(density * tau.numel()))
                cut = tau.abs().flatten().kthvalue(tau.numel() - k + 1).values
                tau = tau * (tau.abs() >= cut)
            elif method == "dare_linear" and density < 1.0:
                keep = torch.bernoulli(torch.full(tau.shape, density), generator=gen)
                tau = tau * keep / density
            param.copy_((param.float() + alpha * tau).to(param.dtype))
    merged.eval()
    return merged
