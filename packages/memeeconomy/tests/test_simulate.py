"""memeeconomy simulate: a resumable ledger, and bad input as one line with exit 2."""

import pytest
from memeeconomy.cli import main


def test_simulate_runs_and_resumes_a_ledger(tmp_path, capsys):
    ledger = tmp_path / "m.jsonl"
    argv = ["simulate", "--ledger", str(ledger), "--rounds", "5", "--agents", "4"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "20 decisions (20 asked now)" in out
    assert main(argv) == 0
    assert "20 decisions (0 asked now)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--p-remove", "0.2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "different configuration" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["simulate", "--ledger", "L", "--events", "MISSING.jsonl"], "no such events file"),
        (["simulate", "--ledger", "L", "--population", "angels"], "population 'angels'"),
        (["simulate", "--ledger", "L", "--model", "m"], "--model needs --base-url"),
        (
            [
                "simulate",
                "--ledger",
                "L",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--model",
                "a",
                "--model",
                "b",
                "--agents",
                "1",
            ],
            "--agents 1 is fewer than the 2 --model given",
        ),
        (["simulate", "--ledger", "L", "--p-remove", "1.5"], "1.5"),
        (["demo", "--quick", "--events", "MISSING.jsonl", "--out", "OUT"], "no such events file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, needle):
    argv = [str(tmp_path / a) if a in ("L", "MISSING.jsonl", "OUT") else a for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    if not err.startswith("usage:"):  # argparse's own errors print the usage first
        assert len(err.splitlines()) == 1
    assert needle in err.splitlines()[-1]
    assert not (tmp_path / "OUT").exists()


@pytest.mark.parametrize("seed", ["-1", "4294967296", "18446744073709551616"])
def test_simulate_refuses_seeds_that_demos_refuse(tmp_path, capsys, seed):
    """Issue #46: ``simulate --seed -1`` was accepted; it now takes the core's seed type."""
    ledger = tmp_path / "m.jsonl"
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--ledger", str(ledger), "--rounds", "1", "--seed", seed])
    assert exc.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("memeeconomy simulate: error: argument --seed: ")
    assert "must be between 0 and 4294967295" in last or "out of range" in last
    assert not ledger.exists()


def test_simulate_accepts_the_largest_seed(tmp_path, capsys):
    ledger = tmp_path / "m.jsonl"
    argv = ["simulate", "--ledger", str(ledger), "--rounds", "1", "--agents", "2"]
    assert main([*argv, "--seed", "4294967295"]) == 0
    assert "2 decisions" in capsys.readouterr().out
