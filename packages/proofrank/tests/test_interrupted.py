"""A killed run leaves no temporary behind, and a rerun removes those a hard kill left (#46)."""

import os
import signal
import subprocess
import sys
import time

import pytest
from proofrank.cli import main, remove_stale_temporaries

from paperstack.errors import Terminated


def _temporaries(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_sigterm_while_figures_are_written_leaves_no_temporary(tmp_path, monkeypatch):
    """SIGTERM raised inside the write of a figure (where it left ``.verbosity.png.*.tmp``
    before): exit 143 and not one temporary left in --out."""
    out = tmp_path / "out"
    out.mkdir()  # an existing folder stays after the failure, so there is something to look at
    real_replace = os.replace

    def replace(src, dst):
        if str(dst).endswith(".png"):
            assert _temporaries(out), "the figure is written through a temporary"
            raise Terminated()
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--no-progress", "--out", str(out)])
    assert exc.value.code == 143
    assert _temporaries(out) == []
    assert not (out / "results.json").exists()


def test_sigterm_on_a_running_demo_leaves_no_temporary(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "proofrank.cli", "demo", "--quick", "--no-progress"]
    proc = subprocess.Popen([*cmd, "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not out.is_dir() and time.monotonic() < deadline:  # the run has begun its work
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode in (143, 0), err  # 0: it finished before the signal
    assert "Traceback" not in err
    assert _temporaries(out) == [] if out.exists() else True


def test_rerun_removes_stale_temporaries_of_its_own_names_only(tmp_path):
    """What a SIGKILL leaves (no handler runs) goes at the next run into the same folder; a
    user's files that merely look similar stay."""
    out = tmp_path / "out"
    out.mkdir()
    stale = [".verbosity.png.x1y2z3.tmp", ".results.json.abc123.tmp", ".report.md.q.tmp"]
    kept = [".mine.png.x.tmp", "verbosity.png.tmp", ".verbosity.png.tmp.keep"]
    for name in stale + kept:
        (out / name).write_bytes(b"")
    assert main(["demo", "--quick", "--no-progress", "--out", str(out)]) == 0
    assert not [n for n in stale if (out / n).exists()]
    assert all((out / n).exists() for n in kept)
    assert (out / "verbosity.png").stat().st_size > 0


def test_remove_stale_temporaries_escapes_glob_characters(tmp_path):
    (tmp_path / ".a[1].png.x.tmp").write_bytes(b"")
    (tmp_path / ".a1.png.x.tmp").write_bytes(b"")
    assert [p.name for p in remove_stale_temporaries(tmp_path, ["a[1].png"])] == [".a[1].png.x.tmp"]
    assert (tmp_path / ".a1.png.x.tmp").exists()
