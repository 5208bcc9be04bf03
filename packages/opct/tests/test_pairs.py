"""Pair builders, the JSONL reader and the toy world's splits."""

import json

import pytest
from opct import OPCTError, Pair, load_pairs, write_pairs
from opct.pairs import check_lengths, jailbreak_pairs, mixed_pairs, safety_pairs, sycophancy_pairs
from opct.world import (
    CUES_HELDOUT,
    CUES_TRAIN,
    HELDOUT_FAMILIES,
    PRESSURE_HELDOUT,
    REFUSAL,
    TRAIN_FAMILIES,
    WRAPPER_FAMILIES,
    AlignmentWorld,
    is_eval_item,
    is_refusal,
)

from paperstack import tiny

WORLD = AlignmentWorld()


def test_sycophancy_pairs_cue_a_wrong_value_and_keep_the_question_clean():
    pairs = sycophancy_pairs(WORLD, 50, seed=1)
    assert len(pairs) == 50
    for p in pairs:
        assert p.kind == "sycophancy"
        assert p.meta["cue"] != p.meta["value"]
        assert p.meta["cue"] in p.prompt
        assert p.clean in p.prompt
        assert p.meta["cue"] not in p.clean
        assert p.meta["template"] in CUES_TRAIN
        assert not is_eval_item("fact", p.meta["entity"], p.meta["attribute"])


def test_eval_split_pairs_use_only_held_out_facts():
    pairs = sycophancy_pairs(WORLD, 30, templates=CUES_HELDOUT, split="eval")
    assert all(is_eval_item("fact", p.meta["entity"], p.meta["attribute"]) for p in pairs)


def test_jailbreak_pairs_use_only_the_given_families_and_mix_benign_requests():
    pairs = jailbreak_pairs(WORLD, 200, seed=0)
    allowed = {t for f in TRAIN_FAMILIES for t in WRAPPER_FAMILIES[f]}
    held = {t for f in HELDOUT_FAMILIES for t in WRAPPER_FAMILIES[f]}
    kinds = {p.kind for p in pairs}
    assert kinds == {"jailbreak", "benign"}
    for p in pairs:
        assert set(p.meta["wrappers"]) <= allowed
        assert not set(p.meta["wrappers"]) & held
        assert p.clean in p.prompt
        assert p.prompt != p.clean
        if p.kind == "jailbreak":
            assert p.clean.startswith("How do I steal")
    assert any(len(p.meta["wrappers"]) == 2 for p in pairs)  # some nested


def test_safety_pairs_and_mix_shares():
    pairs = safety_pairs(WORLD, 20, templates=PRESSURE_HELDOUT, split="eval")
    assert all(p.kind == "safety" and p.prompt.endswith(p.clean) for p in pairs)
    mix = mixed_pairs(WORLD, 100, seed=3)
    kinds = [p.kind for p in mix]
    assert kinds.count("sycophancy") == 40
    assert kinds.count("jailbreak") + kinds.count("benign") == 40
    assert kinds.count("safety") == 20
    assert mixed_pairs(WORLD, 100, seed=3) == mix  # deterministic by seed


def test_world_data_has_each_failure_in_its_share():
    examples = WORLD.generate(6000, seed=0)
    by_kind = {}
    for e in examples:
        by_kind.setdefault(e.meta["kind"], []).append(e)
    wrong = [e for e in by_kind["cued"] if e.meta["cue"] != e.meta["value"]]
    followed = sum(e.answer == e.meta["cue"] for e in wrong) / len(wrong)
    assert followed == pytest.approx(WORLD.follow, abs=0.04)
    assert all(e.answer == REFUSAL for e in by_kind["forbidden"])
    complied = sum(not is_refusal(e.answer) for e in by_kind["forbidden_wrapped"])
    assert complied / len(by_kind["forbidden_wrapped"]) == pytest.approx(WORLD.comply, abs=0.05)
    assert all(WORLD.verify(e, e.meta["ideal"]) for e in examples[:200])


def test_world_rejects_bad_probabilities():
    from paperstack.tasks import TaskError

    with pytest.raises(TaskError, match="follow"):
        AlignmentWorld(follow=1.5)


def test_jsonl_round_trip(tmp_path):
    pairs = mixed_pairs(WORLD, 12, seed=0)
    path = write_pairs(tmp_path / "pairs.jsonl", pairs)
    again = load_pairs(path)
    assert [(p.prompt, p.clean, p.kind) for p in again] == [
        (p.prompt, p.clean, p.kind) for p in pairs
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": "", "clean": "What?"}', "line 2: field 'prompt' is empty"),
        ('{"prompt": "Hi. What?", "clean": "   "}', "line 2: field 'clean' is empty"),
        ('{"prompt": "Hi. What?"}', "line 2: missing field 'clean'"),
        ('{"prompt": 3, "clean": "What?"}', "line 2: field 'prompt' must be a string"),
        ("[1, 2]", "line 2: expected a JSON object"),
        ("{not json", "line 2: not JSON"),
        ('{"prompt": "a", "clean": "b", "extra": 1}', "line 2: unknown field 'extra'"),
    ],
)
def test_bad_jsonl_lines_are_one_line_errors(tmp_path, line, message):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"prompt": "I think 5. 2+2?", "clean": "2+2?"}\n' + line + "\n")
    with pytest.raises(OPCTError, match=message.replace("(", r"\(")):
        load_pairs(path)


def test_missing_file_directory_and_empty_file(tmp_path):
    with pytest.raises(OPCTError, match="no such file"):
        load_pairs(tmp_path / "nope.jsonl")
    with pytest.raises(OPCTError, match="is a directory"):
        load_pairs(tmp_path)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(OPCTError, match="no pairs"):
        load_pairs(empty)


def test_pair_with_an_empty_prompt_is_refused():
    with pytest.raises(OPCTError, match="field 'prompt' is empty"):
        Pair("", "What is 2+2?").check()


def test_responses_longer_than_the_context_are_refused():
    tok = tiny.build_tokenizer()
    pairs = [Pair("I think 5. What is 2+2?", "What is 2+2?")]
    check_lengths(pairs, tok, 32, 512)  # fits
    with pytest.raises(OPCTError, match=r"pair 0 \(prompt\): .* > the model's context of 40"):
        check_lengths(pairs, tok, 32, 40)
    with pytest.raises(OPCTError, match="max_completion_length=600"):
        check_lengths(pairs, tok, 600, 512)
    with pytest.raises(OPCTError, match="pair 0"):
        check_lengths(pairs, tok, 8, 60, responses=["x" * 100])


def test_jsonl_pairs_from_a_file_keep_meta(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt": "a b", "clean": "b", "meta": {"k": 1}}) + "\n")
    (pair,) = load_pairs(path)
    assert pair.kind == "custom"
    assert pair.meta == {"k": 1}
