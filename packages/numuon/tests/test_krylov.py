import pytest
import torch
from numuon import NumuonError, block_krylov_svd
from numuon.krylov import exact_top_k, krylov_is_exact


def _decaying(m: int, n: int, gen: torch.Generator, rate: float = 0.8) -> torch.Tensor:
    U, _ = torch.linalg.qr(torch.randn(m, min(m, n), generator=gen))
    V, _ = torch.linalg.qr(torch.randn(n, min(m, n), generator=gen))
    s = rate ** torch.arange(min(m, n), dtype=torch.float32)
    return U @ torch.diag(s) @ V.T


def _projector_gap(A: torch.Tensor, B: torch.Tensor) -> float:
    return float((A @ A.T - B @ B.T).norm())


@pytest.mark.parametrize(("m", "n", "k"), [(96, 64, 4), (64, 160, 6), (128, 128, 1)])
def test_krylov_subspace_matches_torch_svd_on_random_matrices(gen, m, n, k):
    A = _decaying(m, n, gen) + 1e-3 * torch.randn(m, n, generator=gen)
    assert not krylov_is_exact((m, n), k, 2, 8)  # the randomized path, not the fallback
    sub = block_krylov_svd(A, k, generator=gen)
    ref = exact_top_k(A, k)
    assert sub.U.shape == (m, k)
    assert sub.V.shape == (n, k)
    assert sub.S.shape == (k,)
    assert _projector_gap(sub.U, ref.U) < 1e-3
    assert _projector_gap(sub.V, ref.V) < 1e-3
    torch.testing.assert_close(sub.S, ref.S, atol=1e-4, rtol=1e-4)
    # orthonormal columns
    torch.testing.assert_close(sub.U.T @ sub.U, torch.eye(k), atol=1e-5, rtol=0)


def test_warm_start_converges_on_a_flat_gaussian_spectrum(gen):
    """A flat spectrum defeats one cold Krylov call; warm restarts converge like subspace
    iteration, which is why NuMuon keeps the basis between steps."""
    A = torch.randn(120, 90, generator=gen)
    ref = exact_top_k(A, 4)
    cold = block_krylov_svd(A, 4, generator=gen)
    init, gaps = None, []
    for _ in range(5):
        sub = block_krylov_svd(A, 4, init=init, generator=gen)
        init = sub.basis
        gaps.append(_projector_gap(sub.V, ref.V))
    assert gaps[-1] < 1e-3
    assert gaps[-1] < _projector_gap(cold.V, ref.V)


def test_warm_start_block_is_trimmed_or_padded(gen):
    A = _decaying(80, 60, gen)
    wide = block_krylov_svd(A, 8, generator=gen).basis  # 16 columns
    narrow = block_krylov_svd(A, 2, init=wide, generator=gen)  # takes 10 of them
    assert narrow.basis.shape == (60, 10)
    grown = block_krylov_svd(A, 6, init=narrow.basis, generator=gen)  # pads to 14
    assert grown.basis.shape == (60, 14)


def test_exact_fallback_when_the_krylov_space_spans_everything(gen):
    A = torch.randn(20, 12, generator=gen)
    assert krylov_is_exact((20, 12), 4, 2, 8)
    sub = block_krylov_svd(A, 4, generator=gen)
    torch.testing.assert_close(sub.S, torch.linalg.svdvals(A)[:4])


def test_bfloat16_input_is_computed_in_float32(gen):
    A = _decaying(96, 64, gen).bfloat16()
    sub = block_krylov_svd(A, 3, generator=gen)
    assert sub.U.dtype == torch.float32


@pytest.mark.parametrize("k", [0, 65])
def test_rejects_impossible_rank(gen, k):
    with pytest.raises(NumuonError, match="k="):
        block_krylov_svd(torch.randn(64, 64, generator=gen), k)


def test_rejects_non_matrix():
    with pytest.raises(NumuonError, match="2-D"):
        block_krylov_svd(torch.randn(4, 4, 4), 1)
