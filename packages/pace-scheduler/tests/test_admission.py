import numpy as np
import pytest
from pace_scheduler import PaceConfig, PaceController, PaceSchedulerError, StepView
from pace_scheduler.admission import batch_budget


def view(
    *,
    deadlines=(0.2, 0.2),
    beneficiary=(False, True),
    n_cand=4,
    cand_ctx=None,
    kv_free=10_000,
    seats=100,
    base=(64.0, 64_000.0, 0.0, 0.0),
):
    n_req = len(deadlines)
    ctx = np.full(n_cand, 1000.0) if cand_ctx is None else np.asarray(cand_ctx, float)
    return StepView(
        now=0.0,
        base=np.array(base),
        deadline=np.array(deadlines),
        tpot=np.full(n_req, 0.05),
        bank=np.array(deadlines) - 0.05,
        remaining=np.ones(n_req),
        decoding=np.ones(n_req, dtype=bool),
        beneficiary=np.array(beneficiary),
        cand_req=np.full(n_cand, n_req - 1),
        cand_rank=np.arange(1, n_cand + 1, dtype=float),
        cand_ctx=ctx,
        cand_width=np.ones(n_cand),
        cand_unfinished=np.full(n_cand, float(n_cand + 1)),
        cand_len=np.full(n_cand, 256.0),
        cand_blocks=np.full(n_cand, 16),
        kv_free_blocks=kv_free,
        seats_free=seats,
    )


def test_admits_every_branch_when_the_batch_has_slack(h200):
    mask = PaceController.from_model(h200).decide(view(deadlines=(10.0, 10.0)))
    assert mask.all()


def test_admits_nothing_when_a_protected_request_has_no_slack(h200):
    t_batch = float(h200.predict([64.0, 64_000.0, 0, 0]))
    mask = PaceController.from_model(h200).decide(view(deadlines=(t_batch * 0.99, 10.0)))
    assert not mask.any()


def test_externality_of_the_admitted_set_fits_the_budget(h200):
    # past the knee every extra branch costs beta + gamma*ctx + eps: the budget buys a few
    base = (400.0, 400_000.0, 0.0, 0.0)
    t_batch = float(h200.predict(base))
    per_branch = h200.beta + h200.gamma * 1000 + h200.eps
    deadline = t_batch + 2.5 * per_branch / 0.9
    v = view(deadlines=(deadline, 10.0), n_cand=6, base=base)
    ctl = PaceController.from_model(h200, PaceConfig(safety=0.9))
    mask = ctl.decide(v)
    assert mask.sum() == 2
    extra = np.array(base) + mask.sum() * np.array([1.0, 1000.0, 0, 0])
    assert float(h200.predict(extra)) - t_batch <= 0.9 * (deadline - t_batch)


def test_cheaper_branches_go_first(h200):
    base = (400.0, 400_000.0, 0.0, 0.0)
    t_batch = float(h200.predict(base))
    v = view(
        deadlines=(t_batch + 0.0006, 10.0),
        n_cand=3,
        cand_ctx=[8000.0, 100.0, 8000.0],
        base=base,
    )
    v.cand_rank = np.ones(3)  # three different requests' first branches
    mask = PaceController.from_model(h200).decide(v)
    assert mask.tolist() == [False, True, False]


def test_kv_blocks_limit_admission(h200):
    mask = PaceController.from_model(h200).decide(view(deadlines=(10.0, 10.0), kv_free=40))
    assert mask.sum() == 2  # 16 blocks each


def test_beneficiaries_and_lost_requests_do_not_set_the_budget(h200):
    v = view(deadlines=(-5.0, 10.0), beneficiary=(False, True))
    # request 0 is behind by 100 tokens of SLO: lost, so only the beneficiary's own SLO counts
    assert batch_budget(v, 0.02, late_tolerance=20.0) == pytest.approx(0.05 - 0.02)
    assert batch_budget(v, 0.02, late_tolerance=1e6) < 0


def test_decision_time_is_recorded_and_small(h200):
    ctl = PaceController.from_model(h200)
    for _ in range(20):
        ctl.decide(view(deadlines=(10.0, 10.0), n_cand=64))
    assert len(ctl.decision_seconds) == 20
    assert float(np.median(ctl.decision_seconds)) < 0.005


def test_config_rejects_bad_safety():
    with pytest.raises(PaceSchedulerError, match="safety"):
        PaceConfig(safety=0.0)


def test_a_deficit_is_spread_over_the_remaining_tokens(h200):
    # 0.1 s behind pace with 500 tokens to go: the step may still take tau - 0.2 ms
    v = view(deadlines=(0.05 - 0.1, 10.0))
    v.remaining = np.array([500.0, 500.0])
    t_batch = 0.02
    assert batch_budget(v, t_batch, late_tolerance=20.0, amortize=True) == pytest.approx(
        0.05 - 0.1 / 500 - t_batch
    )
    # the default, plain time bank charges it all to this step
    assert batch_budget(v, t_batch, late_tolerance=20.0) < 0
