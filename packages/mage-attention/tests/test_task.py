import pytest
import torch
from mage_attention import MageError
from mage_attention.task import BOS, SEP, RetrievalTask


def test_every_answer_is_the_binding_of_its_question_key():
    task = RetrievalTask(prompt_length=64, pairs=10, queries=8, num_keys=12, num_values=5,
                         num_fillers=6)  # fmt: skip
    batch = task.generate(20, seed=3)
    assert batch.prompt.shape == (20, 64)
    assert batch.answers.shape == (20, 8)
    assert (batch.prompt[:, 0] == BOS).all()
    assert (batch.prompt[:, 64 - 8 - 1] == SEP).all()
    pos = task.binding_positions(batch)
    for row, ans, p in zip(batch.prompt, batch.answers, pos, strict=True):
        bindings = {int(row[j]) for j in p}
        assert len(bindings) == 10
        keys = {(b - task._binding0) // 5: b for b in bindings}
        assert len(keys) == 10  # distinct keys
        for q, a in zip(row[-8:].tolist(), ans.tolist(), strict=True):
            assert keys[q - task._key0] == a  # the answer is the binding of the asked key


def test_generation_is_deterministic_by_seed_and_length():
    task = RetrievalTask(prompt_length=64)
    assert torch.equal(task.generate(4, 1).prompt, task.generate(4, 1).prompt)
    assert not torch.equal(task.generate(4, 1).prompt, task.generate(4, 2).prompt)
    assert task.at_length(128).generate(2, 0).prompt.shape == (2, 128)


def test_a_prompt_too_short_for_its_bindings_is_refused():
    with pytest.raises(MageError, match="leaves 14 context tokens for 24 bindings"):
        RetrievalTask(prompt_length=32)


def test_records_answer_with_the_value_q_after_the_asked_key():
    """``records`` (the demo's layout): ``k_1..k_Q v_1..v_Q``, the answer is the value ``Q``
    positions after the asked key."""
    task = RetrievalTask(prompt_length=64, pairs=8, queries=4, num_keys=12, num_values=5,
                         num_fillers=6, in_block=True, records=True)  # fmt: skip
    batch = task.generate(20, seed=3)
    assert batch.prompt.shape == (20, 64 + 4)
    assert (batch.prompt[:, 63] == SEP).all()
    assert task.vocab_size == 4 + 12 + 5 + 6  # no binding tokens
    pos = task.binding_positions(batch)
    assert pos.shape == (20, 8)
    for row, ans, p in zip(batch.prompt, batch.answers, pos, strict=True):
        value_of = {int(row[j - 4]): int(row[j]) for j in p.tolist()}
        assert len(value_of) == 8  # distinct keys, each 4 positions before its value
        assert all(task._key0 <= k < task._value0 for k in value_of)
        for q, a in zip(row[-4:].tolist(), ans.tolist(), strict=True):
            assert value_of[q] == a


def test_records_need_two_context_tokens_per_binding():
    with pytest.raises(MageError, match="for 24 bindings in records of 8 tokens"):
        RetrievalTask(prompt_length=40, queries=4, in_block=True, records=True)
    with pytest.raises(MageError, match="must be a multiple of it"):
        RetrievalTask(queries=5, in_block=True, records=True)
