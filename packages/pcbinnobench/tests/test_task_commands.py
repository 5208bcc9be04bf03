"""tasks, build-tasks and validate; bad input to the commands as one line with exit 2."""

import pytest
from pcbinnobench.cli import main


def test_tasks_build_and_validate_commands(tmp_path, capsys, taskset):
    assert main(["tasks", "--tasks", str(taskset)]) == 0
    assert "ldo_add_tvs" in capsys.readouterr().out
    assert main(["build-tasks", "--out", str(tmp_path / "set")]) == 0
    assert (tmp_path / "set" / "hidden" / "ldo_add_tvs" / "validators.json").is_file()
    ws = tmp_path / "set" / "tasks" / "ldo_add_tvs" / "workspace"
    capsys.readouterr()
    assert (
        main(
            [
                "validate",
                "--tasks",
                str(tmp_path / "set"),
                "--task",
                "ldo_add_tvs",
                "--workspace",
                str(ws),
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "ldo_add_tvs: failed" in out
    assert "skipped" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["demo", "--out", "{tmp}/o", "--tasks", "{tmp}/nowhere"], "no such task-set"),
        (["demo", "--out", "{tmp}/o", "--task", "no_such_task"], "unknown task"),
        (["demo", "--out", "{tmp}/o", "--max-calls", "0"], "--max-calls"),
        (["validate", "--task", "ldo_add_tvs", "--workspace", "{tmp}/f.txt"], "not a directory"),
        (["validate", "--workspace", "{tmp}"], "exactly one --task"),
        (["build-tasks", "--out", "{tmp}/f.txt"], "not a directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, fragment):
    (tmp_path / "f.txt").write_text("x")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if not ln.startswith(("usage:", " "))]
    assert len(lines) == 1, err  # argparse adds its usage lines
    assert fragment in lines[0]
    assert not (tmp_path / "o").exists()


def test_validate_on_a_deeply_nested_board_names_the_file_and_line(tmp_path, capsys, taskset):
    """Issue #46: validate on a board of thousands of nested '(' ended in a RecursionError."""
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(taskset / "tasks" / "ldo_add_tvs" / "workspace", ws)
    (board,) = ws.glob("*.kicad_pcb")
    board.write_text("(kicad_pcb (version 20241229)\n" + "(a " * 5000 + ")" * 5001 + "\n")
    argv = ["validate", "--tasks", str(taskset), "--task", "ldo_add_tvs", "--workspace", str(ws)]
    code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert code != 0
    assert f"{board}: nested deeper than 100 levels at line 2" in captured.out + captured.err
