"""Bad input to `mosa demo` is one line naming the flag, the file or the line, before any work."""

import pytest
from mosa_rl.cli import main


def _one_line_error(capsys, argv, code=2):
    """The error line (argparse puts its usage lines first; our own errors are one line)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == code
    lines = capsys.readouterr().err.strip().splitlines()
    assert not any("Traceback" in line for line in lines)
    if lines[0].startswith("usage:"):
        assert lines[-1].startswith("mosa demo: error: argument ")
    else:
        assert len(lines) == 1, lines
        assert lines[0].startswith("mosa: error: ")
    return lines[-1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "tpu"], "--device tpu"),
        (["--top-k", "0"], "--top-k: must be >= 1, got 0"),
        (["--top-k", "500"], "--top-k: top_k=500: larger than the vocabulary (103 tokens)"),
        (["--steps", "0"], "--steps: must be >= 1"),
        (["--mosa-beta", "-1"], "--mosa-beta: must be > 0"),
        (["--token-kl-beta", "nan"], "--token-kl-beta: must be a finite number"),
        (["--workers", "0"], "--workers: must be >= 1"),
        (["--seeds", "0,100"], "--seeds: 100 is the validation seed"),
        (["--dataset", "/nonexistent/problems.jsonl"], "--dataset /nonexistent/problems.jsonl"),
        (["--model", "/nonexistent/model"], "--model /nonexistent/model: no such directory"),
    ],
)
def test_bad_demo_input_is_a_one_line_error(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    err = _one_line_error(capsys, ["demo", "--quick", "--no-progress", "--out", str(out), *args])
    assert message in err
    assert not out.exists()  # a run that fails on its input leaves no empty folder


def test_cuda_on_a_cpu_build_is_one_line(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    err = _one_line_error(capsys, ["demo", "--quick", "--device", "cuda", "--out", str(tmp_path)])
    assert "--device cuda: not available here" in err


def test_dataset_that_is_a_directory_is_one_line(tmp_path, capsys):
    err = _one_line_error(
        capsys, ["demo", "--quick", "--out", str(tmp_path / "o"), "--dataset", str(tmp_path)]
    )
    assert "is a directory" in err


def test_bad_dataset_line_names_file_and_line(tmp_path, capsys):
    data = tmp_path / "problems.jsonl"
    data.write_text('{"numbers": [2, 4, 7], "target": 30}\n{"numbers": [1, 1, 1], "target": 99}\n')
    err = _one_line_error(
        capsys, ["demo", "--quick", "--out", str(tmp_path / "o"), "--dataset", str(data)]
    )
    assert f"{data}:2" in err
    assert "cannot be made" in err


def test_run_log_that_is_a_directory_is_one_line(tmp_path, capsys):
    (tmp_path / "runs.jsonl").mkdir()
    err = _one_line_error(capsys, ["demo", "--quick", "--no-progress", "--out", str(tmp_path)])
    assert "runs.jsonl: is a directory" in err
