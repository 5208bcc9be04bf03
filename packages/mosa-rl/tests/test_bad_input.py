"""Bad input to `mosa demo` is one line naming the flag, the file or the line, before any work."""

import json

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


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"numbers": [2, 4, 7], "target": Infinity}', "Infinity is not a finite number"),
        ('{"numbers": [2, 4, 7], "target": NaN}', "NaN is not a finite number"),
        ('{"numbers": [2, 4, 7], "target": 1e999}', "target: inf is not a finite number"),
        ('{"numbers": [2, 4, 7], "target": 30.5}', "target: 30.5 is not an integer"),
        ('{"numbers": [2, 4, 7e300], "target": 30}', "numbers[2]: 7e+300 number is out of range"),
        (
            '{"numbers": [2, 4, 7], "target": 10000000000}',
            "target: a 11-digit number is out of range",
        ),
        ('{"numbers": [2, "4", 7], "target": 30}', "numbers[1]: '4' is not a number"),
        ('{"numbers": [2, 4, true], "target": 30}', "numbers[2]: True is not a number"),
        ('{"numbers": 7, "target": 30}', "numbers: 7 is not a list"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_non_finite_or_out_of_range_dataset_numbers_are_one_line(tmp_path, capsys, line, message):
    """Issue #46: an Infinity target was an OverflowError traceback; 30.5 was read as 30."""
    data = tmp_path / "problems.jsonl"
    data.write_text('{"numbers": [2, 4, 7], "target": 30}\n' + line + "\n")
    out = tmp_path / "o"
    err = _one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--dataset", str(data)])
    assert f"{data}:2" in err
    assert message in err
    assert not out.exists()


def test_a_problem_with_thousands_of_numbers_is_refused_in_one_line(tmp_path, capsys):
    """Issue #46: one 10,000-number problem ended in a RecursionError inside the solver."""
    data = tmp_path / "problems.jsonl"
    data.write_text(json.dumps({"numbers": [1] * 10_000, "target": 5}) + "\n")
    err = _one_line_error(
        capsys, ["demo", "--quick", "--out", str(tmp_path / "o"), "--dataset", str(data)]
    )
    assert f"{data}:1" in err
    assert "10000 numbers (a problem has 2 to 5)" in err


def test_dataset_within_the_limits_loads(tmp_path):
    """The limits are inclusive: five numbers and nine-digit values (given as 7.0) load."""
    from mosa_rl.demo import load_problems

    data = tmp_path / "problems.jsonl"
    data.write_text(
        '{"numbers": [1, 2, 3, 4, 5], "target": 7}\n'
        '{"numbers": [1000000000, 1.0], "target": 1000000000.0}\n'
    )
    loaded = load_problems(data)
    assert [ex.meta["numbers"] for ex in loaded] == [[1, 2, 3, 4, 5], [1, 1000000000]]
    assert [ex.meta["target"] for ex in loaded] == [7, 1000000000]
