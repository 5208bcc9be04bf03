"""Top-k singular subspace of a matrix by randomized block Krylov iteration, warm-startable.

NuMuon needs the top-``k`` singular vectors of the momentum matrix at every step. An exact SVD
costs ``O(m n min(m, n))``; a randomized block Krylov method (Musco and Musco, NeurIPS 2015)
gets the top-``k`` subspace in ``O(m n b q)`` with a block of ``b = k + p`` vectors (``p`` the
oversampling) and ``q`` power steps. Between optimizer steps the momentum changes slowly, so
starting the block from the previous step's top right singular vectors (a *warm start*) makes
a couple of steps enough, where a cold start from Gaussian vectors would need many more; this
is what the public NuMuon re-implementations do (``q = 2``, ``p = 8``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from numuon.errors import NumuonError

__all__ = [
    "Subspace",
    "block_krylov_svd",
    "block_krylov_svd_batched",
    "exact_top_k",
    "krylov_is_exact",
]


@dataclass(frozen=True)
class Subspace:
    """The rank-``k`` truncated SVD ``A ≈ U diag(S) Vᵀ`` and the block to warm-start from.

    ``U`` is ``(m, k)``, ``S`` is ``(k,)`` (descending), ``V`` is ``(n, k)``; ``basis`` is
    ``(n, b)``: the top-``b`` right singular vectors of the Krylov approximation, ``b >= k``,
    which the next call takes as ``init``.
    """

    U: torch.Tensor
    S: torch.Tensor
    V: torch.Tensor
    basis: torch.Tensor

    def squeeze(self) -> Subspace:
        """The one matrix of a batch of one (drops the leading batch dimension)."""
        return Subspace(U=self.U[0], S=self.S[0], V=self.V[0], basis=self.basis[0])


def krylov_is_exact(shape: tuple[int, int], k: int, n_iter: int, oversample: int) -> bool:
    """True when the Krylov space ``[AΩ, (AAᵀ)AΩ, ...]`` would have at least ``min(m, n)``
    columns: it then spans the whole column space, so an exact SVD is both exact and cheaper."""
    block = min(k + oversample, min(shape))
    return block * (n_iter + 1) >= min(shape)


def exact_top_k(A: torch.Tensor, k: int) -> Subspace:
    """The top-``k`` singular triplets of ``A`` from ``torch.linalg.svd`` (the reference).
    ``A`` may carry leading batch dimensions (``(B, m, n)``)."""
    U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    return Subspace(U=U[..., :k], S=S[..., :k], V=Vh[..., :k, :].mT, basis=Vh.mT)


def block_krylov_svd(
    A: torch.Tensor,
    k: int,
    init: torch.Tensor | None = None,
    n_iter: int = 2,
    oversample: int = 8,
    generator: torch.Generator | None = None,
    matmul_dtype: torch.dtype | None = None,
) -> Subspace:
    """Top-``k`` singular subspace of ``A`` (``m x n``) by randomized block Krylov iteration.

    With a start block ``Ω`` (``n x b``, ``b = k + oversample``; ``init`` when given, else
    Gaussian) the method builds the block Krylov space

        K = [A Ω, (A Aᵀ) A Ω, ..., (A Aᵀ)^q A Ω]          (q = ``n_iter``)

    re-orthonormalising every block (a QR after each product, so powers of ``A Aᵀ`` do not
    collapse onto the top singular vector in floating point), takes an orthonormal basis ``Q``
    of ``K`` and the exact SVD of the small projection ``B = Qᵀ A = Ũ Σ Vᵀ``. The result is
    ``U_k = Q Ũ[:, :k]``, ``S_k = Σ[:k]``, ``V_k = V[:, :k]``: the Rayleigh-Ritz approximation of
    the top-``k`` triplets from ``K``. Its error falls like the ``q``-th power of the gap ratio
    ``σ_{b+1} / σ_k``, so oversampling helps when the spectrum is flat.

    ``init`` (``n x b'``) warm-starts the block: columns beyond ``b`` are dropped and missing
    ones are drawn from ``generator``. When the Krylov space would span the whole column space
    (see :func:`krylov_is_exact`) the exact SVD is returned instead. Computed in float32 (or the
    input's dtype if wider) whatever the input precision; ``matmul_dtype`` (e.g. bfloat16, the
    precision ``torch.optim.Muon`` runs its Newton-Schulz products in) runs the products with
    ``A`` in that dtype, while the QRs and the small SVD stay in float32 (neither has a
    bfloat16 kernel).
    """
    if A.ndim != 2:
        raise NumuonError(f"block_krylov_svd: expected a 2-D matrix, got shape {tuple(A.shape)}")
    return block_krylov_svd_batched(
        A.unsqueeze(0), k, [init], n_iter, oversample, [generator], matmul_dtype
    ).squeeze()


def block_krylov_svd_batched(
    A: torch.Tensor,
    k: int,
    inits: Sequence[torch.Tensor | None],
    n_iter: int = 2,
    oversample: int = 8,
    generators: Sequence[torch.Generator | None] | None = None,
    matmul_dtype: torch.dtype | None = None,
) -> Subspace:
    """:func:`block_krylov_svd` of a stack of same-shape matrices ``A`` (``B x m x n``) at once:
    every product, QR and SVD runs batched (the multi-tensor path of ``NuMuon(foreach=True)``).
    Matrix ``i`` starts from ``inits[i]`` padded from ``generators[i]``, exactly the block the
    one-matrix call would draw, so the batch gives each matrix the same subspace as its own
    call (up to floating-point summation order). The result's tensors carry the batch
    dimension first."""
    if A.ndim != 3:
        raise NumuonError(f"block_krylov_svd: expected a B x m x n stack, got {tuple(A.shape)}")
    _, m, n = A.shape
    if not 1 <= k <= min(m, n):
        raise NumuonError(f"block_krylov_svd: k={k} must be in [1, {min(m, n)}] for {m}x{n}")
    if n_iter < 0 or oversample < 0:
        raise NumuonError(
            f"block_krylov_svd: n_iter={n_iter}, oversample={oversample} must be >= 0"
        )
    work = A if A.dtype in (torch.float32, torch.float64) else A.float()
    if krylov_is_exact((m, n), k, n_iter, oversample):
        return exact_top_k(work, k)
    gens = list(generators) if generators is not None else [None] * A.shape[0]
    b = min(k + oversample, min(m, n))
    omega = torch.stack(
        [
            _start_block(work[i], b, init, gen)
            for i, (init, gen) in enumerate(zip(inits, gens, strict=True))
        ]
    )
    if matmul_dtype is None or matmul_dtype == work.dtype:
        low = work

        def mm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x @ y

    else:
        low = work.to(matmul_dtype)

        def mm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return (x.to(matmul_dtype) @ y.to(matmul_dtype)).to(work.dtype)

    blocks = []
    Q, _ = torch.linalg.qr(mm(low, omega))
    blocks.append(Q)
    for _ in range(n_iter):
        Z, _ = torch.linalg.qr(mm(low.mT, Q))
        Q, _ = torch.linalg.qr(mm(low, Z))
        blocks.append(Q)
    basis, _ = torch.linalg.qr(torch.cat(blocks, dim=-1))
    small = mm(basis.mT, low)  # B x (b (q+1)) x n
    Ub, S, Vh = torch.linalg.svd(small, full_matrices=False)
    U = basis @ Ub[..., :k]
    return Subspace(U=U, S=S[..., :k], V=Vh[..., :k, :].mT, basis=Vh[..., :b, :].mT)


def _start_block(
    A: torch.Tensor, b: int, init: torch.Tensor | None, generator: torch.Generator | None
) -> torch.Tensor:
    """``Ω`` (``n x b``): the warm-start block trimmed or padded with Gaussian columns."""
    n = A.shape[1]
    have = 0 if init is None or init.ndim != 2 or init.shape[0] != n else min(init.shape[1], b)
    parts = []
    if have:
        assert init is not None
        parts.append(init[:, :have].to(device=A.device, dtype=A.dtype))
    if have < b:
        parts.append(
            torch.randn(
                n, b - have, generator=generator, device=generator.device if generator else None
            ).to(device=A.device, dtype=A.dtype)
        )
    return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
