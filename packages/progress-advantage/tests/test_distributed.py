"""What trains runs under ``accelerate launch --num_processes 2`` (gloo, CPU): the RLOO policy.

``--multi_gpu`` is accelerate's multi-process launcher (torchrun); on a machine without CUDA
each process runs on the CPU and accelerate joins them with gloo. (``--cpu`` would start a
single process: accelerate only spreads CPU processes through MPI.)
"""

import json
from pathlib import Path

import pytest

from paperstack.testing import accelerate_launch

WORKER = Path(__file__).with_name("ddp_worker.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    accelerate_launch(WORKER, out, timeout=900)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_two_ranks_trained_two_steps_together(ranks):
    assert [r["world"] for r in ranks] == [2, 2]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["steps"] for r in ranks] == [2, 2]


def test_ranks_log_the_gathered_objective_and_end_with_the_same_moved_weights(ranks):
    # trl gathers the rewards of both ranks before logging: one objective for both
    assert ranks[0]["objective"] == pytest.approx(ranks[1]["objective"], abs=1e-9)
    assert all(r["moved"] > 0 for r in ranks)
    # each rank sampled its own completions; the all-reduced gradient keeps them identical
    assert ranks[0]["checksum"] == pytest.approx(ranks[1]["checksum"], rel=1e-9)
