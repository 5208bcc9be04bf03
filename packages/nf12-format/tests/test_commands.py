"""The file commands: compress, decompress, inspect (round trip, refusals, file modes)."""

import os
import stat

import pytest
import torch
from nf12.cli import main
from safetensors.torch import save_file


@pytest.fixture
def bf16_file(tmp_path, gaussian):
    path = tmp_path / "m.safetensors"
    save_file({"w": gaussian, "b": gaussian[0].clone()}, str(path))
    return path


def test_compress_decompress_inspect_commands(tmp_path, bf16_file, capsys):
    packed = tmp_path / "m.nf12.safetensors"
    assert main(["compress", str(bf16_file), str(packed)]) == 0
    assert "bits/weight" in capsys.readouterr().out
    assert main(["decompress", str(packed), str(tmp_path / "back.safetensors")]) == 0
    assert "byte-identical" in capsys.readouterr().out
    assert (tmp_path / "back.safetensors").read_bytes() == bf16_file.read_bytes()
    assert main(["inspect", str(packed)]) == 0
    out = capsys.readouterr().out
    assert "coverage" in out
    assert "w | nf12 | 96x200" in out


def one_line_error(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("nf12: error:")
    assert needle in err, err
    return err


@pytest.mark.parametrize(
    ("make", "command", "needle"),
    [
        (lambda p: p.write_bytes(b"\x10\x00"), "decompress", "truncated"),
        (
            lambda p: p.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not json"),
            "inspect",
            "not JSON",
        ),
        (lambda p: save_file({"w": torch.zeros(4, 8)}, str(p)), "compress", "F32 is not BF16"),
        (lambda p: save_file({"w": torch.zeros(4, 8).bfloat16()}, str(p)), "decompress", "NF12"),
        (lambda p: p.mkdir(), "compress", "is a directory"),
        (lambda p: None, "inspect", "no such file"),
    ],
)
def test_bad_input_is_a_one_line_error(tmp_path, capsys, make, command, needle):
    path = tmp_path / "bad.safetensors"
    make(path)
    argv = [command, str(path)] + ([] if command == "inspect" else [str(tmp_path / "o")])
    one_line_error(capsys, argv, needle)


@pytest.mark.parametrize("group", ["0", "5", "256", "-8"])
def test_compress_refuses_a_group_size_it_cannot_encode(tmp_path, bf16_file, capsys, group):
    out = tmp_path / "o.nf12.safetensors"
    one_line_error(capsys, ["compress", str(bf16_file), str(out), "--group", group],
                   f"group {group}: must be one of")  # fmt: skip
    assert not out.exists()


def test_compress_never_overwrites_without_force(tmp_path, bf16_file, capsys):
    out = tmp_path / "o.nf12.safetensors"
    out.write_bytes(b"keep me")
    one_line_error(capsys, ["compress", str(bf16_file), str(out)], "--force")
    assert out.read_bytes() == b"keep me"
    assert main(["compress", str(bf16_file), str(out), "--force"]) == 0
    back = tmp_path / "back.safetensors"
    back.write_bytes(b"keep me too")
    one_line_error(capsys, ["decompress", str(out), str(back)], "--force")
    assert main(["decompress", str(out), str(back), "--force"]) == 0
    assert back.read_bytes() == bf16_file.read_bytes()
    one_line_error(capsys, ["compress", str(bf16_file), str(bf16_file), "--force"],
                   "overwrite the input")  # fmt: skip
    one_line_error(capsys, ["compress", str(bf16_file), str(tmp_path)], "is a directory")


def test_outputs_get_the_mode_the_umask_gives(tmp_path, bf16_file):
    from nf12 import files

    out = tmp_path / "o.nf12.safetensors"
    assert main(["compress", str(bf16_file), str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == files._FILE_MODE
    assert 0o666 & ~_umask() == files._FILE_MODE
    back = tmp_path / "b.safetensors"
    assert main(["decompress", str(out), str(back)]) == 0
    assert stat.S_IMODE(back.stat().st_mode) == files._FILE_MODE
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
