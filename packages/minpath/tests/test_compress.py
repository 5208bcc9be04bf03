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
    (tmp_path / "d.jsonl").mkdir()
    err = _one_line_error(capsys, ["compress", "--input", str(src), "--out",
                                   str(tmp_path / "d.jsonl")])  # fmt: skip
    assert "is a directory" in err
    err = _one_line_error(capsys, ["compress", "--data", str(src), "--out", str(src)])
    assert "is the input file" in err
    (tmp_path / "plain").write_text("")
    err = _one_line_error(capsys, ["compress", "--data", str(src), "--out",
                                   str(tmp_path / "plain")])  # fmt: skip
    assert "is a file, expected a directory" in err


def test_traces_command_writes_jsonl_the_loader_reads(tmp_path):
    from minpath import load_jsonl

    out = tmp_path / "t.jsonl"
    assert main(["traces", "--out", str(out), "-n", "7"]) == 0
    assert len(load_jsonl(out)) == 7


def _chain(n):
    """A CoT of ``n`` steps, each consuming the value the step before computed."""
    return "\n".join(f"{i}+1={i + 1}" for i in range(1, n + 1)) + f"\nAnswer: {n + 1}"


def test_compress_a_500_step_dependent_chain(tmp_path, capsys):
    """Issue #46: the MinPath walk recursed once per step; 500 dependent steps ended in a
    RecursionError. Every step is needed, so all are kept."""
    src = _jsonl(tmp_path / "in.jsonl", {"question": "1+1=", "cot": _chain(500), "answer": "501"})
    out = tmp_path / "out.jsonl"
    assert main(["compress", "--input", str(src), "--out", str(out)]) == 0
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["fallback"] is None
    assert line["kept"] == list(range(501))


def test_min_path_keeps_the_cheaper_duplicate_on_a_long_chain():
    """The iterative walk still chooses among duplicate producers: a verification that
    re-derives a value more cheaply than its definition replaces it."""
    from minpath.graph import compress

    cot = _chain(300).replace("\nAnswer:", "\nCheck: 1+300=301\nAnswer:")
    c = compress("1+1=", cot, gold_answer=301, count_tokens=lambda t: 1 if t[:5] == "1+300" else 5)
    assert c.compressed
    assert c.kept == [*range(299), 300, 301]  # step 299 (300+1=301) gives way to the check


def test_compress_refuses_a_cot_beyond_the_step_limit(tmp_path, capsys):
    from minpath.graph import MAX_STEPS

    src = _jsonl(tmp_path / "in.jsonl", {"question": "1+1=", "cot": "x\n" * (MAX_STEPS + 1),
                                         "answer": "2"})  # fmt: skip
    err = _one_line_error(capsys, ["compress", "--input", str(src), "--out", str(tmp_path / "o")])
    assert f"in.jsonl: line 1: field 'cot': the CoT has more than {MAX_STEPS} steps" in err


def test_compress_refuses_a_5000_digit_number_in_one_line(tmp_path, capsys):
    """Issue #46: int() of a 5000-digit number (Python's limit is 4300) was a traceback."""
    big = "9" * 5000
    for field, record in (
        ("cot", {"question": "1+1=", "cot": f"1+1={big}\nAnswer: 2", "answer": "2"}),
        ("question", {"question": f"{big}+1=", "cot": "1+1=2\nAnswer: 2", "answer": "2"}),
        ("answer", {"question": "1+1=", "cot": "1+1=2\nAnswer: 2", "answer": big}),
    ):
        src = _jsonl(tmp_path / "in.jsonl", {"question": "1+1=", "cot": "Answer: 2",
                                             "answer": "2"}, record)  # fmt: skip
        out = tmp_path / "o"
        err = _one_line_error(capsys, ["compress", "--input", str(src), "--out", str(out)])
        assert f"in.jsonl: line 2: field '{field}': a 5000-digit number" in err
        assert "limited to 1000 digits" in err
        assert not out.exists()


def test_numbers_at_the_digit_limit_are_read():
    from minpath.graph import MAX_DIGITS, compress

    a = "1" * MAX_DIGITS
    total = str(int(a) + 1)
    c = compress(f"{a}+1=", f"{a}+1={total}\nAnswer: {total}", gold_answer=int(total))
    assert c.compressed


def test_the_graph_functions_refuse_huge_numbers_themselves():
    """The library path (no loader in front) refuses in one MinPathError, not a ValueError."""
    import pytest
    from minpath.errors import MinPathError
    from minpath.graph import final_answer, parse_equation

    big = "7" * 5000
    with pytest.raises(MinPathError, match="an equation: a 5000-digit number"):
        parse_equation(f"1+1={big}")
    with pytest.raises(MinPathError, match="a final answer: a 5000-digit number"):
        final_answer(f"Answer: {big}")


def test_traces_refuses_a_negative_seed(capsys, tmp_path):
    import pytest

    with pytest.raises(SystemExit) as exc:
        main(["traces", "--out", str(tmp_path / "t.jsonl"), "--seed", "-1"])
    assert exc.value.code == 2
    assert "--seed: must be between 0 and" in capsys.readouterr().err
