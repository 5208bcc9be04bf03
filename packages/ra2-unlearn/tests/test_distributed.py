"""The Trainer under ``accelerate launch --num_processes 2`` on the CPU (gloo backend)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "scripts" / "ddp_unlearn.py"


METHODS = ("ra2", "rmu", "npo")


def test_two_process_accelerate_run_keeps_the_ranks_in_step(tmp_path):
    pytest.importorskip("accelerate")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "ACCELERATE_USE_CPU": "true"}  # fmt: skip
    # accelerate's --cpu starts one process; --multi_gpu with 2 processes goes through
    # torch.distributed.run, and on a machine without CUDA the processes join over gloo.
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
        "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(_free_port()), str(SCRIPT), str(tmp_path), ",".join(METHODS),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for method in METHODS:
        ranks = [json.loads((tmp_path / f"{method}-rank{r}.json").read_text()) for r in (0, 1)]
        assert [r["world_size"] for r in ranks] == [2, 2]
        assert {r["backend"] for r in ranks} == {"gloo"}
        assert [r["steps"] for r in ranks] == [3, 3]
        assert ranks[0]["changed"], f"{method}: training changed nothing"
        if method in ("ra2", "rmu"):
            assert all("mlp.down_proj" in n for n in ranks[0]["changed"])
        # DDP averaged the gradients: both ranks end with the same weights, though each saw
        # different batches (their losses differ).
        assert ranks[0]["weights"] == pytest.approx(ranks[1]["weights"], rel=1e-6, abs=1e-7)
        assert ranks[0]["losses"] != ranks[1]["losses"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
