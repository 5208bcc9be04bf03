"""``accelerate launch --num_processes 2`` (gloo, CPU): the SFT harness trains data-parallel."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("ddp_worker.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    script = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.fail("the accelerate console script is not installed beside this python")
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}  # fmt: skip
    env.pop("CUDA_VISIBLE_DEVICES", None)
    command = [
        script, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
        str(WORKER), str(out),
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_two_ranks_train_the_same_steps(ranks):
    assert [r["world"] for r in ranks] == [2, 2]
    assert [r["steps"] for r in ranks] == [3, 3]
    assert ranks[0]["losses"]


def test_ranks_end_with_identical_weights(ranks):
    # DDP all-reduces the gradients: both replicas take the same updates on different data
    assert ranks[0]["weights"] == pytest.approx(ranks[1]["weights"], rel=1e-6)
