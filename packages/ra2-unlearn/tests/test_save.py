"""Saving an unlearned model: a full disk or a kill leaves nothing half-written (issue #46)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest
from ra2_unlearn.cli import main
from ra2_unlearn.trainer import save_model


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_save_model_round_trips_and_replaces_only_its_own_files(micro, tmp_path):
    model, tok = micro
    out = tmp_path / "model"
    save_model(model, tok, out)
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 2
    (out / "notes.txt").write_text("mine")
    before = (out / "config.json").stat().st_ino
    save_model(model, tok, out)  # into a folder that already holds files
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "config.json").stat().st_ino != before  # replaced, not rewritten in place
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no temporary left


def test_full_disk_during_save_leaves_no_half_written_model(micro, tmp_path, monkeypatch, capsys):
    """The old save wrote config.json into --out first; a full disk at the tokenizer left a
    folder with a model that does not load. Now the run fails in one line (exit 1, the core's
    disk error) and --out is not created at all."""
    model, tok = micro
    folder = tmp_path / "ckpt"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    data = tmp_path / "f.jsonl"
    data.write_text('{"question": "Q?", "choices": ["a", "b", "c"], "answer": 2}\n')
    out = tmp_path / "unlearned"
    capsys.readouterr()  # the setup's own save_pretrained progress bar
    monkeypatch.setattr(type(tok), "save_pretrained", _disk_full)
    argv = ["unlearn", "--model", str(folder), "--forget", str(data), "--retain", str(data),
            "--out", str(out), "--layer", "1", "--steps", "1", "--batch-size", "1",
            "--no-progress"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "No space left on device" in err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "f.jsonl"]


def test_existing_out_is_untouched_when_the_save_fails(micro, tmp_path, monkeypatch):
    model, tok = micro
    out = tmp_path / "model"
    save_model(model, tok, out)
    config = (out / "config.json").read_bytes()
    monkeypatch.setattr(type(tok), "save_pretrained", _disk_full)
    with pytest.raises(OSError, match="No space"):
        save_model(model, tok, out)
    assert (out / "config.json").read_bytes() == config
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_a_killed_save_is_cleaned_by_the_next(micro, tmp_path):
    """SIGKILL runs no handler: its temporary folder (named with its pid) stays until the next
    save to the same place, which removes it; a live process's folder is left alone."""
    model, tok = micro
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = tmp_path / f".model.{dead.stdout.strip()}.abc.saving"
    stale.mkdir()
    (stale / "config.json").write_text("")
    live = tmp_path / f".model.{os.getppid()}.def.saving"
    live.mkdir()
    save_model(model, tok, tmp_path / "model")
    assert not stale.exists()
    assert live.exists()
