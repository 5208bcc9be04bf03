"""The bench's paired time ratios, and its refusal of an unknown shape."""

import pytest
from progress_advantage.cli import main

from paperstack.records import load_results


def test_bench_writes_paired_ratios(tmp_path):
    argv = ["bench", "--out", str(tmp_path), "--shape", "micro", "--trajectories", "8",
            "--repeats", "2", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.row("confidence (policy only)", "time_ratio").value == 1.0
    ratio = results.row("progress-advantage (policy + reference)", "time_ratio")
    assert ratio.value > 1.0
    assert set(ratio.seeds) == {"0", "1"}
    assert (tmp_path / "bench.md").is_file()


def test_bench_unknown_shape_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--out", str(tmp_path / "b"), "--shape", "huge"])
    assert exc.value.code == 2
    assert "--shape huge" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()  # the contract removed the empty folder it made
