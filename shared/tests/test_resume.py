"""Resumable parts: a killed run resumes, processes split seeds, nothing stale is reused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from paperstack import records, resume
from paperstack.contract import ContractCLI, Report, Run
from paperstack.errors import PaperstackError
from paperstack.preregistration import Change, changes_since
from paperstack.records import Row, load_results
from paperstack.resume import Parts, code_identity

CODE = {"packages/toy/src/toy": "abc123"}


def _parts(folder: Path, code: dict[str, str] | None = None, **flags: object) -> Parts:
    code = CODE if code is None else code
    return Parts(folder, "toy-method", "0.1.0", "demo", {"scale": 1.0, **flags}, code)


def test_a_part_is_computed_once_and_loaded_as_the_same_json(tmp_path: Path) -> None:
    calls: list[int] = []

    def compute() -> dict[str, object]:
        calls.append(1)
        return {"acc": np.float64(0.25), "pair": (1, 2), "nan": float("nan")}

    first = _parts(tmp_path).get("seed-0", compute)
    again = _parts(tmp_path)
    second = again.get("seed-0", compute)
    assert len(calls) == 1
    # computed or loaded, the caller sees the same JSON (a tuple is a list either way)
    assert first["acc"] == second["acc"] == 0.25
    assert first["pair"] == second["pair"] == [1, 2]
    assert np.isnan(first["nan"])
    assert np.isnan(second["nan"])
    assert [r["key"] for r in again.resumed] == ["seed-0"]
    assert again.resumed[0]["seconds"] >= 0
    assert again.resumed[0]["host"]


@pytest.mark.parametrize(
    "other",
    [
        {"code": {"packages/toy/src/toy": "def456"}},  # the code changed
        {"code": CODE, "scale": 2.0},  # a flag changed
    ],
)
def test_a_part_of_other_code_or_flags_is_computed_again(
    tmp_path: Path, other: dict[str, object]
) -> None:
    _parts(tmp_path).get("seed-0", lambda: 1)
    code = other.pop("code")
    later = _parts(tmp_path, code, **other)  # type: ignore[arg-type]
    assert later.get("seed-0", lambda: 2) == 2
    assert later.resumed == []
    assert _parts(tmp_path).get("seed-0", lambda: 3) == 1  # the first one is still there


def test_the_seed_list_and_output_folder_do_not_change_a_part(tmp_path: Path) -> None:
    _parts(tmp_path, seeds=[0, 1], out="a", no_progress=True).get("seed-1", lambda: 7)
    assert _parts(tmp_path, seeds=[1, 2, 3], out="b").get("seed-1", lambda: 8) == 7


def test_nothing_is_kept_when_no_commit_pins_the_code(tmp_path: Path) -> None:
    said: list[str] = []
    parts = Parts(tmp_path, "toy", "0.1", "demo", {}, None, log=said.append, why_not="x is dirty")
    assert parts.get("seed-0", lambda: 1) == 1
    assert parts.get("seed-1", lambda: 2) == 2
    assert not list(tmp_path.iterdir())
    assert len(said) == 1
    assert "not kept (x is dirty" in said[0]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


def test_the_code_is_pinned_by_its_folders_trees_not_by_the_commit(tmp_path: Path) -> None:
    """Parts computed in one session, committed with a report, resume at the later commit;
    a change to the package's code, committed or not, computes them again."""
    repo = tmp_path / "repo"
    pkg, core = repo / "packages" / "toy" / "src" / "toy", repo / "shared" / "src" / "paperstack"
    for folder in (pkg, core):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("X = 1\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    code, why = code_identity([core, pkg])
    assert why == ""
    assert code is not None
    assert set(code) == {"packages/toy/src/toy", "shared/src/paperstack"}
    parts_dir = repo / "reports" / "toy" / "parts"
    assert Parts(parts_dir, "toy", "0.1", "demo", {}, code).get("seed-0", lambda: 41) == 41

    (pkg / "__pycache__").mkdir()  # ignored: still clean
    (pkg / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (repo / "README.md").write_text("results\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "report and parts")  # the part file itself is committed here
    later, _ = code_identity([core, pkg])
    assert later == code
    again = Parts(parts_dir, "toy", "0.1", "demo", {}, later)
    assert again.get("seed-0", lambda: 42) == 41
    assert again.resumed[0]["key"] == "seed-0"

    (pkg / "new.py").write_text("Y = 2\n")  # untracked code
    assert code_identity([core, pkg]) == (None, f"{pkg} has uncommitted changes")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "code")
    changed, _ = code_identity([core, pkg])
    assert changed is not None
    assert changed["packages/toy/src/toy"] != code["packages/toy/src/toy"]
    assert changed["shared/src/paperstack"] == code["shared/src/paperstack"]
    assert Parts(parts_dir, "toy", "0.1", "demo", {}, changed).get("seed-0", lambda: 43) == 43

    outside = tmp_path / "wheel"
    outside.mkdir()
    got, why = code_identity([outside])
    assert got is None
    assert "not code committed to a git repository" in why


def test_bad_keys_values_and_files_are_one_line_errors(tmp_path: Path) -> None:
    parts = _parts(tmp_path)
    with pytest.raises(PaperstackError, match=r"key '\.\./x'"):
        parts.get("../x", lambda: 1)
    with pytest.raises(PaperstackError, match="part seed-0: its value is not JSON"):
        parts.get("seed-0", lambda: {"model": object()})
    parts.path("seed-1").write_text("{torn")
    with pytest.raises(PaperstackError, match="unreadable part"):
        parts.get("seed-1", lambda: 1)
    parts.path("seed-2").write_text(json.dumps({"value": 1}))
    with pytest.raises(PaperstackError, match="not a part"):
        parts.get("seed-2", lambda: 1)


# ----------------------------------------------------------------- through the contract CLI


class Stop(Exception):
    pass


def _cli(computed: list[int], stop_at: int | None = None) -> ContractCLI:
    cli = ContractCLI("toy", "toy-method", "0.1.0", "``toy``: a toy method.")

    @cli.demo(seeds=3, quick_seeds=1)
    def demo(run: Run) -> Report:
        def one(seed: int) -> dict[str, float]:
            if seed == stop_at:
                raise KeyboardInterrupt  # the process is stopped during this seed
            computed.append(seed)
            rng = np.random.default_rng(seed)
            return {"acc": float(rng.uniform())}

        values = {s: run.resumable(f"seed-{s}", lambda s=s: one(s))["acc"] for s in run.seeds}
        return Report([Row.from_seeds("method", "acc", values)])

    return cli


@pytest.fixture
def committed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs as from a clean checkout of one commit (this test tree may be dirty)."""
    monkeypatch.setattr(records, "_git_revision", lambda: "0123456789abcdef")
    monkeypatch.setattr(records, "_git_dirty", lambda: None)
    monkeypatch.setattr(resume, "code_identity", lambda folders: ({"toy": "0123"}, ""))


@pytest.mark.usefixtures("committed")
def test_a_killed_run_resumes_where_it_stopped_with_the_same_numbers(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    assert _cli([]).main(["demo", "--out", str(whole)]) == 0
    out, computed = tmp_path / "out", []
    with pytest.raises(SystemExit) as exc:
        _cli(computed, stop_at=2).main(["demo", "--out", str(out)])
    assert exc.value.code == 130
    assert computed == [0, 1]
    assert _cli(computed).main(["demo", "--out", str(out)]) == 0
    assert computed == [0, 1, 2]  # seeds 0 and 1 were not computed again
    got, want = load_results(out / "results.json"), load_results(whole / "results.json")
    assert got.rows[0].seeds == want.rows[0].seeds
    assert [p["key"] for p in got.manifest.resumed or []] == ["seed-0", "seed-1"]
    assert want.manifest.resumed is None
    assert got.manifest.resumed[0]["revision"] == "0123456789abcdef"  # type: ignore[index]
    report = (out / "report.md").read_text()
    assert "- resumed: 2 part(s) computed by earlier processes with this code" in report
    assert " at 0123456789ab)" in report  # the commit each part was computed at
    assert "parts" not in got.manifest.config


@pytest.mark.usefixtures("committed")
def test_processes_with_disjoint_seeds_share_a_parts_folder(tmp_path: Path) -> None:
    parts, computed = tmp_path / "parts", []
    for seeds in ("0,1", "2"):
        argv = ["demo", "--out", str(tmp_path / seeds), "--seeds", seeds, "--parts", str(parts)]
        assert _cli(computed).main(argv) == 0
    assert _cli(computed).main(["demo", "--out", str(tmp_path / "all"), "--parts", str(parts)]) == 0
    assert computed == [0, 1, 2]  # the assembling run computed nothing
    assert len(load_results(tmp_path / "all" / "results.json").manifest.resumed or []) == 3


def test_a_parts_flag_that_is_not_a_folder_fails_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    computed: list[int] = []
    with pytest.raises(SystemExit) as exc:
        _cli(computed).main(["demo", "--out", str(tmp_path / "o"), "--parts", str(blocker)])
    assert exc.value.code == 2
    assert computed == []
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "exists and is not a directory" in err
    with pytest.raises(SystemExit):
        _cli(computed).main(["demo", "--out", str(tmp_path / "o"), "--parts", ""])
    assert "--parts: empty path" in capsys.readouterr().err


def test_a_resumed_run_started_when_its_first_part_did() -> None:
    """A design change dated between the first part and the assembling run is listed as after
    the run (it could have shaped the later parts), not hidden as before it."""
    manifest = SimpleNamespace(
        started="2026-12-08T09:00:00+00:00",
        resumed=[{"started": "2026-12-07T05:00:00+00:00"}, {"started": "2026-12-07T07:10:00"}],
    )
    change = Change("2026-12-07", "demo", "budget", "fewer steps", time="06:00")
    assert changes_since(SimpleNamespace(manifest=manifest), [change]) == [change]
    manifest.resumed = None
    assert changes_since(SimpleNamespace(manifest=manifest), [change]) == []
