"""``accelerate launch --num_processes 2`` (gloo, CPU): the SFT harness trains data-parallel."""

import json
from pathlib import Path

import pytest

from paperstack.testing import accelerate_launch

WORKER = Path(__file__).with_name("ddp_worker.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    accelerate_launch(WORKER, out, env={"HF_DATASETS_DISABLE_PROGRESS_BARS": "1"})
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_two_ranks_train_the_same_steps(ranks):
    assert [r["world"] for r in ranks] == [2, 2]
    assert [r["steps"] for r in ranks] == [3, 3]
    assert ranks[0]["losses"]


def test_ranks_end_with_identical_weights(ranks):
    # DDP all-reduces the gradients: both replicas take the same updates on different data
    assert ranks[0]["weights"] == pytest.approx(ranks[1]["weights"], rel=1e-6)
