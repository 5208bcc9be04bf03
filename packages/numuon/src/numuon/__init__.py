"""numuon: NuMuon, a nuclear-norm-constrained Muon optimizer, and SVD compression to show it.

NuMuon steps each hidden matrix along ``U_k V_kᵀ``, the top-``k`` singular directions of its
(Nesterov) momentum, found by a warm-started randomized block Krylov iteration, with ``k`` from a
rank schedule; Muon is the case ``k = min(d_out, d_in)``. The rank-limited updates leave weights
of lower stable rank, which lose less under truncated (and activation-whitened) SVD compression.

The names below are imported on first use, so ``import numuon`` (and ``numuon --help``) does
not pay for importing torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.3.0"

#: Public name -> the module that defines it.
_EXPORTS = {
    "ChainedOptimizer": "numuon.baselines",
    "NewtonSchulzMuon": "numuon.baselines",
    "build_optimizer": "numuon.baselines",
    "newton_schulz": "numuon.baselines",
    "NumuonError": "numuon.errors",
    "Subspace": "numuon.krylov",
    "block_krylov_svd": "numuon.krylov",
    "NuMuon": "numuon.optimizer",
    "muon_scale": "numuon.optimizer",
    "param_groups": "numuon.optimizer",
    "Constant": "numuon.schedule",
    "Cosine": "numuon.schedule",
    "Piecewise": "numuon.schedule",
    "rank_for": "numuon.schedule",
    "compress": "numuon.compression",
    "stable_rank": "numuon.spectra",
    "effective_rank": "numuon.spectra",
}

__all__ = sorted([*_EXPORTS, "__version__"])

if TYPE_CHECKING:
    from numuon.baselines import ChainedOptimizer as ChainedOptimizer
    from numuon.baselines import NewtonSchulzMuon as NewtonSchulzMuon
    from numuon.baselines import build_optimizer as build_optimizer
    from numuon.baselines import newton_schulz as newton_schulz
    from numuon.compression import compress as compress
    from numuon.errors import NumuonError as NumuonError
    from numuon.krylov import Subspace as Subspace
    from numuon.krylov import block_krylov_svd as block_krylov_svd
    from numuon.optimizer import NuMuon as NuMuon
    from numuon.optimizer import muon_scale as muon_scale
    from numuon.optimizer import param_groups as param_groups
    from numuon.schedule import Constant as Constant
    from numuon.schedule import Cosine as Cosine
    from numuon.schedule import Piecewise as Piecewise
    from numuon.schedule import rank_for as rank_for
    from numuon.spectra import effective_rank as effective_rank
    from numuon.spectra import stable_rank as stable_rank


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'numuon' has no attribute {name!r}")
