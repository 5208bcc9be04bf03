from __future__ import annotations

import json

import pytest
from debate_ledger.ledger import from_rows
from debate_ledger.schemas import LedgerError, LedgerWriter, Question, read_ledger, read_questions


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _refused(raw, tmp_path, match, read=read_ledger):
    bad = tmp_path / "bad.jsonl"
    _write(bad, raw)
    with pytest.raises(LedgerError, match=match):
        read(bad)


def test_ledger_roundtrip_is_lossless(small_ledger, tmp_path):
    rows = read_ledger(small_ledger)
    copy = tmp_path / "copy.jsonl"
    with LedgerWriter(copy) as w:
        for r in rows:
            w.write(r)
    assert read_ledger(copy) == rows


def test_rejects_schema_version_mismatch(small_ledger, tmp_path):
    raw = _rows(small_ledger)
    raw[3]["schema"] = "debate-ledger/1"
    _refused(raw, tmp_path, r"bad.jsonl:4: schema 'debate-ledger/1' .* 0.1")


def test_rejects_unknown_option_naming_the_row(small_ledger, tmp_path):
    raw = _rows(small_ledger)
    raw[5]["answer"] = "H"
    _refused(raw, tmp_path, r":6: answer 'H' is not one of the options ABCD")


def test_rejects_an_answer_that_is_not_the_shown_option(small_ledger, tmp_path):
    raw = _rows(small_ledger)
    row = next(r for r in raw if r["shown"] is not None and r["order"] != "ABCD")
    row["answer"] = row["shown"]
    row["correct"] = row["answer"] == row["gold"]
    _refused(raw, tmp_path, "is not the option shown as")


def test_rejects_a_bad_order(small_ledger, tmp_path):
    raw = _rows(small_ledger)
    raw[0]["order"] = "AABC"
    _refused(raw, tmp_path, r":1: order 'AABC' is not a permutation of ABCD")


def test_rejects_duplicate_rows(small_ledger, tmp_path):
    raw = _rows(small_ledger)
    bad = tmp_path / "bad.jsonl"
    _write(bad, [*raw, raw[0]])
    with pytest.raises(
        LedgerError, match=rf":{len(raw) + 1}: duplicate row .* first seen on line 1"
    ):
        read_ledger(bad)


def test_rejects_contradictory_correct_flag(small_ledger, tmp_path):
    raw = _rows(small_ledger)
    row = next(r for r in raw if r["answer"] is not None and r["answer"] != r["gold"])
    row["correct"] = True
    _refused(raw, tmp_path, "correct=True contradicts")


def test_missing_round_is_an_error_naming_the_debate(small_ledger, tmp_path):
    raw = _rows(small_ledger)
    victim = next(r for r in raw if r["round"] == 2 and r["agent"] == 1)
    raw.remove(victim)
    bad = tmp_path / "bad.jsonl"
    _write(bad, raw)
    with pytest.raises(
        LedgerError, match=rf"debate {victim['debate_id']} has no row for agent 1 round 2"
    ):
        from_rows(read_ledger(bad))


def test_mixed_run_configurations_are_refused(small_ledger, tmp_path):
    raw = _rows(small_ledger)
    for r in raw:
        if r["model"] == "scripted/a" and r["question_id"] == raw[0]["question_id"]:
            r["run"] = "0123456789ab"
    _refused(raw, tmp_path, "mixes run configurations", lambda p: from_rows(read_ledger(p)))


def test_torn_tail_only_tolerated_when_resuming(small_ledger, tmp_path):
    text = small_ledger.read_text()
    torn = tmp_path / "torn.jsonl"
    torn.write_text(text + '{"schema": "debate-led')
    with pytest.raises(LedgerError, match="not JSON"):
        read_ledger(torn)
    assert len(read_ledger(torn, allow_torn_tail=True)) == len(text.splitlines())


def test_question_set_errors(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps({"id": "q1", "text": "t?", "options": ["a", "b"], "gold": "C"}) + "\n")
    with pytest.raises(LedgerError, match=r"q.jsonl:1: gold 'C' is not one of the options AB"):
        read_questions(p)
    with pytest.raises(LedgerError, match="no such file"):
        read_questions(tmp_path / "missing.jsonl")
    with pytest.raises(LedgerError, match="is a directory"):
        read_questions(tmp_path)


def test_render_with_an_order():
    q = Question(id="q", text="Pick", options=["w", "x", "y", "z"], gold="C")
    assert q.render() == "Pick A) w B) x C) y D) z"
    assert q.render("CADB") == "Pick A) y B) w C) z D) x"
    with pytest.raises(LedgerError, match="not a permutation"):
        q.render("CAD")
