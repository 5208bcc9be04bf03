import pytest
import torch
from numuon import NumuonError
from numuon.compression import (
    LowRankLinear,
    collect_grams,
    compress,
    rank_for_reduction,
    truncated_svd_factors,
    whitened_svd_factors,
)
from numuon.spectra import effective_rank, model_ranks, stable_rank
from numuon.toy import ModelShape, build_llama, lm_loss
from torch import nn

from paperstack.tiny import build_tokenizer


@pytest.fixture(scope="module")
def llama():
    tok = build_tokenizer()
    model = build_llama(ModelShape(32, 64, 2, 2), tok, 16, seed=0)
    ids = torch.randint(4, len(tok), (8, 17), generator=torch.Generator().manual_seed(0))
    return model, ids


def test_rank_for_reduction_removes_at_least_the_target_fraction():
    for shape in [(128, 128), (384, 128), (10, 1000)]:
        for rho in (0.2, 0.4, 0.6):
            r = rank_for_reduction(shape, rho)
            kept = r * (shape[0] + shape[1]) / (shape[0] * shape[1])
            assert kept <= 1 - rho
            assert (r + 1) * (shape[0] + shape[1]) / (shape[0] * shape[1]) > 1 - rho
    with pytest.raises(NumuonError, match="reduction"):
        rank_for_reduction((4, 4), 1.0)


def test_full_rank_factors_reconstruct_the_layer(gen):
    lin = nn.Linear(24, 16)
    A, B = truncated_svd_factors(lin.weight, 16)
    low = LowRankLinear(A, B, lin.bias.detach())
    x = torch.randn(5, 24, generator=gen)
    torch.testing.assert_close(low(x), lin(x), atol=1e-5, rtol=1e-5)


def test_whitening_lowers_the_output_error_on_anisotropic_inputs(gen):
    """SVD-LLM's point: truncating W S (S = chol(XᵀX)) minimises ‖(W - W') Xᵀ‖, not ‖W - W'‖."""
    W = torch.randn(32, 48, generator=gen)
    X = torch.randn(512, 48, generator=gen) * torch.logspace(0, -3, 48)  # a few strong inputs
    gram = (X.T @ X).double()
    sigma = torch.linalg.svdvals(W.double() @ torch.linalg.cholesky(gram))
    for r in (4, 8, 16):
        A, B = truncated_svd_factors(W, r)
        Aw, Bw = whitened_svd_factors(W, gram, r)
        plain = float((X @ (W - B @ A).T).norm())
        white = float((X @ (W - Bw @ Aw).T).norm())
        assert white < 0.8 * plain
        # and it is the optimum: the dropped singular values of W S
        assert white == pytest.approx(float(sigma[r:].square().sum().sqrt()), rel=1e-3)


def test_compress_a_llama_hits_the_reduction_and_still_runs(llama):
    model, ids = llama
    grams = collect_grams(model, [ids[:, :-1]])
    assert set(grams) == {
        f"model.layers.{i}.{m}"
        for i in range(2)
        for m in (
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
            "mlp.down_proj",
        )
    }
    for method in ("svd", "whitened"):
        small, info = compress(model, 0.4, method, grams=grams)
        assert 0.4 <= info["reduction"] < 0.5
        assert isinstance(small.model.layers[0].mlp.down_proj, LowRankLinear)
        assert isinstance(model.model.layers[0].mlp.down_proj, nn.Linear)  # original untouched
        loss = lm_loss(small, ids)
        assert torch.isfinite(torch.tensor(loss))


def test_whitened_compress_needs_calibration(llama):
    model, _ = llama
    with pytest.raises(NumuonError, match="calibration"):
        compress(model, 0.4, "whitened")
    with pytest.raises(NumuonError, match="method"):
        compress(model, 0.4, "qr")  # type: ignore[arg-type]


def test_whitening_survives_a_dead_input_dimension(gen):
    W = torch.randn(8, 6, generator=gen)
    X = torch.randn(100, 6, generator=gen)
    X[:, 2] = 0.0  # singular Gram matrix: the Cholesky needs damping
    A, B = whitened_svd_factors(W, (X.T @ X).double(), 3)
    assert torch.isfinite(A).all()
    assert torch.isfinite(B).all()


def test_stable_and_effective_rank_of_known_matrices(gen):
    assert stable_rank(torch.eye(10)) == pytest.approx(10.0)
    assert effective_rank(torch.eye(10)) == pytest.approx(10.0, rel=1e-5)
    u, v = torch.randn(12, generator=gen), torch.randn(7, generator=gen)
    assert stable_rank(torch.outer(u, v)) == pytest.approx(1.0, rel=1e-4)
    assert effective_rank(torch.outer(u, v)) == pytest.approx(1.0, rel=1e-3)
    assert stable_rank(torch.zeros(3, 3)) == 0.0


def test_model_ranks_averages_over_hidden_matrices(llama):
    model, _ = llama
    ranks = model_ranks(model)
    assert 1.0 < ranks["stable_rank"] <= 32
    assert 0 < ranks["stable_rank_frac"] <= 1
