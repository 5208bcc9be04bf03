import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mosa_rl import __version__
from mosa_rl.cli import main
from mosa_rl.demo import QUICK, DemoConfig, System, run_demo

from paperstack.records import Claim, ResultsFormatError, load_results

CLAIMS = {
    "mosa_passk_beats_tokenkl",
    "mosa_passk_beats_nokl",
    "mosa_pass1_not_worse",
    "mosa_flatter_top1",
}

#: Smaller than --quick: one GRPO step per system, a handful of problems (seconds).
TINY = DemoConfig(
    preset="micro",
    sft_steps=QUICK.sft_steps,
    grpo_steps=1,
    prompts_per_step=2,
    num_generations=4,
    max_completion_length=8,
    seeds=(0,),
    eval_problems=4,
    eval_samples=4,
    ks=(1, 2, 4),
    systems=(
        System("grpo-nokl"),
        System("grpo-tokenkl-0.01", beta=0.01),
        System("grpo-tokenkl-0.04", beta=0.04),
        System("mosa", mosa_beta=1.0),
    ),
)


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out
    assert "bench" in out


def test_console_script_help_is_installed():
    script = shutil.which("mosa", path=str(Path(sys.executable).parent))
    assert script is not None, "the mosa console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    run_demo(TINY, out, progress=False, workers=1)
    return out


def test_demo_writes_every_row_and_the_four_claims_from_rows(demo_dir):
    results = load_results(demo_dir / "results.json")  # validates and recomputes every claim
    assert results.manifest.package == "mosa-rl"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin
        )
        assert again.held == claim.held
    for system in ("base", "grpo-nokl", "grpo-tokenkl-0.01", "grpo-tokenkl-0.04", "mosa"):
        for metric in ("pass@1", "pass@4", "distinct_correct", "top1_mass", "token_entropy"):
            row = results.row(system, metric, "test")
            assert row.n == 1
            assert row.ci95 is not None
    assert (demo_dir / "report.md").read_text().startswith("# mosa-rl")
    assert (demo_dir / "profile.png").is_file()
    assert len((demo_dir / "runs.jsonl").read_text().splitlines()) == 5


def test_tampered_rows_break_the_stored_claims(demo_dir, tmp_path):
    data = json.loads((demo_dir / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "mosa" and row["metric"] == "top1_mass":
            row["value"] = -1.0  # would make mosa_flatter_top1 hold
    (tmp_path / "results.json").write_text(json.dumps(data))
    claim = next(c for c in data["claims"] if c["id"] == "mosa_flatter_top1")
    if claim["held"]:
        pytest.skip("the claim already held on this run")
    with pytest.raises(ResultsFormatError, match="mosa_flatter_top1"):
        load_results(tmp_path / "results.json")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "cuda:7"], "--device cuda:7: CUDA is not available"),
        (["--device", "tpu"], "--device tpu: use 'cpu' or 'cuda[:N]'"),
        (["--top-k", "0"], "--top-k 0: must be between 1 and 512"),
        (["--steps", "0"], "--steps 0: must be >= 1"),
        (["--mosa-beta", "-1"], "--mosa-beta -1.0: must be > 0"),
        (["--dataset", "/nonexistent/problems.jsonl"], "--dataset /nonexistent/problems.jsonl"),
    ],
)
def test_bad_demo_input_is_a_one_line_error(tmp_path, capsys, args, message):
    import torch

    if args[:1] == ["--device"] and torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--no-progress", "--out", str(tmp_path / "out"), *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("mosa: error: ")
    assert message in err


def test_bad_dataset_line_names_file_and_line(tmp_path, capsys):
    data = tmp_path / "problems.jsonl"
    data.write_text('{"numbers": [2, 4, 7], "target": 30}\n{"numbers": [1, 1, 1], "target": 99}\n')
    with pytest.raises(SystemExit):
        main(
            [
                "demo",
                "--quick",
                "--no-progress",
                "--out",
                str(tmp_path / "o"),
                "--dataset",
                str(data),
            ]
        )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{data}:2" in err
    assert "cannot be made" in err


def test_bad_out_path_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--out", str(blocker / "sub")])
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("mosa: error: --out")


def test_profile_cost_runs_for_the_baseline_and_a_k():
    from mosa_rl.bench import profile_cost

    assert profile_cost(0, tokens=32, hidden=8, vocab=64, repeats=1, device="cpu", seed=0) > 0
    assert profile_cost(4, tokens=32, hidden=8, vocab=64, repeats=1, device="cpu", seed=0) > 0


@pytest.mark.slow
def test_bench_quick_writes_ratios(tmp_path):
    assert main(["bench", "--quick", "--steps", "1", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.row("grpo-tokenkl", "step_time_ratio").value == 1.0
    assert results.row("mosa", "step_time_ratio").value > 0
    assert results.row("profile-k16", "head_time_ratio").value > 0


@pytest.mark.slow
def test_demo_quick_through_the_cli(tmp_path):
    assert main(["demo", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    assert {c.id for c in load_results(tmp_path / "results.json").claims} == CLAIMS
