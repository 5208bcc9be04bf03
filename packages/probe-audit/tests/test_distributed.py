"""``accelerate launch --num_processes 2`` (gloo, CPU): GRPO and DPO auditors train
data-parallel through trl's trainers, each rank playing its own episodes."""

import json
from pathlib import Path

import pytest

from paperstack.testing import accelerate_launch

OBJECTIVES = ("grpo", "dpo")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Launch tests/ddp_worker.py on two CPU processes; each writes one record per objective."""
    out = tmp_path_factory.mktemp("probe-ddp")
    accelerate_launch(Path(__file__).parent / "ddp_worker.py", out)
    records = {}
    for objective in OBJECTIVES:
        records[objective] = [
            json.loads((out / f"{objective}-rank{rank}.json").read_text()) for rank in (0, 1)
        ]
    return records


# Slow (25 s in CI, over a minute on a loaded machine: two processes import trl and train):
# the fast suite covers the same trainers on one process (tests/test_trl_training.py).
@pytest.mark.slow
@pytest.mark.parametrize("objective", ["grpo", "dpo"])
def test_two_ranks_train_the_same_weights(ranks, objective):
    a, b = ranks[objective]
    assert [a["world"], b["world"]] == [2, 2]
    assert a["steps"] == b["steps"] == 2
    assert a["episodes"] > 0
    assert b["episodes"] > 0
    assert a["weights"] == pytest.approx(b["weights"], rel=1e-6)
    assert a["weights"][1] != pytest.approx(a["start"], rel=1e-9)  # and they did train
