"""The other commands and the demo's own input: `pairs`, a bad --pairs file or number (one
line, no output folder), `sweep` on a missing model, and sweep/bench --quick (slow)."""

import json

import pytest
from opct import load_pairs
from opct.cli import main

from paperstack.records import load_results


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "", "clean": "What?"}\n', "line 1: field 'prompt' is empty"),
        ('{"prompt": "a"}\n', "line 1: missing field 'clean'"),
        ("not json\n", "line 1: not JSON"),
    ],
)
def test_bad_pairs_file_is_one_line_and_leaves_no_output_folder(tmp_path, capsys, content,
                                                                message):  # fmt: skip
    path = tmp_path / "pairs.jsonl"
    path.write_text(content)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--out", str(out), "--pairs", str(path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert message in err
    assert str(path) in err
    assert not out.exists()


def test_directory_as_pairs_file_and_impossible_numbers(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--out", str(tmp_path / "o"), "--pairs", str(tmp_path)])
    assert exc.value.code == 2
    assert "is a directory" in capsys.readouterr().err
    for flag, value in (("--steps", "0"), ("--lr", "-1"), ("--batch-size", "x")):
        with pytest.raises(SystemExit) as exc:
            main(["demo", "--quick", "--out", str(tmp_path / "o"), flag, value])
        assert exc.value.code == 2
        assert flag in capsys.readouterr().err


def test_pairs_command_writes_jsonl_the_demo_reads(tmp_path, capsys):
    path = tmp_path / "pairs.jsonl"
    assert main(["pairs", "--out", str(path), "-n", "12"]) == 0
    pairs = load_pairs(path)
    assert len(pairs) == 12
    assert {p.kind for p in pairs} <= {"sycophancy", "jailbreak", "benign", "safety"}


def test_sweep_on_a_missing_model_is_one_line_and_leaves_no_output(tmp_path, capsys):
    missing = tmp_path / "none"
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--out", str(tmp_path / "o"), "--model", str(missing)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err == f"opct: error: {missing}: no such directory"
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_sweep_quick_chooses_a_rate_per_method(tmp_path):
    assert main(["sweep", "--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "sweep.json").read_text())
    assert set(result["methods"]) == {"opct", "sft"}
    for info in result["methods"].values():
        assert [r["lr"] for r in info["runs"]] == result["grid"]
        assert info["chosen"] is None or info["chosen"] in result["grid"]
    assert result["seed"] not in (0, 1, 2)


@pytest.mark.slow
def test_bench_quick_writes_a_step_time_ratio(tmp_path):
    assert main(["bench", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "bench.json")
    ratio = results.row("opct/sft", "step_time_ratio")
    assert ratio.value > 0
    assert ratio.n == 6
    assert ratio.ci95 is not None
    assert results.row("opct", "matches_sft").value == 1.0
