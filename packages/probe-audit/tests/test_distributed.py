"""``accelerate launch --num_processes 2`` (gloo, CPU): GRPO and DPO auditors train
data-parallel through trl's trainers, each rank playing its own episodes."""

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
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    command = [
        _accelerate(), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
        str(WORKER), str(out),
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {
        o: [json.loads((out / f"{o}-rank{r}.json").read_text()) for r in (0, 1)]
        for o in ("grpo", "dpo")
    }


@pytest.mark.parametrize("objective", ["grpo", "dpo"])
def test_two_ranks_train_the_same_weights(ranks, objective):
    a, b = ranks[objective]
    assert [a["world"], b["world"]] == [2, 2]
    assert a["steps"] == b["steps"] == 2
    assert a["episodes"] > 0
    assert b["episodes"] > 0
    assert a["weights"] == pytest.approx(b["weights"], rel=1e-6)
    assert a["weights"][1] != pytest.approx(a["start"], rel=1e-9)  # and they did train
