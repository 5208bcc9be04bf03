"""results.json schema, claims computed from rows, crash-safe JSONL and atomic writes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
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
    iter_user_jsonl,
    load_results,
    read_jsonl,
    write_results,
)


def _rows() -> list[Row]:
    return [
        Row.proportion("method", "acc", 455, 500, split="test"),
        Row.proportion("baseline", "acc", 420, 500, split="test"),
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
    assert beats.verdict == "held"
    assert beats.held
    assert beats.method == "newcombe"
    assert beats.lhs_value == 0.91
    assert beats.rhs_value == 0.84
    assert beats.diff == pytest.approx(0.07)
    floor = Claim.compare("f", "s", rows, ("method", "acc", "test"), "ge", 0.95)
    assert floor.verdict == "not_held"  # Wilson upper bound 0.932 < 0.95
    assert not floor.held
    near = Claim.compare("w", "s", rows, ("method", "acc", "test"), "within", 0.9, margin=0.05)
    assert near.verdict == "held"
    seconds = Claim.compare("l", "s", rows, ("method", "seconds"), "lt", 1.0)
    assert seconds.verdict == "inconclusive"  # no interval: nothing to judge by
    assert seconds.method == "none"
    assert "0.07" in beats.describe()
    assert beats.describe().endswith(": held")


def test_point_estimates_that_favour_a_claim_with_overlapping_intervals_are_inconclusive() -> None:
    """The acceptance case of core 0.2: method ahead on every seed's mean, seeds noisy."""
    rows = [
        Row.from_seeds("method", "pass@16", {0: 0.83, 1: 0.79, 2: 0.84}),
        Row.from_seeds("baseline", "pass@16", {0: 0.80, 1: 0.81, 2: 0.80}),
    ]
    claim = Claim.compare("c", "method beats baseline", rows, ("method", "pass@16"), "gt",
                          ("baseline", "pass@16"))  # fmt: skip
    assert claim.lhs_value > claim.rhs_value  # the point estimates favour it ...
    assert claim.method == "paired-t"
    assert claim.ci95 is not None
    assert claim.ci95[0] < 0 < claim.ci95[1]  # ... but the interval of d straddles 0
    assert claim.verdict == "inconclusive"
    assert not claim.held


def test_an_interval_that_clears_the_margin_is_held_and_one_below_it_not_held() -> None:
    rows = [
        Row.from_seeds("method", "acc", {0: 0.90, 1: 0.92, 2: 0.91, 3: 0.93}),
        Row.from_seeds("baseline", "acc", {0: 0.80, 1: 0.81, 2: 0.80, 3: 0.82}),
    ]
    held = Claim.compare("h", "s", rows, ("method", "acc"), "gt", ("baseline", "acc"), 0.05)
    assert held.verdict == "held"
    assert held.ci95 is not None
    assert held.ci95[0] > 0.05
    # d = 0.1075; t(0.975, 3) = 3.182; the differences are 0.10, 0.11, 0.11, 0.11
    d = [0.10, 0.11, 0.11, 0.11]
    half = 3.182446 * float(np.std(d, ddof=1)) / 2
    assert held.ci95 == pytest.approx((0.1075 - half, 0.1075 + half), rel=1e-5)
    not_held = Claim.compare("n", "s", rows, ("method", "acc"), "gt", ("baseline", "acc"), 0.2)
    assert not_held.verdict == "not_held"  # the whole interval lies below 0.2
    reversed_ = Claim.compare("r", "s", rows, ("baseline", "acc"), "gt", ("method", "acc"))
    assert reversed_.verdict == "not_held"


def test_one_seed_or_zero_width_is_inconclusive_never_held() -> None:
    rows = [
        Row.from_seeds("a", "m", {0: 0.9}),
        Row.from_seeds("b", "m", {0: 0.1}),
        Row.from_seeds("c", "m", {0: 0.5, 1: 0.6}),
        Row.from_seeds("d", "m", {0: 0.4, 1: 0.5}),
        Row(system="e", metric="m", value=3.0, ci95=(3.0, 3.0)),
    ]
    assert Claim.compare("one", "s", rows, ("a", "m"), "gt", ("b", "m")).verdict == "inconclusive"
    # c - d is 0.1 on both seeds: no spread is visible, so nothing is known about it
    same = Claim.compare("zero", "s", rows, ("c", "m"), "gt", ("d", "m"))
    assert same.verdict == "inconclusive"
    assert Claim.compare("flat", "s", rows, ("e", "m"), "gt", 1.0).verdict == "inconclusive"


def test_exact_claims_stay_boolean_and_say_so() -> None:
    rows = [Row(system="codec", metric="mismatches", value=0.0, n=65536)]
    ok = Claim.compare("lossless", "s", rows, ("codec", "mismatches"), "le", 0.0, exact=True)
    assert (ok.verdict, ok.method, ok.ci95, ok.exact) == ("held", "exact", None, True)
    bad = Claim.compare("lossy", "s", rows, ("codec", "mismatches"), "gt", 0.0, exact=True)
    assert bad.verdict == "not_held"
    assert "(exact)" in ok.describe()


