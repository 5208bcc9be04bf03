import pytest
import torch
from saga_attention import SagaError
from saga_attention.recall import BOS, SEP, RecallTask


def test_every_answer_is_the_value_bound_to_its_query_key():
    task = RecallTask(pairs=10, queries=4, num_keys=12, num_values=5)
    batch = task.generate(50, seed=3)
    ids = batch.input_ids
    assert ids.shape == (50, task.length)
    assert (ids[:, 0] == BOS).all()
    assert (ids[:, 1 + task.pairs] == SEP).all()
    first_pair = 3 + task.num_keys + task.num_values
    for row in ids:
        pairs = row[1 : 1 + task.pairs] - first_pair
        bound = {int(p) // 5: int(p) % 5 for p in pairs}
        assert len(bound) == task.pairs  # distinct keys
        tail = row[2 + task.pairs :]
        for q, a in zip(tail[0::2].tolist(), tail[1::2].tolist(), strict=True):
            assert bound[q - 3] == a - 3 - task.num_keys


def test_labels_mark_only_the_answers():
    task = RecallTask(pairs=6, queries=3, num_keys=8, num_values=4)
    b = task.generate(4, seed=0)
    assert ((b.labels != -100).sum(1) == 3).all()
    assert torch.equal(
        b.labels.gather(1, b.answer_positions), b.input_ids.gather(1, b.answer_positions)
    )


def test_generation_is_deterministic_by_seed():
    task = RecallTask(pairs=6, queries=3, num_keys=8, num_values=4)
    assert torch.equal(task.generate(5, 1).input_ids, task.generate(5, 1).input_ids)
    assert not torch.equal(task.generate(5, 1).input_ids, task.generate(5, 2).input_ids)


def test_rejects_more_pairs_than_keys():
    with pytest.raises(SagaError, match="num_keys=4 must be >= pairs=5"):
        RecallTask(pairs=5, queries=2, num_keys=4, num_values=4)


def test_fillers_make_the_context_long_without_adding_bindings():
    task = RecallTask(pairs=5, queries=3, num_keys=8, num_values=4, context=60, num_fillers=6)
    batch = task.generate(20, seed=1)
    assert batch.input_ids.shape == (20, task.length) == (20, 2 + 60 + 6)
    assert (batch.input_ids[:, 61] == SEP).all()
    positions = task.binding_positions(batch)
    assert positions.shape == (20, 5)
    first_filler = 3 + 8 + 4 + 8 * 4
    context = batch.input_ids[:, 1:61]
    assert ((context >= first_filler) | (context >= first_filler - 32)).all()
    for row, pos in zip(batch.input_ids, positions, strict=True):
        bound = {(int(row[p]) - 15) // 4: (int(row[p]) - 15) % 4 for p in pos}
        assert len(bound) == 5
        tail = row[62:]
        for q, a in zip(tail[0::2].tolist(), tail[1::2].tolist(), strict=True):
            assert bound[q - 3] == a - 3 - 8  # every answer is still the bound value
        others = set(range(1, 61)) - set(pos.tolist())
        assert all(int(row[i]) >= first_filler for i in others)


def test_rejects_a_context_shorter_than_the_bindings():
    with pytest.raises(SagaError, match="context=4 must be >= pairs=5"):
        RecallTask(pairs=5, queries=2, num_keys=8, num_values=4, context=4)
