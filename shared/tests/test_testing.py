"""paperstack.testing.accelerate_launch: two CPU ranks joined over gloo, or one clear failure."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from paperstack.testing import accelerate_launch

pytest.importorskip("accelerate")

WORKER = textwrap.dedent(
    """
    import json, os, sys
    import torch, torch.distributed as dist
    from paperstack.testing import end_distributed

    dist.init_process_group("gloo")
    t = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(t)
    out = {"rank": dist.get_rank(), "world": dist.get_world_size(),
           "backend": dist.get_backend(), "sum": t.item(), "cuda": torch.cuda.is_available(),
           "threads": os.environ["OMP_NUM_THREADS"], "extra": os.environ.get("EXTRA")}
    with open(os.path.join(sys.argv[1], f"rank{out['rank']}.json"), "w") as f:
        json.dump(out, f)
    end_distributed()
    """
)


def test_two_ranks_join_over_gloo_on_the_cpu(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    accelerate_launch(script, tmp_path, env={"EXTRA": "x"}, timeout=300)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    assert {r["backend"] for r in ranks} == {"gloo"}
    assert [r["sum"] for r in ranks] == [3.0, 3.0]  # 1 + 2, all-reduced across both ranks
    assert {r["cuda"] for r in ranks} == {False}
    assert {(r["threads"], r["extra"]) for r in ranks} == {("1", "x")}


def test_a_failing_rank_fails_the_test_with_its_stderr(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("import sys\nprint('rank broke: bad shard', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)broken\.py exited \d+:.*bad shard"):
        accelerate_launch(script, timeout=300)