def test_within_is_two_one_sided_tests() -> None:
    rows = [
        Row.from_seeds("a", "loss", {0: 1.00, 1: 1.02, 2: 1.01}),
        Row.from_seeds("b", "loss", {0: 1.01, 1: 1.01, 2: 1.02}),
        Row.from_seeds("c", "loss", {0: 1.50, 1: 1.52, 2: 1.49}),
    ]
    close = Claim.compare("w", "s", rows, ("a", "loss"), "within", ("b", "loss"), margin=0.1)
    assert close.verdict == "held"
    far = Claim.compare("f", "s", rows, ("c", "loss"), "within", ("b", "loss"), margin=0.1)
    assert far.verdict == "not_held"
    tight = Claim.compare("t", "s", rows, ("a", "loss"), "within", ("b", "loss"), margin=0.01)
    assert tight.verdict == "inconclusive"


def test_item_pairs_use_a_paired_bootstrap_and_mixed_rows_the_normal_approximation() -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(size=200)
    rows = [
        Row.from_items("m", "score", {i: float(v + 0.05) for i, v in enumerate(base)}),
        Row.from_items("b", "score", {i: float(v) for i, v in enumerate(base)}),
        Row(system="x", metric="score", value=0.6, ci95=(0.55, 0.65), n=50),
    ]
    paired = Claim.compare("p", "s", rows, ("m", "score"), "gt", ("b", "score"))
    assert paired.method == "paired-bootstrap"
    assert paired.verdict == "inconclusive"  # every difference is 0.05: a zero-width interval
    mixed = Claim.compare("q", "s", rows, ("x", "score"), "gt", ("b", "score"))
    assert mixed.method == "normal"
    assert mixed.ci95 is not None
    assert mixed.ci95[0] < mixed.diff < mixed.ci95[1]


def test_rows_check_their_samples_and_proportions() -> None:
    with pytest.raises(ValueError, match="not the mean of its seeds"):
        Row(system="a", metric="m", value=0.5, seeds={"0": 0.1, "1": 0.2})
    with pytest.raises(ValueError, match="not k/n"):
        Row(system="a", metric="m", value=0.5, k=3, n=10)
    with pytest.raises(ValueError, match="seeds or items, not both"):
        Row(system="a", metric="m", value=0.1, seeds={"0": 0.1}, items={"0": 0.1})
    row = Row.from_seeds("a", "m", {0: 0.1, 1: 0.3})
    assert row.seeds == {"0": 0.1, "1": 0.3}
    assert row.n == 2


def _gated(tmp_path: Path) -> tuple[Path, list[Claim]]:
    """A premise that is not held (the floor) and a claim resting on it that would be held."""
    rows = _rows()
    floor = Claim.compare(
        "floor", "method reaches 95%", rows, ("method", "acc", "test"), "ge", 0.95
    )
    beats = Claim.compare(
        "beats",
        "method beats baseline",
        rows,
        ("method", "acc", "test"),
        "gt",
        ("baseline", "acc", "test"),
        requires=[floor],
    )
    res = Results(manifest=Manifest.collect("demo-pkg", "0.1.0"), rows=rows, claims=[floor, beats])
    return write_results(tmp_path, res), [floor, beats]


def test_a_claim_whose_premise_is_not_held_is_inconclusive(tmp_path: Path) -> None:
    path, (floor, beats) = _gated(tmp_path)
    assert floor.verdict == "not_held"
    # Its own interval clears the margin (0.07 [0.03, 0.11]), yet the toy's premise failed.
    assert beats.ci95 is not None
    assert beats.ci95[0] > 0
    assert beats.verdict == "inconclusive"
    assert beats.unmet == ("floor",)
    assert "premise `floor` not held" in beats.describe()
    assert load_results(path).claims[1].unmet == ("floor",)  # check() recomputes the gate
    rows = _rows()
    held = Claim.compare("ok", "acc above 80%", rows, ("method", "acc", "test"), "gt", 0.8)
    free = Claim.compare(
        "beats", "s", rows, ("method", "acc", "test"), "gt", ("baseline", "acc", "test"),
        requires=[held],
    )  # fmt: skip
    assert free.verdict == "held"
    assert free.unmet == ()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["claims"][1].update(unmet=[], verdict="held", held=True),
            "unmet premises: recomputed ['floor'], stored []",
        ),
        (lambda d: d["claims"][1].update(requires=["later"], unmet=[]), "not an earlier claim"),
        (lambda d: d["claims"][1].update(requires=[]), "are not among requires"),
        (lambda d: d["claims"].reverse(), "'floor' is not an earlier claim"),
    ],
)
def test_a_stored_gate_that_does_not_follow_is_rejected(tmp_path: Path, mutate, message) -> None:
    path, _ = _gated(tmp_path)
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match=re.escape(message)):
        load_results(path)


def test_claim_naming_a_missing_row_is_rejected() -> None:
    with pytest.raises(ResultsFormatError, match="not in rows"):
        Claim.compare("x", "s", _rows(), ("nobody", "acc"), "gt", 0.0)


