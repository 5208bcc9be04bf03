import io

import pytest
import torch
from numuon import Constant, Cosine, NewtonSchulzMuon, NuMuon, NumuonError, param_groups
from numuon.baselines import build_optimizer, newton_schulz
from torch import nn


class Tiny(nn.Module):
    """Embedding, two hidden matrices big enough for the randomized Krylov path, a head."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(12, 48)
        self.fc1 = nn.Linear(48, 96)
        self.fc2 = nn.Linear(96, 48, bias=False)
        self.head = nn.Linear(48, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.fc2(torch.relu(self.fc1(self.emb(x)))))

    def get_output_embeddings(self) -> nn.Module:
        return self.head


def _loss(model: nn.Module, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    x = torch.randint(0, 12, (16,), generator=g)
    return nn.functional.cross_entropy(model(x), (x * 5 + 1) % 12)


def _train(model: nn.Module, opt: torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        opt.zero_grad()
        _loss(model, step).backward()
        opt.step()


def _single(G: torch.Tensor, **kwargs) -> torch.Tensor:
    """The update NuMuon makes to a zero matrix whose gradient is G (one step, lr 1)."""
    p = nn.Parameter(torch.zeros_like(G))
    opt = NuMuon([p], lr=1.0, **kwargs)
    p.grad = G.clone()
    opt.step()
    return p.detach().clone()


def test_full_rank_update_equals_the_exact_polar_factor(gen):
    G = torch.randn(40, 24, generator=gen)
    U, _, Vh = torch.linalg.svd(G, full_matrices=False)
    delta = _single(G, rank_schedule=1.0)
    scale = (40 / 24) ** 0.5  # Muon's shape scale for a tall matrix
    torch.testing.assert_close(delta, -scale * U @ Vh, atol=1e-5, rtol=1e-5)


def test_rank_one_schedule_gives_a_rank_one_update_along_the_top_singular_pair(gen):
    # A gradient with a spectral gap, as real ones have (a flat Gaussian spectrum needs the
    # warm start over several steps; see test_krylov).
    G = torch.randn(64, 6, generator=gen) @ torch.randn(6, 80, generator=gen)
    G += 0.01 * torch.randn(64, 80, generator=gen)
    delta = _single(G, rank_schedule=lambda step: 1 / 64)
    assert int(torch.linalg.matrix_rank(delta)) == 1
    U, _, Vh = torch.linalg.svd(G, full_matrices=False)
    torch.testing.assert_close(delta, -torch.outer(U[:, 0], Vh[0]), atol=1e-4, rtol=1e-4)


def test_rank_k_update_has_unit_singular_values_on_k_directions(gen):
    G = torch.randn(96, 64, generator=gen)
    delta = _single(G, rank_schedule=0.125)  # k = 8
    s = torch.linalg.svdvals(delta) / (96 / 64) ** 0.5
    torch.testing.assert_close(s[:8], torch.ones(8), atol=1e-4, rtol=0)
    assert float(s[8:].max()) < 1e-4


def test_save_and_load_resumes_identically():
    schedule = Cosine(1.0, 0.1, 6)
    model = Tiny()
    opt = NuMuon(param_groups(model), lr=0.02, rank_schedule=schedule, adamw_lr=1e-2)
    _train(model, opt, range(3))
    assert "krylov_basis" in opt.state[model.fc1.weight]  # the warm start is state
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)

    resumed = Tiny(seed=123)
    opt2 = NuMuon(param_groups(resumed), lr=0.02, rank_schedule=schedule, adamw_lr=1e-2)
    buf.seek(0)
    saved = torch.load(buf, weights_only=True)
    resumed.load_state_dict(saved["model"])
    opt2.load_state_dict(saved["opt"])
    _train(model, opt, range(3, 6))
    _train(resumed, opt2, range(3, 6))
    for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_param_groups_send_embeddings_head_and_vectors_to_adamw():
    model = Tiny()
    groups = param_groups(model)
    numuon = {n for n, _ in groups[0]["params"]}
    adamw = {n for n, _ in groups[1]["params"]}
    assert numuon == {"fc1.weight", "fc2.weight"}
    assert adamw == {"emb.weight", "fc1.bias", "head.weight", "head.bias"}
    assert groups[1]["use_numuon"] is False


def test_training_lowers_the_loss():
    model = Tiny()
    opt = NuMuon(param_groups(model), lr=0.02, rank_schedule=0.25, adamw_lr=1e-2)
    with torch.no_grad():
        before = float(_loss(model, 0))
    for _ in range(30):
        opt.zero_grad()
        _loss(model, 0).backward()
        opt.step()
    with torch.no_grad():
        assert float(_loss(model, 0)) < 0.7 * before


def test_newton_schulz_reference_matches_torch_muon(gen):
    """The reference baseline and torch.optim.Muon take the same step (up to bfloat16)."""
    G = torch.randn(64, 32, generator=gen)
    a, b = nn.Parameter(torch.zeros(64, 32)), nn.Parameter(torch.zeros(64, 32))
    ours = NewtonSchulzMuon([a], lr=0.1, momentum=0.95)
    ref = torch.optim.Muon([b], lr=0.1, momentum=0.95, weight_decay=0.0)
    for _ in range(3):
        a.grad, b.grad = G.clone(), G.clone()
        ours.step()
        ref.step()
    rel = float((a - b).detach().norm() / b.detach().norm())
    assert rel < 0.03


def test_newton_schulz_approximates_the_polar_factor(gen):
    G = torch.randn(48, 48, generator=gen)
    s = torch.linalg.svdvals(newton_schulz(G))
    assert float(s.min()) > 0.5
    assert float(s.max()) < 1.5


def test_build_optimizer_names_every_baseline():
    for name in ("adamw", "muon", "muon-ns", "numuon"):
        model = Tiny()
        opt = build_optimizer(name, model, lr=0.02, adamw_lr=1e-2)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5)
        _train(model, opt, range(2))
        sched.step()
        assert all(g["lr"] > 0 for g in opt.param_groups)
    with pytest.raises(NumuonError, match="optimizer 'sgd'"):
        build_optimizer("sgd", Tiny())


def test_chained_muon_state_dict_roundtrips():
    model = Tiny()
    opt = build_optimizer("muon", model)
    _train(model, opt, range(2))
    opt2 = build_optimizer("muon", model)
    opt2.load_state_dict(opt.state_dict())
    assert len(opt2.members_state()) == len(opt.members_state())  # type: ignore[attr-defined]


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("bad", [0.0, 1.5, -1.0])
def test_rank_schedule_outside_zero_one_is_refused(bad):
    with pytest.raises(NumuonError, match="outside"):
        NuMuon([nn.Parameter(torch.zeros(4, 4))], rank_schedule=bad)


def test_a_schedule_that_leaves_zero_one_mid_run_stops_before_touching_the_weights(gen):
    model = Tiny()
    opt = NuMuon(param_groups(model), rank_schedule=lambda step: 0.5 if step < 2 else 2.0)
    _train(model, opt, range(2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    momentum = opt.state[model.fc1.weight]["momentum_buffer"].clone()
    with pytest.raises(NumuonError, match=r"rank_schedule\(2\): 2.0 is outside"):
        _train(model, opt, range(2, 3))
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert torch.equal(opt.state[model.fc1.weight]["momentum_buffer"], momentum)


def test_non_matrix_in_the_numuon_group_is_refused():
    model = Tiny()
    with pytest.raises(NumuonError, match=r"fc1.bias.*not 2-D"):
        NuMuon([{"params": list(model.named_parameters()), "use_numuon": True}])
    with pytest.raises(NumuonError, match=r"params\[0\].*\(3, 3, 3\)"):
        NuMuon([nn.Parameter(torch.zeros(3, 3, 3))])


def test_nan_gradient_is_refused_and_nothing_changes():
    model = Tiny()
    opt = NuMuon(param_groups(model), rank_schedule=0.25)
    _train(model, opt, range(2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state_before = {
        k: v.clone() for k, v in opt.state[model.fc1.weight].items() if torch.is_tensor(v)
    }
    opt.zero_grad()
    _loss(model, 5).backward()
    model.fc2.weight.grad[0, 0] = float("nan")
    with pytest.raises(NumuonError, match=r"fc2.weight.*NaN"):
        opt.step()
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    for k, v in state_before.items():
        assert torch.equal(opt.state[model.fc1.weight][k], v), k
    _train(model, opt, range(5, 6))  # a finite step afterwards works
    assert all(torch.isfinite(v).all() for v in model.state_dict().values())


def test_nan_in_the_adamw_group_is_refused_too():
    model = Tiny()
    opt = NuMuon(param_groups(model))
    _loss(model, 0).backward()
    model.emb.weight.grad[1, 1] = float("inf")
    with pytest.raises(NumuonError, match=r"emb\.weight"):
        opt.step()


def test_constant_schedule_object_is_accepted():
    p = nn.Parameter(torch.zeros(8, 8))
    opt = NuMuon([p], rank_schedule=Constant(0.5))
    p.grad = torch.ones(8, 8)
    opt.step()
    assert torch.isfinite(p).all()


# ------------------------------------------------------------------ the plumbing Muon users expect


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=40, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    torch.manual_seed(0)
    return GPT2LMHeadModel(config)


def test_gpt2_conv1d_weights_go_to_numuon_not_silently_to_adamw(recwarn):
    model = _gpt2()
    groups = param_groups(model)
    conv = [g for g in groups if g.get("transposed")]
    assert len(conv) == 1
    names = {n for n, _ in conv[0]["params"]}
    assert names == {
        f"transformer.h.{i}.{m}.weight"
        for i in range(2)
        for m in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
    }
    adamw = {n for g in groups if not g["use_numuon"] for n, _ in g["params"]}
    assert "transformer.wte.weight" in adamw  # embeddings (tied to the head) stay on AdamW
    assert "transformer.wpe.weight" in adamw
    assert not [w for w in recwarn if "param_groups" in str(w.message)]


def test_conv1d_step_is_the_transpose_of_the_linear_step(gen):
    """A Conv1D stores W as d_in x d_out: its update must be the Linear update transposed,
    with Muon's scale sqrt(d_out / d_in) read from the true orientation."""
    G = torch.randn(40, 24, generator=gen)  # d_out x d_in
    linear = nn.Parameter(torch.zeros(40, 24))
    conv = nn.Parameter(torch.zeros(24, 40))
    opt = NuMuon(
        [{"params": [linear]}, {"params": [conv], "transposed": True}], lr=1.0, rank_schedule=0.25
    )
    linear.grad, conv.grad = G.clone(), G.T.clone()
    opt.step()
    torch.testing.assert_close(conv.detach(), linear.detach().T, atol=1e-5, rtol=1e-5)
    s = torch.linalg.svdvals(linear.detach())
    assert float(s[0]) == pytest.approx((40 / 24) ** 0.5, rel=1e-4)


