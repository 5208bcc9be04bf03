"""RA^2's targets do not carry the forgotten answer: the patch test, and the pieces behind it."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from ra2_unlearn.anchors import AnchorBank, carrying_positions, knn_targets
from ra2_unlearn.config import UnlearnConfig
from ra2_unlearn.errors import UnlearnError
from ra2_unlearn.probes import teacher_forced_correct
from ra2_unlearn.trainer import build_anchor_bank


def test_patching_the_targets_into_the_frozen_model_removes_the_fact(knowing):
    """The patch test: replace the frozen model's layer-l states at the positions RA^2
    attracts by their targets. The filtered targets take the answer away; 0.1's unfiltered
    kNN targets (every token, no exclusion) leave it in place."""
    model, tok, splits = knowing
    before = teacher_forced_correct(model, tok, splits.forget)
    assert before.mean() >= 0.9  # premise: the model knows the facts
    filtered = UnlearnConfig(method="ra2", layer=1, k=4)
    unfiltered = UnlearnConfig(method="ra2", layer=1, k=4, attract="all", exclude_support=False)
    bank = build_anchor_bank(model, tok, splits.retain, filtered)
    after = teacher_forced_correct(model, tok, splits.forget, patch=(filtered, bank))
    kept = teacher_forced_correct(model, tok, splits.forget, patch=(unfiltered, bank))
    assert after.mean() <= 0.25
    assert kept.mean() >= 0.75
    # The adjacent questions are not patched and are untouched by construction; the frozen
    # model still answers them (the patch changes states only where the forget answer is).
    assert teacher_forced_correct(model, tok, splits.adjacent).mean() >= 0.9


def test_anchor_bank_stores_what_each_anchor_supports(knowing):
    model, tok, splits = knowing
    bank = build_anchor_bank(model, tok, splits.retain, UnlearnConfig(layer=1))
    assert bank.support is not None
    assert bank.support.shape == (bank.anchors.shape[0],)
    # Supports are the frozen model's predictions: the answers of the retain questions occur.
    first_chars = {tok.convert_tokens_to_ids(e.answer[0]) for e in splits.retain}
    assert first_chars & set(bank.support.tolist())


def test_excluded_anchors_are_never_neighbours():
    anchors = torch.tensor([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]])
    bank = AnchorBank(anchors, layer=0, mean=anchors.mean(0), support=torch.tensor([7, 7, 3]))
    t = bank.targets(torch.tensor([[0.1, 0.0]]), k=2, tau=None, exclude=torch.tensor([7]))
    assert torch.allclose(t, anchors[2:3])  # the only anchor that does not support token 7
    with pytest.raises(UnlearnError, match="every anchor supports"):
        knn_targets(anchors[:1], anchors[:2], 1, allowed=torch.zeros(1, 2, dtype=torch.bool))


def test_adaptive_temperature_gives_an_exact_match_only_part_of_the_weight():
    """Why exact twins are dropped instead of left to the kernel: with tau = the mean of the k
    squared distances, an anchor at distance 0 among seven at equal distance 1 gets
    1 / (1 + 7 exp(-8/7)), about 0.31, of the weight."""
    anchors = torch.cat([torch.zeros(1, 2), torch.tensor([[1.0, 0.0]]).expand(7, 2)])
    t = knn_targets(torch.zeros(1, 2), anchors, k=8)
    weight_on_twin = 1 - float(t[0, 0])
    assert weight_on_twin == pytest.approx(1 / (1 + 7 * math.exp(-8 / 7)), rel=1e-4)
    bank = AnchorBank(anchors, layer=0, mean=anchors.mean(0))
    assert bank.twins(torch.tensor([[0.0, 0.0], [0.5, 0.0]])).tolist() == [True, False]


def test_carrying_positions_are_where_the_frozen_model_predicts_the_label():
    labels = torch.tensor([[-100, -100, 5, 6, 2]])  # 2 = EOS
    logits = torch.zeros(1, 5, 8)
    logits[0, 1, 5] = 1.0  # position 1 predicts label 5: carries
    logits[0, 2, 4] = 1.0  # position 2 predicts 4, label is 6: does not
    logits[0, 3, 2] = 1.0  # position 3 predicts EOS: the end of an answer is not the fact
    assert carrying_positions(logits, labels, stop_ids=[2]).tolist() == [
        [False, True, False, False, False]
    ]


def test_ra2_attracts_only_carrying_positions_during_training(knowing):
    from ra2_unlearn.trainer import unlearn

    model, tok, splits = knowing
    res = unlearn(model, tok, splits.forget, splits.retain,
                  UnlearnConfig(method="ra2", layer=1, k=4), steps=2, lr=1e-2,
                  batch_size=4)  # fmt: skip
    answer_tokens = max(len(e.answer) for e in splits.forget) * 4
    assert 0 < res.log[0]["attracted"] <= answer_tokens


def test_value_attraction_keeps_only_carrying_positions_before_the_value():
    """``attract="value"``: of the carrying positions, only those whose next token is in the
    example's value span (the capital, not the template words a model's own sentence also
    carries)."""
    from ra2_unlearn.trainer import ra2_positions

    labels = torch.tensor([[-100, 5, 6, 7, 2]])  # "The", "capital", "Paris", EOS
    logits = torch.zeros(1, 5, 8)
    for t, nxt in ((0, 5), (1, 6), (2, 7)):  # the frozen model predicts every answer token
        logits[0, t, nxt] = 1.0
    side = {"attention_mask": torch.ones(1, 5, dtype=torch.long), "labels": labels,
            "value_mask": torch.tensor([[False, False, False, True, False]])}  # fmt: skip
    carrying, _ = ra2_positions(UnlearnConfig(method="ra2", layer=0), None, torch.zeros(1, 5, 2),
                                logits, side)  # fmt: skip
    value, exclude = ra2_positions(UnlearnConfig(method="ra2", layer=0, attract="value"), None,
                                   torch.zeros(1, 5, 2), logits, side)  # fmt: skip
    assert carrying.tolist() == [[True, True, True, False, False]]
    assert value.tolist() == [[False, False, True, False, False]]
    assert exclude.tolist() == [7]  # the value token is what its anchors must not support
    with pytest.raises(UnlearnError, match="value_mask"):
        ra2_positions(UnlearnConfig(method="ra2", layer=0, attract="value"), None,
                      torch.zeros(1, 5, 2), logits, {k: v for k, v in side.items()
                                                     if k != "value_mask"})  # fmt: skip


def test_value_attraction_needs_examples_that_name_their_value(knowing):
    from ra2_unlearn.trainer import unlearn

    model, tok, splits = knowing
    config = UnlearnConfig(method="ra2", layer=1, k=4, attract="value")
    unnamed = [replace(e, meta={k: v for k, v in e.meta.items() if k != "value"})
               for e in splits.forget]  # fmt: skip
    with pytest.raises(UnlearnError, match="no forget example has a value span"):
        unlearn(model, tok, unnamed, splits.retain, config, steps=1, lr=1e-2, batch_size=4)
    named = splits.forget  # the fact world's examples name their value
    assert all(e.meta["value"] == e.answer for e in named)
    res = unlearn(model, tok, named, splits.retain, config, steps=2, lr=1e-2, batch_size=4)
    carrying = unlearn(model, tok, named, splits.retain, replace(config, attract="carrying"),
                       steps=2, lr=1e-2, batch_size=4)  # fmt: skip
    assert 0 < res.log[0]["attracted"] <= carrying.log[0]["attracted"]
