"""results.json schema, claims computed from rows, crash-safe JSONL and atomic writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from paperstack.records import (
    Claim,
    JsonlWriter,
    Manifest,
    Results,
    ResultsFormatError,
    Row,
    atomic_write,
    atomic_write_json,
    load_results,
    read_jsonl,
    write_results,
)


def _rows() -> list[Row]:
    return [
        Row(system="method", metric="acc", value=0.91, ci95=(0.88, 0.94), n=500, split="test"),
        Row(system="baseline", metric="acc", value=0.84, ci95=(0.80, 0.87), n=500, split="test"),
        Row(system="method", metric="seconds", value=2.0),
    ]


def _results(tmp_path: Path) -> Path:
    rows = _rows()
    claims = [
        Claim.compare(
            "beats",
            "method beats baseline",
            rows,
            ("method", "acc", "test"),
            "gt",
            ("baseline", "acc", "test"),
        ),
        Claim.compare("floor", "method reaches 95%", rows, ("method", "acc", "test"), "ge", 0.95),
    ]
    res = Results(manifest=Manifest.collect("demo-pkg", "0.1.0", seed=3), rows=rows, claims=claims)
    return write_results(tmp_path, res)


def test_claims_are_computed_from_rows() -> None:
    rows = _rows()
    beats = Claim.compare(
        "b", "s", rows, ("method", "acc", "test"), "gt", ("baseline", "acc", "test")
    )
    assert beats.held
    assert beats.lhs_value == 0.91
    assert beats.rhs_value == 0.84
    assert not Claim.compare("f", "s", rows, ("method", "acc", "test"), "ge", 0.95).held
    near = Claim.compare("w", "s", rows, ("method", "acc", "test"), "within", 0.9, margin=0.02)
    assert near.held
    assert not Claim.compare("l", "s", rows, ("method", "seconds"), "lt", 1.0).held
    assert "0.07" in beats.describe()


def test_claim_naming_a_missing_row_is_rejected() -> None:
    with pytest.raises(ResultsFormatError, match="not in rows"):
        Claim.compare("x", "s", _rows(), ("nobody", "acc"), "gt", 0.0)


def test_roundtrip(tmp_path: Path) -> None:
    path = _results(tmp_path)
    loaded = load_results(path)
    assert loaded.row("method", "acc", "test").ci95 == (0.88, 0.94)
    assert [c.held for c in loaded.claims] == [True, False]
    assert loaded.manifest.seed == 3
    assert "numpy" in loaded.manifest.libraries
    assert load_results(tmp_path) == loaded  # a directory means its results.json


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["rows"][1].__setitem__("value", "high"), "field 'rows[1].value'"),
        (lambda d: d["rows"][0].pop("metric"), "field 'rows[0].metric': Field required"),
        (lambda d: d.pop("manifest"), "field 'manifest'"),
        (lambda d: d["rows"][0].__setitem__("ci95", [1.0, 0.0]), "field 'rows[0].ci95'"),
        (lambda d: d["claims"][0].__setitem__("held", False), "does not follow from its rows"),
        (lambda d: d["claims"][1].__setitem__("lhs_value", 0.99), "field 'claims[1]'"),
        (lambda d: d.__setitem__("schema", 7), "field 'schema'"),
        (lambda d: d["rows"].append(dict(d["rows"][0])), "duplicate row"),
        (lambda d: d.__setitem__("extra", 1), "field 'extra'"),
    ],
)
def test_corrupted_results_give_one_line_errors(tmp_path: Path, mutate, message: str) -> None:
    path = _results(tmp_path)
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError) as info:
        load_results(path)
    text = str(info.value)
    assert message in text
    assert "\n" not in text
    assert str(path) in text


def test_truncated_results_file(tmp_path: Path) -> None:
    path = _results(tmp_path)
    path.write_text(path.read_text()[:150])
    with pytest.raises(ResultsFormatError, match=r"not valid JSON \(line"):
        load_results(path)
    with pytest.raises(ResultsFormatError, match="no such file"):
        load_results(tmp_path / "missing.json")


def test_nan_rows_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        Row(system="a", metric="m", value=float("nan"))


def test_jsonl_roundtrip_and_resume_after_torn_tail(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with JsonlWriter(log) as w:
        w.write({"step": 1})
        w.write({"step": 2})
    with open(log, "ab") as fh:  # a writer killed mid-line
        fh.write(b'{"step": 3, "lo')
    with pytest.raises(ResultsFormatError, match=r"line 3: truncated record"):
        read_jsonl(log)
    assert read_jsonl(log, allow_torn_tail=True) == [{"step": 1}, {"step": 2}]
    with JsonlWriter(log) as w:  # resuming cuts the torn line, keeps the complete ones
        w.write({"step": 3})
    assert [r["step"] for r in read_jsonl(log)] == [1, 2, 3]


def test_jsonl_bad_line_is_named(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"a": 1}\nnot json\n{"b": 2}\n')
    with pytest.raises(ResultsFormatError, match=r"log.jsonl: line 2: invalid JSON"):
        read_jsonl(log)
    log.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(ResultsFormatError, match="line 2: expected a JSON object"):
        read_jsonl(log)


def test_jsonl_survives_a_killed_writer(tmp_path: Path) -> None:
    """A process killed between records loses nothing it already wrote."""
    log = tmp_path / "log.jsonl"
    code = (
        "import os, sys\n"
        "from paperstack.records import JsonlWriter\n"
        f"w = JsonlWriter({str(log)!r})\n"
        "for i in range(5):\n"
        "    w.write({'i': i})\n"
        "os._exit(9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False)
    assert proc.returncode == 9
    assert [r["i"] for r in read_jsonl(log)] == [0, 1, 2, 3, 4]


def test_atomic_write_leaves_old_content_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "out" / "f.json"
    atomic_write_json(target, {"v": 1})
    with pytest.raises(ResultsFormatError, match="cannot write as JSON"):
        atomic_write_json(target, {"v": float("nan")})
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]  # no temp files left
    atomic_write(target, b"raw")
    assert target.read_bytes() == b"raw"


def test_atomic_write_gives_the_mode_open_would(tmp_path: Path) -> None:
    """Not the 0600 of the temporary file: results must be readable by the group/others the
    umask allows, and rewriting a file keeps the mode its owner chose."""
    mask = os.umask(0o022)
    os.umask(mask)
    fresh = atomic_write(tmp_path / "fresh.txt", "x")
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~mask
    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    kept.chmod(0o640)
    atomic_write(kept, "new")
    assert kept.stat().st_mode & 0o777 == 0o640


def test_manifest_records_the_run() -> None:
    m = Manifest.collect("pkg", "1.2.3", seed=7, config={"path": Path("/x"), "t": (1, 2)}).finish()
    assert m.config == {"path": "/x", "t": [1, 2]}
    assert m.host["cpus"] == os.cpu_count()
    assert m.finished is not None
    assert m.started <= m.finished
