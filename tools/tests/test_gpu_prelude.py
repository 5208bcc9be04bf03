"""The packages' GPU scripts share tools/gpu-prelude.sh; on a machine without CUDA it stops at once.

No GPU is needed here: these check that every script parses and uses the prelude, and that the
prelude refuses a CPU-only python with one line and a non-zero exit instead of running a bench.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(ROOT.glob("packages/*/benchmarks/gpu.sh"))
PRELUDE = "tools/gpu-prelude.sh"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parts[-3])
def test_every_gpu_script_parses_and_sources_the_prelude(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert PRELUDE in text
    assert f'gpu-prelude.sh" {script.parts[-3]}' in text.replace("\\\n", "")
    assert "TRITON_INTERPRET=1" not in text


def test_prelude_refuses_a_machine_without_cuda(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f'source "{ROOT / PRELUDE}" paperstack-core\necho "bench ran"\n')
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out")}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 2
    assert "bench ran" not in done.stdout
    assert "no package folder" in done.stderr


def test_prelude_stops_before_the_bench_without_torch_or_cuda(tmp_path: Path) -> None:
    dist = SCRIPTS[0].parts[-3]
    script = tmp_path / "run.sh"
    script.write_text(f'source "{ROOT / PRELUDE}" {dist}\necho "bench ran"\n')
    # This test's python with pip refused (nothing is installed into it, the prelude falls back
    # to the source trees). Without torch (the tools session's venv) it stops on the import;
    # with a CPU torch on the CUDA check. Either way: one line, a non-zero exit, no bench.
    python = tmp_path / "python"
    python.write_text(
        f'#!/bin/sh\n[ "$1" = "-m" ] && [ "$2" = "pip" ] && exit 1\nexec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "OUT": str(tmp_path / "out")}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "bench ran" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gpu.sh: ")
    assert "torch is not installed" in last or "no CUDA" in last
    assert (tmp_path / "out" / "pip.txt").is_file()


def test_prelude_under_the_sweep_installs_nothing_and_still_checks_cuda(tmp_path: Path) -> None:
    dist = SCRIPTS[0].parts[-3]
    script = tmp_path / "run.sh"
    script.write_text(f'source "{ROOT / PRELUDE}" {dist}\necho "left $(gpu_left)"\n')
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out"),
           "PAPERSTACK_GPU_SETUP_DONE": "1", "GPU_BUDGET_S": "40"}  # fmt: skip
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "using tools/gpu-sweep's setup (no install); budget 40 s" in done.stdout
    assert not (tmp_path / "out" / "pip.txt").exists()  # no pip run at all
    assert done.stderr.strip().splitlines()[-1].startswith("gpu.sh: ")


def test_prelude_refuses_a_budget_that_is_not_seconds(tmp_path: Path) -> None:
    dist = SCRIPTS[0].parts[-3]
    script = tmp_path / "run.sh"
    script.write_text(f'source "{ROOT / PRELUDE}" {dist}\necho "bench ran"\n')
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out"),
           "GPU_BUDGET_S": "1m"}  # fmt: skip
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == "gpu-prelude.sh: GPU_BUDGET_S must be whole seconds, got '1m'"
