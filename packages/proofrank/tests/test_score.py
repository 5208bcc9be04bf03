"""proofrank score: one line per proof, and bad proof files as one-line errors."""

import json

import pytest
from proofrank.cli import main
from proofrank.problems import shipped_problems


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
