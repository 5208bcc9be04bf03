"""paperstack.cache.build_once: once across processes, never half-written, complete = marked."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from pathlib import Path

import pytest

from paperstack.cache import CacheError, build_once, cache_root, read_record


def test_cache_root_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERSTACK_CACHE", str(tmp_path / "env"))
    assert cache_root(tmp_path / "arg") == tmp_path / "arg"
    assert cache_root() == tmp_path / "env"


def test_builds_once_and_records(tmp_path: Path) -> None:
    calls: list[Path] = []

    def build(tmp: Path) -> dict[str, object]:
        calls.append(tmp)
        assert tmp.parent == tmp_path
        assert tmp.is_dir()
        assert not any(tmp.iterdir())
        (tmp / "weights.bin").write_bytes(b"w")
        return {"train_seconds": 1.5}

    entry = tmp_path / "model-abc"
    assert build_once(entry, build) == entry
    assert build_once(entry, build) == entry
    assert len(calls) == 1
    assert not calls[0].exists()
    assert (entry / "weights.bin").read_bytes() == b"w"
    assert read_record(entry) == {"train_seconds": 1.5}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model-abc", "model-abc.lock"]


def test_failed_build_leaves_nothing_and_reruns(tmp_path: Path) -> None:
    entry = tmp_path / "e"

    def broken(tmp: Path) -> dict[str, object]:
        (tmp / "half").write_text("x")
        raise KeyboardInterrupt  # Ctrl-C in the middle of training

    with pytest.raises(KeyboardInterrupt):
        build_once(entry, broken)
    assert not entry.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["e.lock"]
    build_once(entry, lambda tmp: {"ok": True})
    assert read_record(entry) == {"ok": True}


def test_stale_folder_without_marker_is_rebuilt(tmp_path: Path) -> None:
    entry = tmp_path / "e"
    entry.mkdir()
    (entry / "old-layout.bin").write_text("stale")
    build_once(entry, lambda tmp: {"v": 2})
    assert sorted(p.name for p in entry.iterdir()) == ["paperstack-entry.json"]


def test_builder_may_write_its_own_marker(tmp_path: Path) -> None:
    def build(tmp: Path) -> None:
        (tmp / "config.json").write_text("{}")

    entry = build_once(tmp_path / "e", build, marker="config.json")
    assert (entry / "config.json").is_file()
    with pytest.raises(CacheError, match=r"wrote no config\.json"):
        build_once(tmp_path / "f", lambda tmp: None, marker="config.json")
    assert not (tmp_path / "f").exists()


def test_read_record_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match=r"e[/\\]paperstack-entry.json: no readable"):
        read_record(tmp_path / "e")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "paperstack-entry.json").write_text("[1]")
    with pytest.raises(ValueError, match="not a JSON object"):
        read_record(tmp_path / "e", error=ValueError)


def _build_in_child(entry: str, log: str) -> None:
    import time

    def build(tmp: Path) -> dict[str, int]:
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.3)
        return {"pid": os.getpid()}

    build_once(entry, build)


def test_two_processes_build_once(tmp_path: Path) -> None:
    entry, log = tmp_path / "e", tmp_path / "log"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_build_in_child, args=(str(entry), str(log))) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(log.read_text().split()) == 1
    assert json.loads((entry / "paperstack-entry.json").read_text())["pid"] > 0