def test_compress_handles_gpt2_conv1d():
    from numuon.compression import LowRankLinear, compress

    model = _gpt2()
    ids = torch.randint(0, 40, (4, 16), generator=torch.Generator().manual_seed(0))
    for method in ("svd", "whitened"):
        small, info = compress(model, 0.4, method, calibration=[ids])
        assert 0.4 <= info["reduction"] < 0.5
        assert isinstance(small.transformer.h[0].attn.c_attn, LowRankLinear)
        assert torch.isfinite(small(input_ids=ids).logits).all()
    # full rank reproduces the Conv1D layer exactly (the orientation is right)
    from numuon.compression import truncated_svd_factors

    conv = model.transformer.h[0].mlp.c_fc
    A, B = truncated_svd_factors(conv.weight.T, 32)
    x = torch.randn(3, 32, generator=torch.Generator().manual_seed(1))
    low = LowRankLinear(A, B, conv.bias.detach())
    torch.testing.assert_close(low(x), conv(x), atol=1e-5, rtol=1e-5)


def test_unclaimed_matrices_are_warned_about():
    class Odd(Tiny):
        def __init__(self) -> None:
            super().__init__()
            self.mixer = nn.Parameter(torch.zeros(48, 48))
            self.kernel = nn.Parameter(torch.zeros(4, 3, 3, 3))

    with pytest.warns(UserWarning, match=r"2 parameter\(s\).*mixer \(48, 48\).*kernel"):
        groups = param_groups(Odd())
    adamw = {n for g in groups if not g["use_numuon"] for n, _ in g["params"]}
    assert {"mixer", "kernel"} <= adamw


