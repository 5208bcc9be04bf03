import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from proofrank import __version__
from proofrank.cli import main
from proofrank.problems import shipped_problems

from paperstack.records import load_results

CLAIMS = {
    "premise_judge_tells_complete_from_incomplete",
    "gate_rejects_incomplete_proofs",
    "conciseness_orders_provers",
    "ease_orders_provers",
    "simplicity_orders_provers",
    "diversity_orders_provers",
    "adaptivity_orders_provers",
    "quality_not_captured_by_correctness",
}


def test_console_script_help_is_installed():
    script = shutil.which("proofrank", path=str(Path(sys.executable).parent))
    assert script is not None, "the proofrank console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout
    assert "score" in proc.stdout


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    assert main(["demo", "--quick", "--no-progress", "--out", str(out)]) == 0
    return out


def test_demo_quick_writes_the_issue_claims(quick):
    results = load_results(quick / "results.json")  # recomputes every verdict
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    assert results.claims[0].id.startswith("premise_")
    row = results.row("verbose", "verbosity", "test")
    assert row.items is not None
    assert len(row.items) == 12
    assert results.manifest.config["samples"] == 3
    assert (quick / "report.md").read_text().startswith("# proofrank")


def _proofs(tmp_path, lines, encoding="utf-8"):
    path = tmp_path / "proofs.jsonl"
    path.write_bytes("\n".join(json.dumps(x, ensure_ascii=False) for x in lines).encode(encoding))
    return path


def test_score_writes_one_line_per_proof(tmp_path, capsys):
    p = shipped_problems().get("ineq-02")
    proofs = _proofs(
        tmp_path,
        [
            {"problem_id": p.id, "proof": p.references[0].proof},
            {"problem_id": p.id, "proof": "It is obvious."},
        ],
    )
    assert main(["score", "--proofs", str(proofs), "--out", str(tmp_path / "o")]) == 0
    lines = [json.loads(x) for x in (tmp_path / "o" / "scores.jsonl").read_text().splitlines()]
    assert [x["correct"] for x in lines] == [True, False]
    assert lines[1]["verbosity"] is None  # gated
    assert "2 proofs: 1 correct" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ([{"problem_id": "nope", "proof": "x"}], "no problem with id 'nope'"),
        ([{"problem_id": "ineq-02"}], "needs string fields"),
        ([], "no proofs"),
    ],
)
def test_bad_proof_files_are_one_line_errors(tmp_path, capsys, content, match):
    proofs = _proofs(tmp_path, content)
    with pytest.raises(SystemExit) as exc:
        main(["score", "--proofs", str(proofs), "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert match in err


def test_proofs_in_the_wrong_encoding_are_one_line_errors(tmp_path, capsys):
    proofs = _proofs(tmp_path, [{"problem_id": "ineq-02", "proof": "d\u00e9j\u00e0 vu"}], "latin-1")
    with pytest.raises(SystemExit):
        main(["score", "--proofs", str(proofs), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "not UTF-8" in err
    assert "line 1" in err


def test_demo_refuses_a_problem_set_that_is_a_directory(tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--problems", str(tmp_path), "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "is a directory" in err
    assert not out.exists()
