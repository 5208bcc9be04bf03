"""tools/gpu-sweep and its wheelhouse checker (tools/_gpu.py), without a GPU (issue #47).

The sweep itself runs only on a lent GPU machine; here: it refuses a machine without torch or
CUDA with one line, prints its plan, keeps its budget arithmetic (mandatory steps and setup fit,
the skip rule), runs fake steps end to end through its real step runner (statuses, timeouts,
skips, outputs, --collect), and the checker catches a wheel whose requirement nothing meets.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import _gpu  # noqa: E402

SWEEP = ROOT / "tools" / "gpu-sweep"


def load_sweep():
    loader = importlib.machinery.SourceFileLoader("gpu_sweep", str(SWEEP))
    spec = importlib.util.spec_from_loader("gpu_sweep", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def sweep(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, str(SWEEP), *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


# --------------------------------------------------------------------------- the runner's CLI


def test_setup_refuses_a_machine_without_torch_or_cuda(tmp_path: Path) -> None:
    done = sweep("--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("gpu-sweep: setup: missing ")
    assert "missing torch" in lines[0] or "missing CUDA" in lines[0]
    assert 'carry=[".whl"]' in lines[0]  # says how to run it where it can
    assert not (tmp_path / "out").exists()


def test_dry_run_prints_the_plan_without_a_gpu() -> None:
    done = sweep("--dry-run")
    assert done.returncode == 0, done.stderr
    data = _gpu.load()
    for step in data.steps:
        assert step.dist in done.stdout
    assert 'run(command="python3 tools/gpu-sweep", carry=[".whl"], timeout_s=540)' in done.stdout
    assert f"mandatory + setup = {_gpu.mandatory_s(data)} s" in done.stdout
    # Every step at its full budget: the optional ones at the end no longer fit, and say so.
    assert "pall-lns" in done.stdout
    assert "skipped (needs 60 s" in done.stdout


def test_dry_run_only_and_bad_arguments() -> None:
    done = sweep("--dry-run", "--only", "numuon,nf12-format")
    assert done.returncode == 0
    body = [line for line in done.stdout.splitlines() if line.startswith("  ") and "s " in line]
    listed = [line.split()[0] for line in body if line.split()[0] in ("nf12-format", "numuon")]
    assert listed == ["nf12-format", "numuon"]  # the table's order, not the argument's
    assert "saga-attention" not in done.stdout
    for args, message in (
        (("--only", "nope"), "--only: no step nope"),
        (("--budget", "0"), "--budget: must be in 1..480"),
        (("--out", ""), "--out: an empty path"),
    ):
        done = sweep(*args)
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [done.stderr.strip()]
        assert message in done.stderr


# --------------------------------------------------------------------------- budget arithmetic


def test_the_table_is_the_issues_budgets() -> None:
    data = _gpu.load()
    assert (data.limit_s, data.budget_s, data.setup_s) == (480, 470, 45)
    assert [(s.dist, s.budget_s, s.mandatory) for s in data.steps] == [
        ("nf12-format", 100, True),
        ("saga-attention", 110, True),
        ("mage-attention", 110, True),
        ("pace-scheduler", 45, False),
        ("numuon", 40, False),
        ("mosa-rl", 40, False),
        ("opct", 40, False),
        ("progress-advantage", 40, False),
        ("pall-lns", 60, False),
    ]


def test_mandatory_steps_and_setup_fit_under_the_limit() -> None:
    data = _gpu.load()
    assert _gpu.mandatory_s(data) == 365
    assert _gpu.mandatory_s(data) <= data.budget_s < data.limit_s
    plan = _gpu.worst_case_plan(data, data.steps)
    assert all(runs for step, _, runs in plan if step.mandatory)
    # Worst case, nothing that starts can end past the budget, and the budget leaves the
    # packing and the kill grace (timeout --kill-after=3) inside the 480 s limit.
    assert max(start + step.budget_s for step, start, runs in plan if runs) <= data.budget_s
    assert data.limit_s - data.budget_s >= 3 + 5


def test_the_skip_rule_is_whole_budget_in_what_is_left() -> None:
    data = _gpu.load()
    step = _gpu.Step("numuon", 40, False)
    assert _gpu.fits(step, 430, data)  # 40 s left: fits exactly
    assert not _gpu.fits(step, 430.1, data)
    plan = _gpu.worst_case_plan(data, data.steps)
    assert [s.dist for s, _, runs in plan if runs] == [
        "nf12-format", "saga-attention", "mage-attention", "pace-scheduler", "numuon",
    ]  # fmt: skip
    # A skipped step's time is not spent: a later, smaller step can still start.
    small = _gpu.Step("b", 10, False)
    steps = [_gpu.Step("a", 460, False), _gpu.Step("c", 425, False), small]
    plan = _gpu.worst_case_plan(data, steps)
    assert [(s.dist, runs) for s, _, runs in plan] == [("a", False), ("c", True), ("b", False)]


def test_the_table_refuses_malformed_data(tmp_path: Path) -> None:
    bad = tmp_path / "gpu-sweep.toml"
    bad.write_text(
        "[sweep]\nlimit_s = 480\nbudget_s = 500\nsetup_s = 45\n"
        '[[step]]\ndist = "a"\nbudget_s = 10\n[image.packages]\n[wheels]\n'
    )
    with pytest.raises(_gpu.GpuError, match="budget_s <= limit_s"):
        _gpu.load(bad)
    bad.write_text("[sweep]\nlimit_s = 480\n")
    with pytest.raises(_gpu.GpuError, match="missing or malformed field"):
        _gpu.load(bad)


# --------------------------------------------------------------------------- the step runner

FAKE_TABLE = """
[sweep]
limit_s = 20
budget_s = 9
setup_s = 1
[[step]]
dist = "fast"
budget_s = 4
mandatory = true
[[step]]
dist = "slow"
budget_s = 1
[[step]]
dist = "big"
budget_s = 8
[[step]]
dist = "broken"
budget_s = 2
[image.packages]
[wheels]
"""

BENCH = {
    "schema": 1,
    "rows": [],
    "claims": [{"id": "speedup_1_21x", "verdict": "inconclusive"}],
}


def fake_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    scripts = {
        "fast": f'echo "budget $GPU_BUDGET_S"\necho \'{json.dumps(BENCH)}\' > "$OUT/bench.json"\n'
        'echo "# md" > "$OUT/bench.md"\nhead -c 3000000 /dev/zero > "$OUT/big.txt"\n',
        "slow": 'echo "partial" > "$OUT/gpu-tests.txt"\nsleep 30\n',
        "big": "echo never\n",
        "broken": "echo oops >&2\nexit 3\n",
    }
    for dist, body in scripts.items():
        script = root / "packages" / dist / "benchmarks" / "gpu.sh"
        script.parent.mkdir(parents=True)
        script.write_text(body)
    (root / "gpu-sweep.toml").write_text(FAKE_TABLE)
    (root / "reports" / "fast" / "gpu").mkdir(parents=True)
    (root / "reports" / "fast" / "gpu" / "old.md").write_text("earlier run\n")
    return root


def test_runner_statuses_skips_and_outputs(tmp_path: Path, monkeypatch) -> None:
    mod = load_sweep()
    root = fake_repo(tmp_path)
    monkeypatch.setattr(mod, "ROOT", root)
    monkeypatch.setattr(mod, "WORK", tmp_path / "work")
    record = {"machine": {"device": "fake GPU", "torch": "0"}, "wheels": ["x.whl"]}
    monkeypatch.setattr(mod, "setup", lambda *a: ({"PATH": "/usr/bin:/bin"}, dict(record)))
    out = tmp_path / "out"
    rc = mod.main(["--data", str(root / "gpu-sweep.toml"), "--out", str(out)])
    assert rc == 0  # the one mandatory step wrote its bench.json
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu.tar.gz", "sweep.json", "sweep.log", "sweep.md",
    ]  # fmt: skip
    result = json.loads((out / "sweep.json").read_text())
    steps = {s["dist"]: s for s in result["steps"]}
    assert [s["dist"] for s in result["steps"]] == ["fast", "slow", "big", "broken"]
    assert steps["fast"]["status"] == "ok"
    assert steps["fast"]["verdicts"] == {"speedup_1_21x": "inconclusive"}
    assert steps["fast"]["bench"] == BENCH
    assert steps["slow"]["status"] == "timeout"
    assert steps["slow"]["exit"] == 124
    assert steps["slow"]["seconds"] < 4
    assert steps["big"]["status"] == "skipped"
    assert steps["big"]["note"].startswith("needs 8 s")
    assert steps["broken"]["status"] == "failed"
    assert steps["broken"]["exit"] == 3
    assert steps["broken"]["note"] == "exit 3: oops"
    assert result["seconds"] < result["limit_s"]
    md = (out / "sweep.md").read_text()
    assert "| fast | ok |" in md
    assert "speedup_1_21x: inconclusive" in md
    assert "budget 4" in (out / "sweep.log").read_text()
    with tarfile.open(out / "gpu.tar.gz") as tar:
        names = sorted(tar.getnames())
    # Small result files only: the 3 MB one stays behind.
    assert names == [
        "broken/step.log", "fast/bench.json", "fast/bench.md", "fast/step.log",
        "slow/gpu-tests.txt", "slow/step.log",
    ]  # fmt: skip

    # The checkout got the same small files; an older result there is left alone, not packed.
    kept = root / "reports" / "fast" / "gpu"
    assert sorted(p.name for p in kept.iterdir()) == [
        "bench.json",
        "bench.md",
        "old.md",
        "step.log",
    ]
    assert (kept / "old.md").read_text() == "earlier run\n"

    # --collect here puts them where they are committed.
    for dist in ("fast", "slow"):
        for f in (root / "reports" / dist / "gpu").iterdir():
            f.unlink()
    assert mod.main(["--data", str(root / "gpu-sweep.toml"), "--collect", str(out)]) == 0
    assert json.loads((root / "reports/fast/gpu/bench.json").read_text()) == BENCH
    assert (root / "reports/gpu-sweep/sweep.md").read_text() == md


def test_runner_fails_when_a_mandatory_step_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    mod = load_sweep()
    root = fake_repo(tmp_path)
    (root / "packages/fast/benchmarks/gpu.sh").write_text("exit 0\n")
    monkeypatch.setattr(mod, "ROOT", root)
    monkeypatch.setattr(mod, "WORK", tmp_path / "work")
    monkeypatch.setattr(
        mod, "setup", lambda *a: ({"PATH": "/usr/bin:/bin"}, {"machine": {}, "wheels": []})
    )
    out = tmp_path / "out"
    rc = mod.main(["--data", str(root / "gpu-sweep.toml"), "--out", str(out), "--only", "fast"])
    assert rc == 1
    assert json.loads((out / "sweep.json").read_text())["steps"][0]["status"] == "no-bench"


# --------------------------------------------------------------------------- the checker


def fake_wheel(folder: Path, name: str, version: str, *requires: str) -> Path:
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", meta)
    return path


def test_checker_finds_an_unmet_requirement(tmp_path: Path) -> None:
    fake_wheel(tmp_path, "fake-pkg", "1.0", "torch>=2.4", "numpy>=99", "nowhere>=1",
               "pyarrow>=21", "other[x]>=0.5", "win-only; sys_platform == 'win32'",
               "py311-only; python_version < '3.12'")  # fmt: skip
    fake_wheel(tmp_path, "other", "0.5", "Nested_Thing==1.0", "gone; extra == 'x'",
               "waived-model; extra == 'y'")  # fmt: skip
    fake_wheel(tmp_path, "nested-thing", "1.0")
    image = {"torch": "2.11.0", "numpy": "2.5.2", "pyarrow": None}
    report = _gpu.check(_gpu.read_wheels(tmp_path), image, {})
    assert sorted(report.unmet) == sorted([
        "fake_pkg-1.0-py3-none-any.whl needs numpy>=99: in the image is numpy 2.5.2",
        "fake_pkg-1.0-py3-none-any.whl needs nowhere>=1: neither in .whl/ nor in the image",
        "other-0.5-py3-none-any.whl [x] needs gone: neither in .whl/ nor in the image",
    ])  # fmt: skip
    assert report.unverified == [
        "fake_pkg-1.0-py3-none-any.whl needs pyarrow>=21: the image has pyarrow, version not "
        "recorded"
    ]
    # The CLI says the same, one line per problem, and exits non-zero.
    data = tmp_path / "data.toml"
    data.write_text(
        "[sweep]\nlimit_s = 480\nbudget_s = 470\nsetup_s = 45\n"
        '[[step]]\ndist = "a"\nbudget_s = 10\n'
        '[image.packages]\ntorch = "2.11.0"\nnumpy = "2.5.2"\npyarrow = "*"\n'
        '[wheels]\n[waived]\nnowhere = "test"\ngone = "test"\n'
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools/_gpu.py"), "check", "--wheels", str(tmp_path),
         "--data", str(data)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "unmet: fake_pkg-1.0-py3-none-any.whl needs numpy>=99" in done.stdout
    assert "nowhere" not in done.stdout  # waived
    assert done.stderr.strip() == f"_gpu.py: error: 1 unmet requirement(s) in {tmp_path}"


def test_checker_accepts_what_other_wheels_meet_and_refuses_two_versions(tmp_path: Path) -> None:
    fake_wheel(tmp_path, "a", "1.0", "b>=2")
    fake_wheel(tmp_path, "b", "2.1")
    report = _gpu.check(_gpu.read_wheels(tmp_path), {}, {})
    assert (report.unmet, report.unverified, report.checked) == ([], [], 1)
    report = _gpu.check(_gpu.read_wheels(tmp_path), {"b": "2.1"}, {})
    assert report.unmet == ["b-2.1-py3-none-any.whl replaces the image's b 2.1"]
    fake_wheel(tmp_path, "b", "2.2")
    with pytest.raises(_gpu.GpuError, match="two wheels of b"):
        _gpu.read_wheels(tmp_path)


def test_wheelhouse_pins_agree_with_the_constraints() -> None:
    pins = {}
    for line in (ROOT / "tools" / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_gpu.canonical(name)] = version.strip()
    data = _gpu.load()
    for name, version in data.wheels.items():
        if name in pins:
            assert pins[name] == version, f"{name}: .whl/ {version}, constraints {pins[name]}"
        assert name not in data.image, f"{name} is in the image already"


# --------------------------------------------------------------------------- the steps' scripts

MINE = ("numuon", "mosa-rl", "opct", "progress-advantage", "pall-lns")


@pytest.mark.parametrize("dist", [s.dist for s in _gpu.load().steps])
def test_every_step_has_a_script_that_parses(dist: str) -> None:
    script = ROOT / "packages" / dist / "benchmarks" / "gpu.sh"
    assert script.is_file()
    subprocess.run(["bash", "-n", str(script)], check=True)


@pytest.mark.parametrize("dist", MINE)
def test_optional_steps_obey_the_budget_and_write_bench_json(dist: str) -> None:
    text = (ROOT / "packages" / dist / "benchmarks" / "gpu.sh").read_text()
    assert "GPU_BUDGET_S" in text or "gpu_left" in text
    assert "bench.json" in text
    assert "paperstack.bench" in text or "compare_speed" in text


def test_size_check_fails_with_one_line_over_the_carry_limit(tmp_path: Path) -> None:
    fake_wheel(tmp_path, "a", "1.0")
    with open(tmp_path / "padding.bin", "wb") as f:  # sparse: 64 MiB of size, no disk
        f.truncate(_gpu.CARRY_LIMIT)
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools/_gpu.py"), "size", "--wheels", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "one device call carries" in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"_gpu.py: error: {tmp_path}: ")
    assert "over the device's 64.0 MiB" in lines[0]


#: What each of these scripts' Python imports from its package: a rename there breaks the script
#: only on a GPU machine, so it is caught here (the scripts' sizes were smoke-run on a CPU).
SCRIPT_API = {
    "numuon": [("numuon/optimizer.py", "class NuMuon(")],
    "mosa-rl": [("mosa_rl/loss.py", "def mosa_loss(")],
    "opct": [("opct/loss.py", "def consistency_divergence(")],
    "progress-advantage": [
        ("progress_advantage/bench.py", "def build_bench_model("),
        ("progress_advantage/scoring.py", "class LogRatioScorer"),
        ("progress_advantage/trajectory.py", "def from_lines("),
    ],
    "pall-lns": [
        ("pall_lns/lm.py", "class LMSelector"),
        ("pall_lns/context.py", "class Context"),
        ("pall_lns/context.py", "class Event"),
    ],
}


@pytest.mark.parametrize("dist", MINE)
def test_optional_steps_use_what_their_package_has(dist: str) -> None:
    for rel, needle in SCRIPT_API[dist]:
        source = (ROOT / "packages" / dist / "src" / rel).read_text()
        assert needle in source, f"{dist}: {rel} has no {needle!r} (benchmarks/gpu.sh uses it)"