def test_skip_step_option_skips_nonfinite_gradients_without_touching_anything():
    model = Tiny()
    opt = NuMuon(param_groups(model), rank_schedule=0.25, nonfinite="skip")
    _train(model, opt, range(2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    steps = int(opt.state[model.fc1.weight]["step"])
    opt.zero_grad()
    _loss(model, 5).backward()
    model.fc1.weight.grad[3, 3] = float("inf")
    with pytest.warns(UserWarning, match=r"skipped a step.*fc1.weight"):
        opt.step()
    assert opt.skipped_steps == 1
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert int(opt.state[model.fc1.weight]["step"]) == steps  # the schedule did not advance
    _train(model, opt, range(5, 6))
    assert int(opt.state[model.fc1.weight]["step"]) == steps + 1
    with pytest.raises(NumuonError, match="nonfinite"):
        NuMuon(param_groups(model), nonfinite="ignore")  # type: ignore[arg-type]


def test_fsdp2_dtensor_parameters_are_refused_in_one_line(tmp_path):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        p = nn.Parameter(distribute_tensor(torch.randn(8, 8), mesh, [Shard(0)]))
        with pytest.raises(NumuonError, match="DTensor") as exc:
            NuMuon([p])
        assert "\n" not in str(exc.value)
    finally:
        dist.destroy_process_group()


def test_muon_polar_control_is_numuon_at_full_rank(gen):
    """The like-for-like control: the same harness with the exact polar factor."""
    model_a, model_b = Tiny(), Tiny()
    a = build_optimizer("muon-polar", model_a, lr=0.02, adamw_lr=1e-2)
    b = NuMuon(param_groups(model_b), lr=0.02, rank_schedule=1.0, adamw_lr=1e-2,
               adamw_betas=(0.9, 0.95))  # fmt: skip
    _train(model_a, a, range(3))
    _train(model_b, b, range(3))
    for x, y in zip(model_a.parameters(), model_b.parameters(), strict=True):
        assert torch.equal(x, y)


def test_newton_schulz_reference_in_bfloat16_is_torch_muon_bit_for_bit(gen):
    """The bench's matched-precision control: NuMuon's harness with bfloat16 Newton-Schulz
    takes exactly torch.optim.Muon's step (momentum, decay, shape scale, addmm order)."""
    for shape in ((64, 32), (32, 96)):
        a = nn.Parameter(torch.randn(*shape, generator=gen))
        b = nn.Parameter(a.detach().clone())
        ours = NewtonSchulzMuon([a], lr=0.1, weight_decay=0.1, dtype=torch.bfloat16)
        ref = torch.optim.Muon([b], lr=0.1, momentum=0.95, weight_decay=0.1)
        for _ in range(3):
            G = torch.randn(*shape, generator=gen)
            a.grad, b.grad = G.clone(), G.clone()
            ours.step()
            ref.step()
        assert torch.equal(a.detach(), b.detach())


class Shapes(nn.Module):
    """Matrices of repeated shapes (batched together by foreach) and one of its own."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.ModuleList([nn.Linear(48, 96, bias=False) for _ in range(3)])
        self.b = nn.ModuleList([nn.Linear(96, 48, bias=False) for _ in range(2)])
        self.c = nn.Linear(48, 40)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for up, down in zip(self.a, self.b, strict=False):
            x = x + down(torch.tanh(up(x)))
        return self.c(torch.tanh(self.a[2](x)) @ self.b[0].weight.mT)


@pytest.mark.parametrize("rank", [0.25, 1.0])
@pytest.mark.parametrize("nesterov", [True, False])
def test_foreach_path_equals_the_per_tensor_path(rank, nesterov):
    """foreach=True (batched Krylov per shape, _foreach_ momentum/decay/step) takes the same
    steps as the per-tensor loop, Krylov warm starts included, over several steps."""
    models = [Shapes(), Shapes()]
    opts = [
        NuMuon(
            param_groups(m),
            lr=0.02,
            weight_decay=0.1,
            rank_schedule=rank,
            nesterov=nesterov,
            foreach=fe,
            adamw_lr=1e-2,
        )
        for m, fe in zip(models, (False, True), strict=True)
    ]
    for step in range(4):
        # 128 rows > 96: full-rank gradients (a polar factor of a rank-deficient matrix steps
        # along arbitrary null directions, which two SVD calls need not agree on).
        x = torch.randn(128, 48, generator=torch.Generator().manual_seed(step))
        for m, opt in zip(models, opts, strict=True):
            opt.zero_grad()
            m(x).square().mean().backward()
            opt.step()
    for (name, p), (_, q) in zip(
        models[0].named_parameters(), models[1].named_parameters(), strict=True
    ):
        torch.testing.assert_close(p, q, atol=2e-5, rtol=1e-4, msg=name)
    assert opts[0].directions_computed == opts[1].directions_computed == 4 * 6


def test_foreach_newton_schulz_subclass_loops_over_its_own_direction(gen):
    ps = [nn.Parameter(torch.zeros(32, 16)) for _ in range(2)]
    qs = [nn.Parameter(torch.zeros(32, 16)) for _ in range(2)]
    a, b = NewtonSchulzMuon(ps, foreach=True), NewtonSchulzMuon(qs, foreach=False)
    for p, q in zip(ps, qs, strict=True):
        G = torch.randn(32, 16, generator=gen)
        p.grad, q.grad = G.clone(), G.clone()
    a.step()
    b.step()
    for p, q in zip(ps, qs, strict=True):
        torch.testing.assert_close(p, q)


def test_bfloat16_krylov_products_stay_close_to_float32(gen):
    """matmul_dtype=bfloat16 (the bench's matched-precision NuMuon) is a rank-k step close to
    the float32 one."""
    G = torch.randn(96, 192, generator=gen) * torch.logspace(0, -2, 96)[:, None]
    d32 = _single(G, rank_schedule=0.25)
    d16 = _single(G, rank_schedule=0.25, matmul_dtype=torch.bfloat16)
    assert float((d16 - d32).norm() / d32.norm()) < 0.05