def test_roundtrip(tmp_path: Path) -> None:
    path = _results(tmp_path)
    loaded = load_results(path)
    assert loaded.row("method", "acc", "test").k == 455
    assert [c.verdict for c in loaded.claims] == ["held", "not_held"]
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
        (lambda d: d["claims"][0].__setitem__("held", False), "contradicts verdict"),
        (
            lambda d: d["claims"][0].update(held=False, verdict="inconclusive"),
            "does not follow from its rows",
        ),
        (lambda d: d["claims"][1].__setitem__("lhs_value", 0.99), "field 'claims[1]'"),
        (lambda d: d["claims"][0].__setitem__("ci95", [0.2, 0.3]), "does not follow"),
        (lambda d: d["rows"][0].__setitem__("k", 300), "field 'rows[0]'"),
        (lambda d: d.__setitem__("schema", 7), "field 'schema'"),
        (lambda d: d.__setitem__("schema", 1), "paperstack-core 0.1: rerun the demo"),
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


def test_user_jsonl_names_file_and_line(tmp_path: Path) -> None:
    class OwnError(Exception):
        pass

    data = tmp_path / "pairs.jsonl"
    # a UTF-8 byte-order mark, blank lines, no final newline
    data.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n  \n{"b": "\xc3\xa9"}')
    assert list(iter_user_jsonl(data)) == [
        (f"{data}: line 1", {"a": 1}),
        (f"{data}: line 4", {"b": "\u00e9"}),
    ]
    cases = [
        (b'{"a": 1}\nnot json\n', "line 2: not JSON"),
        (b'{"a": 1}\n[1, 2]\n', "line 2: expected a JSON object, got list"),
        (b'{"a": "caf\xe9"}\n', r"line 1: not UTF-8 text \(byte 0xe9 at column 11; save"),
        ('{"a": 1}\n'.encode("utf-16"), "is UTF-16 encoded; expected a JSONL file in UTF-8"),
        (b'{"a": 1', "line 1: not JSON"),  # a truncated last line is an error, not skipped
    ]
    for body, message in cases:
        data.write_bytes(body)
        with pytest.raises(OwnError, match=f"pairs.jsonl: {message}"):
            list(iter_user_jsonl(data, error=OwnError))
    with pytest.raises(ResultsFormatError, match="is a directory, expected pairs"):
        list(iter_user_jsonl(tmp_path, what="pairs"))
    with pytest.raises(ResultsFormatError, match=r"missing\.jsonl: no such file"):
        list(iter_user_jsonl(tmp_path / "missing.jsonl"))


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


def test_atomic_write_to_a_directory_or_under_a_file_is_one_line(tmp_path: Path) -> None:
    from paperstack.errors import PaperstackError

    with pytest.raises(PaperstackError, match="is a directory; name a file"):
        atomic_write(tmp_path, "x")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(PaperstackError, match="exists and is not a directory"):
        atomic_write(blocker / "out.json", "x")


def test_output_dir_removes_only_an_empty_folder_it_created(tmp_path: Path) -> None:
    from paperstack.records import output_dir

    def run(path: Path, fail: BaseException, write: bool = False) -> None:
        with output_dir(path) as out:
            assert out.is_dir()
            if write:
                (out / "partial.jsonl").write_text("{}\n")
            raise fail

    fresh = tmp_path / "fresh"
    with pytest.raises(KeyboardInterrupt):
        run(fresh, KeyboardInterrupt())
    assert not fresh.exists()  # a killed first run leaves no empty --out behind
    kept = tmp_path / "kept"
    with pytest.raises(RuntimeError):
        run(kept, RuntimeError("late failure"), write=True)
    assert (kept / "partial.jsonl").is_file()  # what was written is never lost
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(RuntimeError):
        run(existing, RuntimeError("x"))
    assert existing.is_dir()  # the user's folder is not ours to remove


def test_the_cpu_identity_is_read_from_the_first_cpu(tmp_path: Path) -> None:
    from paperstack.records import _cpu_identity

    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: sse2 avx2 fma\n\n"
        "processor\t: 1\nmodel name\t: Other CPU\nflags\t\t: sse2\n"
    )
    got = _cpu_identity(info)
    assert got["cpu_model"] == "AMD EPYC"
    # The flags' order does not matter; a different set gives a different digest.
    same = tmp_path / "same"
    same.write_text("model name: AMD EPYC\nflags: fma sse2 avx2\n")
    other = tmp_path / "other"
    other.write_text("model name: AMD EPYC\nflags: fma sse2\n")
    assert _cpu_identity(same)["cpu_flags"] == got["cpu_flags"]
    assert _cpu_identity(other)["cpu_flags"] != got["cpu_flags"]
    assert len(got["cpu_flags"]) == 12
    assert _cpu_identity(tmp_path / "missing") == {}


def test_a_manifest_on_linux_names_its_cpu() -> None:
    if not Path("/proc/cpuinfo").is_file():
        pytest.skip("no /proc/cpuinfo on this platform")
    m = Manifest.collect("pkg", "1.2.3").finish()
    assert m.host["cpu_model"]
    assert re.fullmatch(r"[0-9a-f]{12}", m.host["cpu_flags"])
