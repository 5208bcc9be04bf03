"""The adjacency variants of the fact splits and the adjacent-premise validation probe."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest
from ra2_unlearn.data import fact_splits
from ra2_unlearn.errors import UnlearnError

from paperstack.tasks import FactWorld

PROBE = Path(__file__).resolve().parents[1] / "benchmarks" / "adjacent_premise_probe.py"


def _probe_module():
    spec = importlib.util.spec_from_file_location("adjacent_premise_probe", PROBE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _keys(examples):
    return {(e.meta["entity"], e.meta["attribute"], e.meta["template"]) for e in examples}


def test_relation_adjacency_repartitions_the_never_unlearned_entities():
    world = FactWorld(n_entities=10)
    old = fact_splits(world, "science", n_forget=3)
    new = fact_splits(world, "science", n_forget=3, adjacency="relation")
    # the unlearning data are the same: one run serves both variants
    assert new.forget == old.forget
    assert new.retain == old.retain
    forget_e = set(new.forget_entities)
    # adjacent: the forget domain of entities neither forgotten nor in the retain loss
    seen = {e.meta["entity"] for e in new.retain}
    assert {e.meta["domain"] for e in new.adjacent} == {"science"}
    assert not {e.meta["entity"] for e in new.adjacent} & (forget_e | seen)
    # retain: the same entities' other domains, sharing no entity and no relation with forget
    assert "science" not in {e.meta["domain"] for e in new.retain_eval}
    assert {e.meta["entity"] for e in new.retain_eval} == {e.meta["entity"] for e in new.adjacent}
    # together they are the old retain-eval set, split by domain
    assert _keys(new.adjacent) | _keys(new.retain_eval) == _keys(old.retain_eval)
    assert not _keys(new.adjacent) & _keys(new.retain_eval)
    # the old adjacent set is the forget entities' other domains
    assert {e.meta["entity"] for e in old.adjacent} == forget_e
    with pytest.raises(UnlearnError, match="adjacency"):
        fact_splits(world, "science", n_forget=3, adjacency="topic")


def test_probe_refuses_reported_seeds(knowing):
    mod = _probe_module()
    model, tok, splits = knowing
    with pytest.raises(ValueError, match=">= 1000"):
        mod.probe(model, tok, splits.world, mod.TINY, [2, 1001], 1000, ("ga",), log=lambda m: None)
    with pytest.raises(ValueError, match="calibrates"):
        mod.probe(model, tok, splits.world, mod.TINY, [1000], 1000, ("ga",), log=lambda m: None)


def test_probe_smoke_measures_both_variants_on_one_unlearning_run(knowing):
    """Tiny size: a micro model that knows a 6-entity world, one baseline, two seeds."""
    mod = _probe_module()
    model, tok, splits = knowing
    settings = replace(mod.TINY, steps=3, eval_every=3, lr_grid=(1.0,))
    out = mod.probe(
        model, tok, splits.world, settings, [1001, 1002], 1000, ("ga",), log=lambda m: None
    )
    assert set(out["accuracy"]) == {"entity", "relation"}
    # the model knows the world before unlearning: every set near 1
    for v in ("entity", "relation"):
        assert min(out["original"][v].values()) >= 0.9, out["original"]
    rows = {(r["system"], r["metric"]): r for r in out["rows"]}
    for v in ("entity", "relation"):
        # the forget set is the same in both variants, so are its per-seed accuracies
        for b in ("ga",):
            per_seed = out["accuracy"][v][b]
            assert per_seed.keys() == {1001, 1002}
            gaps = {str(s): m["retain"] - m["adjacent"] for s, m in per_seed.items()}
            assert rows[(f"{v}/{b}", "retain_minus_adjacent")]["seeds"] == pytest.approx(gaps)
            assert (
                out["accuracy"][v][b][1001]["forget"]
                == out["accuracy"]["entity"][b][1001]["forget"]
            )
        pooled = rows[(f"{v}/baselines-mean", "retain_minus_adjacent")]
        lo, hi = pooled["ci95"]
        assert lo <= pooled["value"] <= hi
    claims = {c["id"]: c for c in out["claims"]}
    assert set(claims) == {"premise_entity", "premise_relation", "relation_gap_exceeds_entity_gap"}
    assert all(c["verdict"] in {"held", "not_held", "inconclusive"} for c in claims.values())
    assert out["calibration"]["ga"]["strength"]["steps"] <= 3
    assert "| premise_relation |" in mod.markdown(out)


def test_demo_adjacency_defaults_to_relation_and_the_flag_selects_entity():
    from types import SimpleNamespace

    from ra2_unlearn.demo import FULL, settings_for

    def run(adjacency):
        args = SimpleNamespace(steps=None, methods=None, adjacency=adjacency)
        return SimpleNamespace(quick=False, seeds=[0, 1, 2], args=args)

    assert FULL.adjacency == "relation"
    assert settings_for(run(None)).adjacency == "relation"
    assert settings_for(run("entity")).adjacency == "entity"
