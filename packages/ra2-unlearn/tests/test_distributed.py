"""The Trainer under ``accelerate launch --num_processes 2`` on the CPU (gloo backend)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paperstack.testing import accelerate_launch

SCRIPT = Path(__file__).parent / "scripts" / "ddp_unlearn.py"


METHODS = ("ra2", "rmu", "npo")


def test_two_process_accelerate_run_keeps_the_ranks_in_step(tmp_path):
    pytest.importorskip("accelerate")
    accelerate_launch(SCRIPT, tmp_path, ",".join(METHODS), env={"ACCELERATE_USE_CPU": "true"})
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
