"""The compression baselines hit the budget, keep the answer line, and differ in what they keep."""

import random

import pytest
from minpath import MinPathError, verbose_traces
from minpath.baselines import (
    UnigramImportance,
    budget_for,
    random_drop,
    split_conclusion,
    token_skip,
    truncate,
)

TRACES = verbose_traces(60, seed=0)
RAW = [t.cot for t in TRACES]


@pytest.mark.parametrize("ratio", [0.3, 0.5, 0.8])
def test_every_baseline_fits_its_budget_and_keeps_the_answer(ratio):
    importance = UnigramImportance(RAW)
    rng = random.Random(0)
    for t in TRACES:
        budget = budget_for(t.cot, ratio)
        for text in (truncate(t.cot, budget), random_drop(t.cot, budget, rng),
                     token_skip(t.cot, budget, importance)):  # fmt: skip
            assert len(text) <= budget + 1  # a newline of slack where the head is empty
            assert text.splitlines()[-1] == f"Answer: {t.value}"


def test_truncation_keeps_the_head():
    cot = RAW[0]
    lines, _answer = split_conclusion(cot)
    out = truncate(cot, budget_for(cot, 0.5))
    assert "\n".join(lines).startswith(out.rsplit("\n", 1)[0])


def test_random_drop_drops_whole_steps():
    cot = RAW[1]
    out = random_drop(cot, budget_for(cot, 0.5), random.Random(1))
    assert set(out.splitlines()) <= set(cot.splitlines())


def test_token_skip_drops_the_least_surprising_pieces_first():
    importance = UnigramImportance(RAW)
    assert importance("=") < importance("Check") < importance("9876")
    out = token_skip("Check: 2*4=8\nAnswer: 8", 14, importance)
    assert out.endswith("Answer: 8")
    assert "=" not in out.splitlines()[0]


def test_full_budget_changes_nothing_and_bad_ratio_is_an_error():
    cot = RAW[2]
    assert truncate(cot, len(cot)) == cot
    with pytest.raises(MinPathError, match="ratio=0"):
        budget_for(cot, 0)
    with pytest.raises(MinPathError, match="no final answer"):
        split_conclusion("4*2=8")
