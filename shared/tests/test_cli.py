"""The ``paperstack`` command: one-line errors, checks, the index, and the toy-world demo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from paperstack.records import Claim, Manifest, Results, Row, load_results, write_results


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "paperstack.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def _write(dir_: Path, package: str = "pkg") -> Path:
    rows = [
        Row.proportion("a", "acc", 90, 100),
        Row.proportion("b", "acc", 50, 100),
    ]
    claims = [Claim.compare("a_beats_b", "a beats b", rows, ("a", "acc"), "gt", ("b", "acc"))]
    res = Results(manifest=Manifest.collect(package, "0.1.0", seed=0), rows=rows, claims=claims)
    return write_results(dir_ / "results.json", res)


def test_check_accepts_a_valid_file(tmp_path: Path) -> None:
    proc = _run("check", str(_write(tmp_path)))
    assert proc.returncode == 0
    assert "1 held / 0 not held / 0 inconclusive" in proc.stdout


def test_check_rejects_a_corrupted_file_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path)
    data = json.loads(path.read_text())
    data["rows"][0]["value"] = None
    path.write_text(json.dumps(data))
    proc = _run("check", str(path))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "field 'rows[0].value'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_check_rejects_a_truncated_jsonl(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text('{"a": 1}\n{"b": ')
    proc = _run("check", str(log))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"paperstack: error: {log}: line 2: truncated record (file ends mid-line; "
        "the writer was probably killed)"
    )


def test_collect_builds_the_index(tmp_path: Path) -> None:
    _write(tmp_path / "one", "one")
    _write(tmp_path / "two", "two")
    proc = _run("collect", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "index.md").read_text()
    assert "| one | 0.1.0 | 1 / 0 / 0 | 0 | [one](one/report.md) |" in text
    assert "## two 0.1.0" in text


def test_demo_refuses_an_unusable_out(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = _run("demo", "--out", str(blocker))
    assert proc.returncode == 2
    assert "exists and is not a directory" in proc.stderr


def test_demo_rejects_an_unknown_task(tmp_path: Path) -> None:
    proc = _run("demo", "--out", str(tmp_path), "--tasks", "chess")
    assert proc.returncode == 2
    assert "chess" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_demo_quick_writes_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERSTACK_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    proc = _run("demo", "--quick", "--out", str(out), "--tasks", "addition")
    assert proc.returncode == 0, proc.stderr
    res = load_results(out)
    preset = res.manifest.config["preset"]
    acc = res.row(f"{preset}-trained", "addition_accuracy", "test")
    assert 0.0 <= acc.value <= 1.0
    assert acc.n == 100
    assert [c.id for c in res.claims] == ["addition_solved", "addition_premise_untrained_fails"]
    assert "addition_solved: not held" in proc.stdout  # a failed claim is a result: exit 0
    assert res.row(f"{preset}-trained", "addition_train_seconds").value > 0
    assert (out / "report.md").exists()
    assert (out / "addition_accuracy.png").exists()


def test_pretrain_trains_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("PAPERSTACK_CACHE", str(tmp_path / "cache"))
    proc = _run("pretrain", "--preset", "micro", "--task", "addition", "--steps", "2")
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path.is_relative_to(tmp_path / "cache")
    assert (path / "config.json").is_file()
    assert (path / "model.safetensors").is_file()


def test_collect_refuses_a_missing_folder(tmp_path: Path) -> None:
    proc = _run("collect", str(tmp_path / "nowhere"))
    assert proc.returncode == 2
    assert "no such directory" in proc.stderr
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--eval-n", "0"], "argument --eval-n: must be >= 1"),
        (["--steps=-3"], "argument --steps: must be >= 1"),
        (["--seeds", "3-1"], "empty seed range"),
        (["--device", "cuda:7"], "--device cuda:7"),
        (["--device", "tpu"], "not a device"),
        (["--model", "./no/such/dir"], "--model"),
        (["--tasks", ","], "names no task"),
    ],
)
def test_demo_bad_flags_are_one_line_and_leave_no_folder(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    proc = _run("demo", "--out", str(out), *args)
    assert proc.returncode == 2
    assert message in proc.stderr.strip().splitlines()[-1]  # after argparse's usage lines
    assert "Traceback" not in proc.stderr
    assert not out.exists()
