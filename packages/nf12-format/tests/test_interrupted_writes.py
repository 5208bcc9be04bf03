"""A full disk, Ctrl-C or SIGTERM during `nf12 compress`/`decompress`: one line, nothing left.

Whatever stops a write, the output directory must hold nothing new: no hidden `.data` or
`.tmp` file (the data file alone is as big as the compressed model), no half-written output;
and a full disk is reported as a full disk while writing the *output*, never as a bad input.
"""

import errno
import os
import signal
import subprocess
import sys
import time

import nf12.files
import pytest
import torch
from nf12.cli import main
from safetensors.torch import save_file

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def checkpoint(tmp_path):
    gen = torch.Generator().manual_seed(0)
    state = {f"layer{i}.weight": (torch.randn(64, 96, generator=gen) * 0.02).bfloat16()
             for i in range(4)}  # fmt: skip
    src = tmp_path / "in" / "model.safetensors"
    src.parent.mkdir()
    save_file(state, str(src))
    (tmp_path / "out").mkdir()
    return src


class FullDisk:
    """A file object that accepts ``room`` bytes, then fails every write as a full disk does."""

    def __init__(self, inner, room: int) -> None:
        self.inner, self.room = inner, room

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.inner.write(data)

    def close(self) -> None:
        self.inner.close()

    def flush(self) -> None:
        self.inner.flush()

    def fileno(self) -> int:
        return self.inner.fileno()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_cli(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return int(info.value.code), err


def test_full_disk_while_streaming_data_names_the_output_and_leaves_nothing(
    checkpoint, tmp_path, capsys, monkeypatch
):
    real_init = nf12.files._StreamWriter.__init__

    def init(self, path):
        real_init(self, path)
        self._data = FullDisk(self._data, room=20_000)

    monkeypatch.setattr(nf12.files._StreamWriter, "__init__", init)
    dst = tmp_path / "out" / "model.nf12.safetensors"
    code, err = run_cli(["compress", str(checkpoint), str(dst)], capsys)
    assert code == 1, err
    assert "No space left on device" in err
    assert str(dst) in err
    assert str(checkpoint) not in err
    assert list((tmp_path / "out").iterdir()) == []
    assert list((tmp_path / "in").iterdir()) == [checkpoint]


def test_full_disk_while_writing_the_final_file_leaves_nothing(
    checkpoint, tmp_path, capsys, monkeypatch
):
    def copy(src, dst, length=0):
        dst.write(src.read(100))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(nf12.files.shutil, "copyfileobj", copy)
    dst = tmp_path / "out" / "model.nf12.safetensors"
    code, err = run_cli(["compress", str(checkpoint), str(dst)], capsys)
    assert code == 1, err
    assert str(dst) in err
    assert list((tmp_path / "out").iterdir()) == []


def test_interrupt_during_compress_leaves_nothing(checkpoint, tmp_path, capsys, monkeypatch):
    calls = []
    real_encode = nf12.files.encode

    def encode(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_encode(*args, **kwargs)

    monkeypatch.setattr(nf12.files, "encode", encode)
    code, err = run_cli(["compress", str(checkpoint), str(tmp_path / "out" / "m.nf12")], capsys)
    assert code == 130, err
    assert list((tmp_path / "out").iterdir()) == []


def test_full_disk_during_decompress_leaves_nothing(checkpoint, tmp_path, capsys, monkeypatch):
    packed = tmp_path / "in" / "model.nf12.safetensors"
    nf12.files.compress_file(checkpoint, packed)
    real_fdopen = os.fdopen

    def fdopen(fd, *args, **kwargs):
        return FullDisk(real_fdopen(fd, *args, **kwargs), room=1000)

    monkeypatch.setattr(nf12.files.os, "fdopen", fdopen)
    dst = tmp_path / "out" / "back.safetensors"
    code, err = run_cli(["decompress", str(packed), str(dst)], capsys)
    assert code == 1, err
    assert str(dst) in err
    assert str(packed) not in err
    assert list((tmp_path / "out").iterdir()) == []


def test_sigterm_during_compress_exits_143_and_leaves_nothing(tmp_path):
    gen = torch.Generator().manual_seed(1)
    state = {f"w{i}": (torch.randn(1024, 1024, generator=gen) * 0.02).bfloat16()
             for i in range(12)}  # fmt: skip
    src = tmp_path / "big.safetensors"
    save_file(state, str(src))
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nf12.cli", "compress", str(src), str(out / "big.nf12")],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not any(p.name.endswith(".data") for p in out.iterdir()):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "compress never started writing"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated" in err
    assert "Traceback" not in err
    assert list(out.iterdir()) == []
