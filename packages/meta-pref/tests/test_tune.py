"""`meta-pref tune`'s equal search for both initialisations, on a tiny budget (slow: every point
meta- or jointly trains and adapts with trl)."""

import dataclasses
import json

import pytest


@pytest.mark.slow
def test_tune_grids_scores_both_methods_the_same_way(tmp_path):
    from meta_pref.adapt import AdaptSettings
    from meta_pref.demo import QUICK
    from meta_pref.meta import MetaConfig
    from meta_pref.tune import tune_grids

    tiny = dataclasses.replace(
        QUICK, source_pairs=40, eval_pairs=20,
        meta=MetaConfig(outer_steps=1, meta_batch=2, inner_steps=1, support=8, query=8),
        rm_adapt=AdaptSettings(epochs=1, max_steps=1),
    )  # fmt: skip
    report = tune_grids(tmp_path, seeds=(98,), meta_grid={"inner_lr": (0.01,), "outer_lr": (5e-4,)},
                        joint_grid={"lr": (5e-4,), "batch": (8,)}, extensions=0, budget=tiny,
                        log=lambda *_: None)  # fmt: skip
    saved = json.loads((tmp_path / "tune-grids.json").read_text())
    assert saved["seeds"] == [98]
    assert saved["examples"] == 1 * 2 * 2 * 8
    for method in ("meta", "joint"):
        assert report[method]["configs"] == 1
        assert 0.0 <= report[method]["best"]["score"] <= 1.0
