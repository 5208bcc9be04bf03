"""compress and traces on the command line: fallbacks recorded, bad input in one line."""

import json

from minpath.cli import main
from test_demo import _one_line_error


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
