"""``accelerate launch --num_processes 2`` (gloo, CPU): OPCT trains data-parallel as on GPUs.

Each rank generates on its own shard of the pairs; DDP averages the gradients, so both ranks
end with the same student; the frozen teacher stays frozen on every rank.
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
def ranks(micro_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    command = [
        _accelerate(), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
        str(WORKER), str(micro_path), str(out),
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
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
