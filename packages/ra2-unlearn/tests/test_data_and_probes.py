"""The demo's splits mean what the paper means, and the robustness probes do what they say."""

from __future__ import annotations

import copy

import pytest
import torch
from ra2_unlearn.data import encode
from ra2_unlearn.modules import ablate_direction, capture_layers
from ra2_unlearn.probes import relearn, relearn_split


def test_adjacent_questions_ask_forget_entities_without_the_forgotten_domain(splits):
    forget_e = {e.meta["entity"] for e in splits.forget}
    assert forget_e == set(splits.forget_entities)
    assert {e.meta["entity"] for e in splits.adjacent} == forget_e
    assert all(e.meta["domain"] == splits.forget_domain for e in splits.forget)
    assert all(e.meta["domain"] != splits.forget_domain for e in splits.adjacent)
    retain_e = {e.meta["entity"] for e in splits.retain}
    eval_e = {e.meta["entity"] for e in splits.retain_eval}
    assert not (retain_e & forget_e)
    assert not (eval_e & forget_e)
    assert not (retain_e & eval_e)
    assert splits.chance == 0.1


def test_labels_cover_only_the_answer_and_eos(micro, splits):
    _, tok = micro
    enc = encode(tok, splits.forget[:1])[0]
    answer = [t for t, lab in zip(enc.input_ids, enc.labels, strict=True) if lab != -100]
    assert tok.decode(answer) == splits.forget[0].answer + tok.eos_token


def test_ablation_removes_the_direction_from_the_layer_output(micro):
    model, _ = micro
    x = torch.randint(10, 60, (2, 7))
    d = torch.randn(model.config.hidden_size)
    with ablate_direction(model, 0, d), capture_layers(model, [0]) as store:
        model(input_ids=x)
    along = store[0] @ (d / d.norm())
    assert along.abs().max() < 1e-4


def test_relearn_split_holds_out_whole_facts(splits):
    slice_, rest = relearn_split(splits.forget, 0.25, seed=0)
    facts = lambda xs: {(e.meta["entity"], e.meta["attribute"]) for e in xs}  # noqa: E731
    assert slice_
    assert rest
    assert not (facts(slice_) & facts(rest))


def test_relearn_leaves_the_input_model_untouched(micro, splits):
    model, tok = micro
    before = copy.deepcopy(model.state_dict())
    attacked = relearn(model, tok, splits.forget[:2], steps=2, batch_size=2)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert any(not torch.equal(before[k], v) for k, v in attacked.state_dict().items())


def test_probe_is_split_by_entity_and_its_control_labels_are_per_fact(micro, splits):
    from ra2_unlearn.probes import random_labels, value_probe

    model, tok = micro
    train = [e for e in splits.retain if e.meta["domain"] == splits.forget_domain]
    acc = value_probe(model, tok, train, splits.forget, layer=1, steps=5)
    assert acc.shape == (len(splits.forget),)
    with pytest.raises(ValueError, match="share entities"):
        value_probe(model, tok, train, train[:3], layer=1, steps=5)
    values = sorted({v for e in splits.forget for v in _values(e)})
    labels = random_labels(splits.forget, values, seed=0)
    by_fact: dict = {}
    for e, y in zip(splits.forget, labels, strict=True):
        assert y in _values(e)
        by_fact.setdefault((e.meta["entity"], e.meta["attribute"]), set()).add(y)
    assert all(len(ys) == 1 for ys in by_fact.values())  # every phrasing gets the same label


def _values(e):
    from paperstack.tasks import DOMAINS

    return DOMAINS[e.meta["domain"]][e.meta["attribute"]]


def test_wmdp_style_corpus_loads_text_and_encodes_every_token(micro, tmp_path):
    from ra2_unlearn.data import load_text_corpus

    _, tok = micro
    path = tmp_path / "bio-forget-corpus.jsonl"
    path.write_text(
        '{"title": "t", "abstract": "a", "text": "Bakiru keeps zinc.", "doi": "x"}\n\n'
        '{"title": "u", "text": "ok"}\n'
    )
    passages = load_text_corpus(path, min_chars=5)
    assert [p.answer for p in passages] == ["Bakiru keeps zinc."]
    assert passages[0].meta["title"] == "t"
    enc = encode(tok, passages)[0]
    assert enc.prompt_len == 0
    assert enc.labels == enc.input_ids
    assert tok.decode(enc.input_ids) == "Bakiru keeps zinc." + tok.eos_token
    txt = tmp_path / "notes.txt"
    txt.write_text("first passage\nstill first\n\nsecond passage\n")
    assert [p.answer for p in load_text_corpus(txt)] == [
        "first passage\nstill first",
        "second passage",
    ]
