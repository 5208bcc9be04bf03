import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pcbinnobench import __version__
from pcbinnobench.cli import main

from paperstack.records import Claim, ResultsFormatError, load_results

FEW = ["--task", "ldo_decap_vout", "--task", "opamp_fix_r1_net", "--task", "eeprom_add_j2"]


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "tasks", "build-tasks", "validate"):
        assert command in out


def test_console_script_help_is_installed():
    script = shutil.which("pcbinnobench", path=str(Path(sys.executable).parent))
    assert script is not None, "the pcbinnobench console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory, taskset):
    out = tmp_path_factory.mktemp("demo")
    code = main(
        ["demo", "--quick", "--no-progress", "--out", str(out), "--tasks", str(taskset), *FEW]
    )
    assert code == 0
    return out


def test_demo_quick_writes_valid_results_with_claims_from_rows(demo_out):
    results = load_results(demo_out / "results.json")  # validates and recomputes every claim
    assert results.manifest.package == "pcbinnobench"
    assert results.manifest.version == __version__
    ids = [c.id for c in results.claims]
    assert ids[0] == "premise_trajectory_solves"
    assert {"validators_discriminate", "guidance_helps", "validators_catch_defects"} <= set(ids)
    for claim in results.claims:
        again = Claim.compare(
            claim.id,
            claim.statement,
            results.rows,
            claim.lhs,
            claim.op,
            claim.rhs,
            claim.margin,
            exact=claim.exact,
        )
        assert again.verdict == claim.verdict
    row = results.row("heuristic", "pass@1", "guided")
    assert row.items is not None
    assert sorted(row.items) == sorted(FEW[1::2])
    assert results.row("oracle", "tasks_passed", "guided").value == 1.0
    assert results.row("do-nothing", "tasks_passed", "objective").value == 0.0
    report = (demo_out / "report.md").read_text()
    assert "Per-validator breakdown" in report
    assert "skipped" in report
    card = json.loads((demo_out / "cost_card.json").read_text())
    assert "heuristic/guided" in card["agents"]
    agents = results.manifest.config["agents"]
    assert "tiny-model" in agents  # the test environment has torch: the model agent runs
    assert len((demo_out / "episodes.jsonl").read_text().splitlines()) == len(agents) * 2 * 3
    assert "model_guidance_helps" in ids
    assert results.row("tiny-model", "pass@1", "objective").items is not None
    translated = results.row("tiny-model", "step_translation_correct", "held-out sentences")
    assert translated.n == 200
    assert results.manifest.config["tiny_agent"]["steps"] == 30  # --quick: the micro model


def test_tiny_agent_is_skipped_with_one_line_without_torch(monkeypatch):
    import sys

    from pcbinnobench.cli import _tiny_agent

    import paperstack

    # the import fails as it does without torch
    monkeypatch.setitem(sys.modules, "paperstack.tiny", None)
    monkeypatch.delattr(paperstack, "tiny", raising=False)
    said = []

    class FakeRun:
        quick = True
        show_progress = False

        def log(self, message):
            said.append(message)

    assert _tiny_agent(FakeRun()) is None  # type: ignore[arg-type]
    assert len(said) == 1
    assert "[tiny] extra" in said[0]


def test_demo_claims_follow_the_rows_not_the_code(demo_out, tmp_path):
    data = json.loads((demo_out / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "heuristic" and row["split"] == "objective" and row.get("items"):
            row["items"] = {k: 1.0 for k in row["items"]}
            row["value"] = 1.0
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError):
        load_results(bad)


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
