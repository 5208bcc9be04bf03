"""``accelerate launch --num_processes 2`` (gloo, CPU): the profile is pooled across ranks."""

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
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_two_ranks_ran_two_steps(ranks):
    assert [r["world"] for r in ranks] == [2, 2]
    assert len(ranks[0]["calls"]) == len(ranks[1]["calls"]) >= 2
    assert len(ranks[0]["kl"]) == 2


def test_profile_is_the_all_reduced_sum_of_both_ranks(ranks):
    for a, b in zip(ranks[0]["calls"], ranks[1]["calls"], strict=True):
        both = [x + y for x, y in zip(a["local"], b["local"], strict=True)]
        assert a["global"] == pytest.approx(both, rel=1e-6)
        assert b["global"] == pytest.approx(both, rel=1e-6)
        # every token's sorted profile sums to 1, so the sums count the tokens of each rank
        assert a["tokens"] == pytest.approx(sum(a["local"]) + sum(b["local"]), rel=1e-6)
        pooled = [g / a["tokens"] for g in both]
        assert a["pooled"] == pytest.approx(pooled, rel=1e-6)
        assert b["pooled"] == pytest.approx(pooled, rel=1e-6)


def test_pooling_changes_the_profile_each_rank_would_see_alone(ranks):
    differs = False
    for a in ranks[0]["calls"]:
        alone = [x / sum(a["local"]) for x in a["local"]]
        differs |= alone != pytest.approx(a["pooled"], abs=1e-6)
    assert differs


def test_ranks_log_the_same_kl_and_end_with_the_same_weights(ranks):
    assert ranks[0]["kl"] == pytest.approx(ranks[1]["kl"], rel=1e-6)
    assert ranks[0]["weights"] == pytest.approx(ranks[1]["weights"], rel=1e-6)
