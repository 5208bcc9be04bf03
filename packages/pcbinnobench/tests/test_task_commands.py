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
