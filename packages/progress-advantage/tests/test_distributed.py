"""What trains runs under ``accelerate launch --num_processes 2`` (gloo, CPU): the RLOO policy.

``--multi_gpu`` is accelerate's multi-process launcher (torchrun); on a machine without CUDA
each process runs on the CPU and accelerate joins them with gloo. (``--cpu`` would start a
single process: accelerate only spreads CPU processes through MPI.)
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("ddp_worker.py")


def _accelerate() -> str:
    script = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.fail("the accelerate console script is not installed beside this python")
    return script


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "CUDA_VISIBLE_DEVICES": ""}  # fmt: skip
    command = [
        _accelerate(), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
        str(WORKER), str(out),
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
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
