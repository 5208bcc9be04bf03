"""The scorer reads the final answer: tricky replies a real model gives."""

from __future__ import annotations

import pytest
from orchestra_rl.tasks import answer_text, builtin_evaluator, instance_pool, option_letter

ADDITION = [
    ("90+36 = 126", "126"),  # was 90: the first number
    ("Answer: 126 / Confidence: 0.9 / easy", "126"),
    ("Answer: 126\nConfidence: 0.8\nI added the tens.", "126"),
    ("Answer: 90 + 36 = 126. Confidence 0.7", "126"),
    ("Answer: 126, because 90+36", "126"),
    ("Answer: The sum of 90 and 36 is 126", "126"),
    ("I think the answer is 126", "126"),
    ("The sum is 126.", "126"),
    ("90 plus 36 makes 126\n\nConfidence: 1", "126"),
    ("Answer: **126**", "126"),
    ("The answer is: 126.0", "126"),
    ("answer is 1,126.", "1126"),
    ("Answer: 7. Wait, recounting. Answer: 126", "126"),  # the last marker
    ("Confidence: 0.5\n126", "126"),  # a line with only the confidence holds no answer
    ("Confidence: 0.5", None),
    ("", None),
    ("Answer: none\nConfidence: 0.0", None),
]


@pytest.mark.parametrize(("reply", "expected"), ADDITION)
def test_addition_reads_the_final_number(reply: str, expected: str | None) -> None:
    inst = instance_pool("addition-plain", 1, "test", 0)[0]
    assert builtin_evaluator(("addition-plain",)).extract(inst, reply) == expected


def test_plain_addition_scores_the_sum_and_the_toy_kind_keeps_its_digit_order() -> None:
    inst = instance_pool("addition-plain", 1, "test", 0)[0]
    ev = builtin_evaluator(("addition-plain",))
    total = inst.meta["sum"]
    assert inst.prompt == f"What is {inst.meta['a']} + {inst.meta['b']}?"
    assert ev.score(inst, ev.extract(inst, f"{inst.meta['a']}+{inst.meta['b']} = {total}")) == 1.0
    assert ev.score(inst, ev.extract(inst, f"Answer: {total + 1}")) == 0.0
    toy = instance_pool("addition", 1, "test", 0)[0]  # "90+36=" is 09 + 63, reversed digits
    tev = builtin_evaluator(("addition",))
    assert tev.score(toy, tev.extract(toy, f"Answer: {toy.example.answer}")) == 1.0


CHOICES = ["owl", "hare", "bat", "eel"]
LETTERS = [
    ("D", "D"),
    ("Answer: D) eel", "D"),
    ("Answer: B / Confidence: 0.4", "B"),
    ("(C)", "C"),
    ("C. bat", "C"),
    ("Answer: **C**", "C"),
    ("d", "D"),
    ("I would say D) eel", "D"),
    ("The answer is (C).", "C"),
    ("eel", "D"),  # the option's text
    ("A bat", "C"),  # "A" the article, "bat" the option
    ("A) owl", "A"),
    ("owl or bat", None),  # two options named: no answer
    ("E", None),  # not an option
    ("Answer: none", None),
]


@pytest.mark.parametrize(("reply", "expected"), LETTERS)
def test_multiple_choice_reads_the_letter_or_the_option(reply: str, expected: str | None) -> None:
    assert option_letter(answer_text(reply), CHOICES) == expected
