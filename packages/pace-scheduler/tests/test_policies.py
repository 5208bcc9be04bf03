import numpy as np
import pytest
from pace_scheduler import PaceSchedulerError, make_policy
from test_admission import view


def test_irp_off_never_admits():
    assert not make_policy("irp-off").admit(view(deadlines=(10.0, 10.0))).any()


def test_irp_eager_admits_all_that_fit_the_kv_cache():
    assert make_policy("irp-eager").admit(view(kv_free=10_000)).all()
    assert make_policy("irp-eager").admit(view(kv_free=33)).sum() == 2


def test_per_request_cap_counts_running_branches():
    v = view(n_cand=4)  # width 1 already running
    assert make_policy("cap-2").admit(v).sum() == 1
    assert make_policy("cap-4").admit(v).sum() == 3


def test_global_cap_counts_extra_sequences_in_the_batch():
    v = view(n_cand=4)
    v.extra_lanes = 62
    assert make_policy("global-64").admit(v).sum() == 2


def test_pace_needs_a_model_and_names_are_checked(h200):
    assert make_policy("pace", h200).name == "pace"
    with pytest.raises(PaceSchedulerError, match="latency model"):
        make_policy("pace")
    with pytest.raises(PaceSchedulerError, match="cap-N"):
        make_policy("cap-x")
    with pytest.raises(PaceSchedulerError, match=">= 1"):
        make_policy("cap-0")


def test_every_policy_returns_a_mask_per_candidate(h200):
    for name in ("irp-off", "irp-eager", "cap-2", "global-8", "pace"):
        mask = make_policy(name, h200).admit(view(n_cand=5))
        assert mask.shape == (5,)
        assert mask.dtype == np.bool_
