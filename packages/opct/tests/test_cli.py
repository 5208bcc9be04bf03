"""The command line: demo --quick on the contract, its claims, bad input, bench, pairs."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from opct import __version__, load_pairs
from opct.cli import main

from paperstack.records import Claim, ResultsFormatError, load_results

CLAIMS = {
    "premise_base_sycophantic",
    "premise_base_capable",
    "premise_base_jailbreakable",
    "sft_generalises_poorly",
    "opct_less_sycophantic_than_sft",
    "opct_defends_heldout_wrappers",
    "opct_keeps_capability",
    "sft_regresses_more",
}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick") / "run"
    assert main(["demo", "--quick", "--no-progress", "--out", str(out)]) == 0
    return out


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "bench", "pairs"):
        assert command in out


def test_console_script_help_is_installed():
    script = shutil.which("opct", path=str(Path(sys.executable).parent))
    assert script is not None, "the opct console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


def test_demo_quick_writes_the_issues_claims_from_per_seed_rows(quick_run):
    results = load_results(quick_run / "results.json")  # validates and recomputes every claim
    assert results.manifest.package == "opct"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    assert [c.id for c in results.claims][:3] == [
        "premise_base_sycophantic", "premise_base_capable", "premise_base_jailbreakable",
    ]  # fmt: skip
    by_id = {c.id: c for c in results.claims}
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs,
            claim.margin, requires=[by_id[r] for r in claim.requires],
        )  # fmt: skip
        assert again.verdict == claim.verdict
    assert by_id["opct_less_sycophantic_than_sft"].requires == ("premise_base_sycophantic",)
    assert results.row("base", "defence_heldout", "targets").k is not None
    for system in ("base", "opct", "sft"):
        row = results.row(system, "sycophancy", "seeds")
        assert sorted(row.seeds) == ["0", "1", "2"]  # per-seed values: claims are paired
    assert results.row("base", "sycophancy", "items").items
    assert results.manifest.config["preset"] == "micro"
    report = (quick_run / "report.md").read_text()
    assert report.startswith("# opct")
    assert "smoke run" in report
    assert (quick_run / "training_loss.png").is_file()


def test_demo_claims_follow_the_rows_not_the_code(quick_run, tmp_path):
    data = json.loads((quick_run / "results.json").read_text())
    # Tamper with a row: loading must notice that the stored claim no longer follows from it.
    for row in data["rows"]:
        if row["system"] == "opct" and row["metric"] == "sycophancy":
            row["seeds"] = {seed: 5.0 + float(seed) for seed in row["seeds"]}
            row["value"] = 6.0
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="opct_less_sycophantic_than_sft"):
        load_results(tmp_path / "results.json")


def test_bad_out_path_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--out", str(blocker / "sub")])
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("opct: error: --out")


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


def test_truncated_model_folder_is_one_line(tmp_path, micro_path, capsys):
    broken = tmp_path / "model"
    shutil.copytree(micro_path, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--out", str(tmp_path / "o"), "--model", str(broken)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "model.safetensors" in err


def test_pairs_command_writes_jsonl_the_demo_reads(tmp_path, capsys):
    path = tmp_path / "pairs.jsonl"
    assert main(["pairs", "--out", str(path), "-n", "12"]) == 0
    pairs = load_pairs(path)
    assert len(pairs) == 12
    assert {p.kind for p in pairs} <= {"sycophancy", "jailbreak", "benign", "safety"}


def test_sweep_bad_input_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    for argv in (
        ["sweep", "--out", str(blocker)],
        ["sweep", "--out", str(tmp_path / "o"), "--model", str(tmp_path / "none")],
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert err.startswith("opct: error:")
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
    assert len(ratio.seeds) == 2
