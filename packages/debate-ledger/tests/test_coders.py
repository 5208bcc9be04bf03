import pytest
from debate_ledger.coders import code_answer
from debate_ledger.schemas import LedgerError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I think the answer is (C).", "C"),
        ("Agent 2 said (A), but my final answer: B", "B"),
        ("The options (A) and (B) are close; I pick (B)", "B"),
        ("D", "D"),
        ("(B)", "B"),
        ("ANSWER: C", "C"),
    ],
)
def test_letter_v1_known_answers(text, expected):
    assert code_answer(text, 4) == expected


@pytest.mark.parametrize("text", ["no idea", "answer is a dog", "Answer: E", "(F)", "", "b)"])
def test_parse_failure_is_recorded_not_guessed(text):
    assert code_answer(text, 4) is None


def test_strict_coder_refuses_disagreeing_letters():
    assert code_answer("(A) or (B)", 4, "strict-paren-v1") is None
    assert code_answer("(B), yes (B)", 4, "strict-paren-v1") == "B"


def test_unknown_coder_is_a_clear_error():
    with pytest.raises(LedgerError, match="unknown coder 'nope'"):
        code_answer("(A)", 4, "nope")
