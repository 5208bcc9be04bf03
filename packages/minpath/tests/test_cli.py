"""The CLI contract: help, the quick demo's results (every claim the issue names), bad input."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from minpath import __version__
from minpath.cli import main

from paperstack.records import load_results

CLAIMS = {
    "premise_raw_model_solves_task",
    "minpath_cuts_30pct",
    "minpath_keeps_accuracy",
    "minpath_beats_baselines_at_ratio",
    "minpath_beats_truncation",
    "minpath_beats_random_drop",
    "minpath_beats_tokenskip",
    "minpath_beats_length_budget",
}


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "bench", "compress", "traces"):
        assert command in out


def test_console_script_help_is_installed():
    script = shutil.which("minpath", path=str(Path(sys.executable).parent))
    assert script is not None, "the minpath console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    assert main(["demo", "--quick", "--no-progress", "--out", str(out)]) == 0
    return out


def test_demo_quick_writes_every_claim_the_issue_names(quick):
    results = load_results(quick / "results.json")  # validates and recomputes every claim
    assert results.manifest.package == "minpath"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    premise = "premise_raw_model_solves_task"
    for claim in results.claims:
        if claim.id != premise:
            assert claim.requires == (premise,)
    row = results.row("minpath", "accuracy", "seeds")
    assert sorted(row.seeds) == ["0", "1", "2"]  # per-seed values: claims are paired
    assert (quick / "report.md").read_text().startswith("# minpath")


def _jsonl(path, *records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_compress_writes_each_cot_with_its_fallback_recorded(tmp_path, capsys):
    src = _jsonl(
        tmp_path / "in.jsonl",
        {"question": "3+4*2=", "cot": "We need 3+4*2.\n4*2=8\nCheck: 2*4=8\n3+8=11\nAnswer: 11",
         "answer": "11"},
        {"question": "3+4*2=", "cot": "4*2=8\n3+8=11", "answer": "11"},  # no final answer
    )  # fmt: skip
    out = tmp_path / "out.jsonl"
    assert main(["compress", "--input", str(src), "--out", str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["text"] == "4*2=8\n3+8=11\nAnswer: 11"
    assert lines[0]["fallback"] is None
    assert lines[1]["text"] == "4*2=8\n3+8=11"
    assert "no final answer" in lines[1]["fallback"]
    assert "1 compressed, 1 kept as they were" in capsys.readouterr().out


def _one_line_error(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_compress_cycle_is_one_line_naming_the_record(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl",
                 {"question": "3+4*2=", "cot": "4*2=8\n3+8=11\nAnswer: 11", "answer": "11",
                  "edges": [[2, 1]]})  # fmt: skip
    err = _one_line_error(capsys, ["compress", "--input", str(src), "--out", str(tmp_path / "o")])
    assert "in.jsonl: line 1" in err
    assert "cycle" in err


def test_compress_non_utf8_is_one_line_naming_the_line(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"question": "1+1=", "cot": "1+1=2\\nAnswer: 2", "answer": "2"}\n\xff\xfe\n')
    err = _one_line_error(capsys, ["compress", "--input", str(src), "--out", str(tmp_path / "o")])
    assert "in.jsonl: line 2: not UTF-8" in err


def test_compress_missing_input_and_directory_output_are_one_line(tmp_path, capsys):
    err = _one_line_error(capsys, ["compress", "--input", str(tmp_path / "nope.jsonl"),
                                   "--out", str(tmp_path / "o")])  # fmt: skip
    assert "nope.jsonl" in err
    src = _jsonl(tmp_path / "in.jsonl", {"question": "1+1=", "cot": "Answer: 2", "answer": "2"})
    err = _one_line_error(capsys, ["compress", "--input", str(src), "--out", str(tmp_path)])
    assert "is a directory" in err


def test_traces_command_writes_jsonl_the_loader_reads(tmp_path):
    from minpath import load_jsonl

    out = tmp_path / "t.jsonl"
    assert main(["traces", "--out", str(out), "-n", "7"]) == 0
    assert len(load_jsonl(out)) == 7


def test_demo_bad_numbers_and_missing_model_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:  # argparse: its usage, then one error line
        main(["demo", "--quick", "--steps", "0", "--out", str(tmp_path / "a")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith("argument --steps: must be >= 1, got 0")
    err = _one_line_error(capsys, ["demo", "--quick", "--model", str(tmp_path / "none"),
                                   "--out", str(tmp_path / "b")])  # fmt: skip
    assert "none" in err
    assert not (tmp_path / "b").exists()


def test_demo_with_a_truncated_model_folder_is_one_line(tmp_path, capsys):
    from paperstack import tiny

    folder = tmp_path / "model"
    tok = tiny.build_tokenizer()
    tiny.build_model("micro", tok).save_pretrained(folder)
    tok.save_pretrained(folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    err = _one_line_error(capsys, ["demo", "--quick", "--model", str(folder),
                                   "--out", str(tmp_path / "c")])  # fmt: skip
    assert "model.safetensors" in err
