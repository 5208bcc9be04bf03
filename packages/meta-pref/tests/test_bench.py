"""bench --quick: median step-time ratios with intervals, and the output check."""

import math

import pytest
from meta_pref.cli import main

from paperstack.records import load_results


def _claim(results, cid):
    return next(c for c in results.claims if c.id == cid)


@pytest.mark.slow
def test_bench_quick_writes_median_ratios_and_a_correctness_row(tmp_path):
    assert main(["bench", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "bench.json")
    ratio = results.row("fomaml/joint", "step_time_ratio")
    assert ratio.value > 1
    assert ratio.n == 6
    assert ratio.ci95 is not None
    assert ratio.ci95[0] <= ratio.value <= ratio.ci95[1]
    assert results.row("fomaml", "speedup_vs_joint").ci95 is not None
    assert results.row("fomaml", "matches_joint").value == 1.0
    assert _claim(results, "fomaml_output_agrees_with_joint").verdict == "held"


def test_a_diverged_meta_model_fails_the_check(monkeypatch):
    import meta_pref.meta as meta
    from meta_pref.bench import bench_steps

    train = meta.meta_train

    def diverged(model, *a, **k):  # a wrong method: its update blows the weights up
        result = train(model, *a, **k)
        with __import__("torch").no_grad():
            for p in model.parameters():
                p.mul_(1e3)
        return result

    monkeypatch.setattr(meta, "meta_train", diverged)
    rows, claims, _, _ = bench_steps(repeats=1, steps=1, seed=0)
    match = next(r for r in rows if r.system == "fomaml" and r.metric == "matches_joint")
    assert match.value == 0.0
    claim = next(c for c in claims if c.id == "fomaml_output_agrees_with_joint")
    assert claim.verdict == "not_held"


def test_agreement_is_inf_for_other_parameters():
    from meta_pref.bench import Trained, agreement

    ref = Trained({"w": (2,)}, True, 0.69)
    assert agreement(Trained({"w": (2,)}, True, 0.70), ref) == pytest.approx(0.01)
    assert math.isinf(agreement(Trained({"v": (2,)}, True, 0.69), ref))
    assert math.isinf(agreement(Trained({"w": (2,)}, False, 0.69), ref))
