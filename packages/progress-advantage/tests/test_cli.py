import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from progress_advantage import Trajectory, __version__, write_trajectories
from progress_advantage.cli import main

from paperstack.records import load_results


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "bench", "score", "best-of-n", "uq", "attribute", "beam"):
        assert command in out


def test_console_script_help_is_installed():
    script = shutil.which("progress-advantage", path=str(Path(sys.executable).parent))
    assert script is not None, "the progress-advantage console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


@pytest.fixture(scope="module")
def models(tmp_path_factory, micro):
    policy, reference, tok = micro
    root = tmp_path_factory.mktemp("models")
    for name, m in (("policy", policy), ("reference", reference)):
        m.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return root


def _data(path):
    trajs = []
    answers = {"1+2=": 3, "2*3=": 6}  # known answers (no eval of text)
    for g, (prompt, cands) in enumerate(
        [("1+2=", ["1+2=3\nAnswer: 3", "1+2=4\nAnswer: 4"]), ("2*3=", ["2*3=6\nAnswer: 6"])]
    ):
        for j, c in enumerate(cands):
            ok = c.endswith(str(answers[prompt]))
            trajs.append(
                Trajectory.from_lines(
                    prompt,
                    c,
                    id=f"{g}-{j}",
                    group=str(g),
                    success=ok,
                    first_error=None if ok else 0,
                )
            )
    return write_trajectories(path, trajs)


def test_score_then_uses_on_jsonl(tmp_path, models, capsys):
    data = _data(tmp_path / "t.jsonl")
    scored = tmp_path / "s.jsonl"
    args = ["--policy", str(models / "policy"), "--reference", str(models / "reference")]
    assert main(["score", *args, "--in", str(data), "--out", str(scored), "--beta", "0.1"]) == 0
    rec = [json.loads(x) for x in scored.read_text().splitlines()]
    assert len(rec) == 3
    assert all(len(r["step_scores"]) == 2 for r in rec)
    assert main(["best-of-n", "--in", str(scored), "--out", str(tmp_path / "b.jsonl")]) == 0
    assert len((tmp_path / "b.jsonl").read_text().splitlines()) == 2
    assert main(["uq", "--in", str(scored)]) == 0
    assert main(["attribute", "--in", str(scored)]) == 0
    out = capsys.readouterr().out
    assert "AUROC" in out
    assert "top-1 accuracy" in out


def test_uses_refuse_unscored_trajectories(tmp_path, capsys):
    data = _data(tmp_path / "t.jsonl")
    with pytest.raises(SystemExit) as exc:
        main(["best-of-n", "--in", str(data)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "step_scores" in err
    assert "line 1" in err


def test_trajectories_without_steps_are_a_one_line_error(tmp_path, models, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "score",
                "--policy",
                str(models / "policy"),
                "--reference",
                str(models / "reference"),
                "--in",
                str(bad),
                "--out",
                str(tmp_path / "o.jsonl"),
            ]
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("progress-advantage: error:")
    assert "bad.jsonl: line 1" in err


def test_different_tokenizers_are_a_one_line_error(tmp_path, models, capsys):
    from paperstack import tiny

    other = tiny.build_tokenizer()
    other.add_tokens(["<extra>"])
    model = tiny.build_model("micro", other, 0)
    model.save_pretrained(tmp_path / "other")
    other.save_pretrained(tmp_path / "other")
    data = _data(tmp_path / "t.jsonl")
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "score",
                "--policy",
                str(models / "policy"),
                "--reference",
                str(tmp_path / "other"),
                "--in",
                str(data),
                "--out",
                str(tmp_path / "o.jsonl"),
            ]
        )
    assert exc.value.code == 2
    assert "different tokenizers" in capsys.readouterr().err


def test_missing_model_is_a_one_line_error(tmp_path, capsys):
    data = _data(tmp_path / "t.jsonl")
    with pytest.raises(SystemExit):
        main(
            [
                "score",
                "--policy",
                str(tmp_path / "nope"),
                "--reference",
                str(tmp_path / "nope"),
                "--in",
                str(data),
                "--out",
                str(tmp_path / "o.jsonl"),
            ]
        )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "cannot load model" in err


def test_bench_writes_ratios(tmp_path):
    assert (
        main(
            [
                "bench",
                "--out",
                str(tmp_path),
                "--preset",
                "micro",
                "--trajectories",
                "8",
                "--repeats",
                "2",
            ]
        )
        == 0
    )
    results = load_results(tmp_path / "bench.json")
    assert results.row("confidence (policy only)", "time_ratio").value == 1.0
    assert results.row("progress-advantage (policy + reference)", "time_ratio").value > 1.0


def test_bad_out_path_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--out", str(blocker / "sub")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("progress-advantage: error: --out")


@pytest.mark.slow
def test_demo_quick_writes_results_with_the_four_claims(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "results.json")  # validates and recomputes every claim
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == {
        "pa_matches_exact_advantage",
        "pa_bon_beats_confidence",
        "pa_auroc_beats_confidence",
        "pa_attribution_above_chance",
    }
    assert (tmp_path / "report.md").read_text().startswith("# progress-advantage")


def test_demo_with_a_missing_model_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--out", str(tmp_path / "o"), "--model", str(tmp_path / "no-model")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--model" in err
