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


TEARDOWN = textwrap.dedent(
    """
    import sys, time
    import torch.distributed as dist
    from paperstack.testing import end_distributed

    dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
    if sys.argv[2] == "hang":
        dist.destroy_process_group = lambda *a, **k: time.sleep(600)  # a peer never answers
    else:
        real = dist.destroy_process_group
        def logged(*a, **k):
            real(*a, **k)
            print("destroyed", dist.is_initialized(), flush=True)
        dist.destroy_process_group = logged
    print("results written", flush=True)
    end_distributed(timeout=1)
    print("not reached")
    """
)


@pytest.mark.parametrize("teardown", ["clean", "hang"])
def test_end_distributed_tears_down_and_exits_zero(tmp_path: Path, teardown: str) -> None:
    import subprocess
    import sys
    import time

    script = tmp_path / "worker.py"
    script.write_text(TEARDOWN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "store"), teardown],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.perf_counter() - start < 60
    if teardown == "clean":  # destroyed, then exited without running the rest of the script
        assert proc.stdout.split() == ["results", "written", "destroyed", "False"]
        assert "teardown still waiting" not in proc.stderr
    else:  # a teardown that never returns is reported and the rank still exits 0
        assert proc.stdout.split() == ["results", "written"]
        assert "teardown still waiting after 1 s" in proc.stderr
