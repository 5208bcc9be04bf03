"""The real-model arm (numuon.real): the cached-prefix forward is the model's forward, and the
arm runs end to end (on a zoo checkpoint here; SmolLM2 in `numuon demo --real`)."""

from dataclasses import replace

import pytest
import torch
from numuon.real import QUICK_REAL, _freeze_all_but_last, prefix_states, run_real, suffix_logits
from numuon.toy import load_model

from paperstack.testing import zoo


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "mistral"])
def test_cached_prefix_then_trained_layers_give_the_full_models_logits(arch):
    model = load_model(str(zoo.checkpoint(arch)), 0)
    ids = torch.randint(0, 100, (2, 13), generator=torch.Generator().manual_seed(0))
    full = model(input_ids=ids[:, :-1]).logits
    start = _freeze_all_but_last(model, 1)
    h = prefix_states(model, ids, start)
    torch.testing.assert_close(suffix_logits(model, h, start), full, atol=1e-5, rtol=1e-5)


def test_real_arm_trains_both_arms_compresses_and_judges_paired_claims():
    cfg = replace(QUICK_REAL, model=str(zoo.checkpoint("llama")), steps=2)
    rows, claims, config = run_real(cfg, [0, 1], log=lambda _: None)
    table = {(r.system, r.metric, r.split): r for r in rows}
    for arm in ("muon", "numuon"):
        assert set(table[(arm, "loss_after_whitened", "reduce-60%")].seeds) == {"0", "1"}
        assert table[(arm, "relative_change", None)].value > 0
    assert table[("pretrained", "energy_kept", "reduce-60%")].value > 0
    assert {c.id for c in claims} >= {"real_numuon_beats_muon_after_whitened_60"}
    assert config["first_trained_layer"] >= 0
