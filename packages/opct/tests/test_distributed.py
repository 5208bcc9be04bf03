"""``accelerate launch --num_processes 2`` (gloo, CPU): OPCT trains data-parallel as on GPUs.

Each rank generates on its own shard of the pairs; DDP averages the gradients, so both ranks
end with the same student; the frozen teacher stays frozen on every rank.
"""

import json
from pathlib import Path

import pytest

from paperstack.testing import accelerate_launch

WORKER = Path(__file__).with_name("ddp_worker.py")


@pytest.fixture(scope="module")
def ranks(micro_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    accelerate_launch(WORKER, micro_path, out)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_two_ranks_ran_the_same_steps_on_different_shards(ranks):
    assert [r["world"] for r in ranks] == [2, 2]
    assert [r["steps"] for r in ranks] == [2, 2]
    assert ranks[0]["prompts"]
    assert ranks[1]["prompts"]
    assert ranks[0]["prompts"] != ranks[1]["prompts"]  # the sampler shards the pairs
    for r in ranks:
        assert len(r["divergence"]) >= 2
        assert all(d >= 0 for d in r["divergence"])


def test_ranks_end_with_the_same_student_and_an_untouched_teacher(ranks):
    a, b = ranks
    assert a["start"] == b["start"]
    assert a["student"] != pytest.approx(a["start"], rel=1e-9)  # training moved the student
    assert a["student"] == pytest.approx(b["student"], rel=1e-6)  # gradients were all-reduced
    for r in ranks:
        assert r["teacher_after"] == r["teacher_before"] == r["start"]
