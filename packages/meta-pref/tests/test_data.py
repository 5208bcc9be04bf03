"""Multilingual preference JSONL: round trip, and one clear error for each kind of bad input
(identical chosen and rejected, unknown language codes, languages with no pairs, bad lines)."""

import pytest
from meta_pref import (
    MetaPrefError,
    PreferencePair,
    by_language,
    check_pairs,
    load_pairs,
    select_languages,
    write_pairs,
)
from meta_pref.cli import main


def test_jsonl_round_trip(tmp_path, world):
    pairs = world.pairs("s1", 5, seed=0) + world.pairs("near", 3, seed=0)
    path = write_pairs(tmp_path / "pairs.jsonl", pairs)
    assert load_pairs(path) == pairs
    assert {k: len(v) for k, v in by_language(load_pairs(path)).items()} == {"s1": 5, "near": 3}


def test_identical_chosen_and_rejected_is_one_error(tmp_path):
    same = PreferencePair("sw", "ab", "cd", "cd")
    with pytest.raises(MetaPrefError, match="chosen and rejected are identical"):
        check_pairs([same])
    path = tmp_path / "p.jsonl"
    path.write_text('{"lang": "sw", "prompt": "ab", "chosen": "cd", "rejected": "cd"}\n')
    with pytest.raises(MetaPrefError, match=r"line 1: chosen and rejected are identical"):
        load_pairs(path)


def test_unknown_language_code_is_one_error(world):
    with pytest.raises(MetaPrefError, match=r"unknown language code 'zz'.*s1"):
        world.language("zz")
    tasks = {"s1": world.pairs("s1", 2, seed=0)}
    with pytest.raises(MetaPrefError, match="unknown language code 'xx' for source"):
        select_languages(tasks, ["s1", "xx"], "source")


def test_language_with_no_pairs_is_one_error():
    with pytest.raises(MetaPrefError, match="target 'yo' has no pairs"):
        select_languages({"yo": []}, ["yo"], "target")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json\n", "line 1: not JSON"),
        ('{"lang": "sw", "prompt": "a", "chosen": "b"}\n', "line 1: missing field 'rejected'"),
        (
            '\n{"lang": "", "prompt": "a", "chosen": "b", "rejected": "c"}\n',
            "line 2: field 'lang' is empty",
        ),
        ('{"lang": 3, "prompt": "a", "chosen": "b", "rejected": "c"}\n', "not a string"),
        ("[1, 2]\n", "expected a JSON object"),
        ("\n\n", "no pairs"),
    ],
)
def test_bad_lines_name_the_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(MetaPrefError, match=message) as exc:
        load_pairs(path)
    assert str(path) in str(exc.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(MetaPrefError, match="no such file"):
        load_pairs(tmp_path / "nope.jsonl")
    with pytest.raises(MetaPrefError, match="is a directory"):
        load_pairs(tmp_path)


def test_pairs_command_writes_jsonl(tmp_path):
    path = tmp_path / "pairs.jsonl"
    assert main(["pairs", "--out", str(path), "-n", "7", "--languages", "s1,far"]) == 0
    pairs = load_pairs(path)
    assert len(pairs) == 14
    assert {p.lang for p in pairs} == {"s1", "far"}
