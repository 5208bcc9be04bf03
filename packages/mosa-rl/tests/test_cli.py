import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mosa_rl import __version__
from mosa_rl.cli import main
from mosa_rl.demo import QUICK, DemoConfig, run_demo

from paperstack.records import Claim, ResultsFormatError, load_results

CLAIMS = [
    "premise_grpo_raises_pass1",
    "premise_grpo_collapses_passk",
    "mosa_passk_beats_tokenkl",
    "mosa_passk_beats_nokl",
    "mosa_pass1_not_worse",
    "mosa_more_distinct_solutions",
    "mosa_flatter_top1",
    "mosa_forward_passk_beats_tokenkl",
]
SYSTEMS = ("base", "grpo-nokl", "grpo-tokenkl", "mosa", "mosa-forward")

#: Smaller than --quick: one GRPO step per system, a handful of problems, two seeds, and a
#: one-point validation grid per method, so the matched-KL path runs too (seconds).
TINY = DemoConfig(
    preset="micro",
    sft_steps=QUICK.sft_steps,
    grpo_steps=1,
    prompts_per_step=2,
    num_generations=4,
    max_completion_length=6,
    eval_problems=4,
    eval_samples=4,
    ks=(1, 2, 4),
    token_kl_grid=(0.04,),
    mosa_grid=(30.0,),
    validation_problems=2,
    validation_samples=2,
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
    proc = subprocess.run([script, "demo", "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "--mosa-forward-beta" in proc.stdout


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    result = run_demo(TINY, out, (0, 1), workers=1, log=lambda _: None)
    from paperstack.records import Manifest, Results, write_results

    manifest = Manifest.collect("mosa-rl", __version__).finish()
    write_results(out / "results.json", Results(manifest=manifest, rows=result.rows,
                                                claims=result.claims))  # fmt: skip
    return out, result


def test_demo_has_the_premise_first_and_every_claim_from_rows(demo_dir):
    out, _result = demo_dir
    results = load_results(out / "results.json")  # validates and recomputes every claim
    assert [c.id for c in results.claims] == CLAIMS
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin
        )
        assert again.verdict == claim.verdict
        assert claim.method == "paired-t"  # per-seed rows on shared seeds pair
        assert claim.n == 2


def test_rows_carry_per_seed_and_per_problem_values(demo_dir):
    out, _ = demo_dir
    results = load_results(out / "results.json")
    for system in SYSTEMS:
        for metric in ("pass@1", "pass@4", "distinct_correct", "top1_mass", "kl_to_base"):
            row = results.row(system, metric, "test")
            assert set(row.seeds) == {"0", "1"}
        by_problem = results.row(system, "pass@4", "test-by-problem")
        assert len(by_problem.items) == TINY.eval_problems
    assert results.row("base", "kl_to_base", "test").value == 0.0
    # the validation grid is reported whole, and never as a result with an interval
    grid = [r for r in results.rows if r.split == "validation"]
    assert {r.system for r in grid} == {
        "grpo-nokl", "grpo-tokenkl-0.04", "mosa-30", "mosa-forward-30"
    }  # fmt: skip
    assert all(r.ci95 is None for r in grid)


def test_matched_kl_choice_is_recorded(demo_dir):
    _, result = demo_dir
    assert result.choice["betas"] == {"grpo-tokenkl": 0.04, "mosa": 30.0, "mosa-forward": 30.0}
    assert result.choice["target_kl"] == pytest.approx(0.5 * result.choice["nokl_kl"])


def test_rerun_resumes_from_the_log_without_training(demo_dir, tmp_path, monkeypatch):
    out, first = demo_dir
    folder = tmp_path / "again"
    shutil.copytree(out, folder)
    lines = (folder / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 4 + 2 * 5  # validation grid + seeds x (base + 4 systems)
    import mosa_rl.demo as demo_module

    def no_training(*_args, **_kw):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(demo_module, "run_system", no_training)
    messages: list[str] = []
    again = run_demo(TINY, folder, (0, 1), workers=1, log=messages.append)
    assert any("resuming" in m and "14 of 14" in m for m in messages)
    assert [c.verdict for c in again.claims] == [c.verdict for c in first.claims]
    assert len((folder / "runs.jsonl").read_text().splitlines()) == 14


def test_interrupted_log_is_resumed_cleanly_not_appended(demo_dir, tmp_path):
    """0.1 appended every rerun after Ctrl-C to the stale lines (4 -> 9). Now: a torn last line
    and lines of another configuration are dropped, finished runs are kept, the rest rerun."""
    out, _ = demo_dir
    folder = tmp_path / "torn"
    folder.mkdir()
    lines = (out / "runs.jsonl").read_text().splitlines()
    stale = json.loads(lines[0])
    stale["fingerprint"] = "another-config"
    torn = [*lines[:5], json.dumps(stale), lines[5][: len(lines[5]) // 2]]
    (folder / "runs.jsonl").write_text("\n".join(torn))  # no final newline: a killed writer
    messages: list[str] = []
    run_demo(TINY, folder, (0, 1), workers=1, log=messages.append)
    assert any("5 of 14 runs done" in m for m in messages)
    final = [json.loads(x) for x in (folder / "runs.jsonl").read_text().splitlines()]
    assert len(final) == 14
    assert len({r["job"] for r in final}) == 14
    assert {r["fingerprint"] for r in final} == {json.loads(lines[0])["fingerprint"]}


def test_tampered_rows_break_the_stored_claims(demo_dir, tmp_path):
    out, _ = demo_dir
    data = json.loads((out / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "mosa" and row["metric"] == "top1_mass" and row["split"] == "test":
            row["seeds"] = {k: v - 0.5 for k, v in row["seeds"].items()}
            row["value"] -= 0.5
            row["ci95"] = [row["ci95"][0] - 0.5, row["ci95"][1] - 0.5]
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="mosa_flatter_top1"):
        load_results(tmp_path / "results.json")


def _one_line_error(capsys, argv, code=2):
    """The error line (argparse puts its usage lines first; our own errors are one line)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == code
    lines = capsys.readouterr().err.strip().splitlines()
    assert not any("Traceback" in line for line in lines)
    if lines[0].startswith("usage:"):
        assert lines[-1].startswith("mosa demo: error: argument ")
    else:
        assert len(lines) == 1, lines
        assert lines[0].startswith("mosa: error: ")
    return lines[-1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "tpu"], "--device tpu"),
        (["--top-k", "0"], "--top-k: must be >= 1, got 0"),
        (["--top-k", "500"], "--top-k: top_k=500: larger than the vocabulary (103 tokens)"),
        (["--steps", "0"], "--steps: must be >= 1"),
        (["--mosa-beta", "-1"], "--mosa-beta: must be > 0"),
        (["--token-kl-beta", "nan"], "--token-kl-beta: must be a finite number"),
        (["--workers", "0"], "--workers: must be >= 1"),
        (["--seeds", "0,100"], "--seeds: 100 is the validation seed"),
        (["--dataset", "/nonexistent/problems.jsonl"], "--dataset /nonexistent/problems.jsonl"),
        (["--model", "/nonexistent/model"], "--model /nonexistent/model: no such directory"),
    ],
)
def test_bad_demo_input_is_a_one_line_error(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    err = _one_line_error(capsys, ["demo", "--quick", "--no-progress", "--out", str(out), *args])
    assert message in err
    assert not out.exists()  # a run that fails on its input leaves no empty folder


def test_cuda_on_a_cpu_build_is_one_line(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    err = _one_line_error(capsys, ["demo", "--quick", "--device", "cuda", "--out", str(tmp_path)])
    assert "--device cuda: not available here" in err


def test_dataset_that_is_a_directory_is_one_line(tmp_path, capsys):
    err = _one_line_error(
        capsys, ["demo", "--quick", "--out", str(tmp_path / "o"), "--dataset", str(tmp_path)]
    )
    assert "is a directory" in err


def test_bad_dataset_line_names_file_and_line(tmp_path, capsys):
    data = tmp_path / "problems.jsonl"
    data.write_text('{"numbers": [2, 4, 7], "target": 30}\n{"numbers": [1, 1, 1], "target": 99}\n')
    err = _one_line_error(
        capsys, ["demo", "--quick", "--out", str(tmp_path / "o"), "--dataset", str(data)]
    )
    assert f"{data}:2" in err
    assert "cannot be made" in err


def test_truncated_model_folder_names_the_file(tmp_path, capsys):
    from paperstack import tiny

    folder = tmp_path / "model"
    tok = tiny.build_tokenizer()
    tiny.build_model("micro", tok, seed=0).save_pretrained(folder)
    tok.save_pretrained(folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    err = _one_line_error(
        capsys, ["demo", "--quick", "--out", str(tmp_path / "o"), "--model", str(folder)]
    )
    assert "model.safetensors" in err
    assert "truncated" in err


def test_out_that_is_a_file_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    err = _one_line_error(capsys, ["demo", "--quick", "--out", str(blocker)])
    assert "--out" in err


def test_run_log_that_is_a_directory_is_one_line(tmp_path, capsys):
    (tmp_path / "runs.jsonl").mkdir()
    err = _one_line_error(capsys, ["demo", "--quick", "--no-progress", "--out", str(tmp_path)])
    assert "runs.jsonl: is a directory" in err


def test_profile_cost_runs_for_the_baseline_and_a_k():
    from mosa_rl.bench import profile_cost

    assert all(t > 0 for t in profile_cost(0, 32, 8, 64, repeats=2, device="cpu", seed=0))
    assert len(profile_cost(4, 32, 8, 64, repeats=2, device="cpu", seed=0)) == 2


@pytest.mark.slow
def test_bench_quick_writes_ratios(tmp_path):
    assert main(["bench", "--quick", "--steps", "2", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.row("mosa", "step_time_ratio").value > 0
    assert results.row("profile-k16", "head_time_ratio").items is not None


@pytest.mark.slow
def test_demo_quick_through_the_cli(tmp_path):
    assert main(["demo", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    assert [c.id for c in load_results(tmp_path / "results.json").claims] == CLAIMS
