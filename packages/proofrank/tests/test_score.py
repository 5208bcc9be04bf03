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
            {"problem_id": p.id, "proof": "I cannot prove this."},
        ],
    )
    assert main(["score", "--proofs", str(proofs), "--out", str(tmp_path / "o")]) == 0
    lines = [json.loads(x) for x in (tmp_path / "o" / "scores.jsonl").read_text().splitlines()]
    assert [x["verdict"] for x in lines] == ["correct", "unverified", "incorrect"]
    assert [x["correct"] for x in lines] == [True, None, False]
    assert lines[1]["verbosity"] is None  # gated
    assert "3 proofs: 1 correct, 1 incorrect, 1 unverified" in capsys.readouterr().out


def test_score_does_not_mark_a_correct_proof_outside_the_references_incorrect(tmp_path, capsys):
    """Issue #49's acceptance test: ineq-01 proved by (x-1)^2/x >= 0, which no shipped
    reference does, is unverified (correctness unknown), not incorrect, and gets no quality."""
    proof = (
        "Put $x = \\frac{a}{b}$, so $x > 0$ and $\\frac{b}{a} = \\frac{1}{x}$.\n"
        "Then $\\frac{a}{b} + \\frac{b}{a} - 2 = \\frac{x^2 - 2x + 1}{x} = \\frac{(x-1)^2}{x}$.\n"
        "Since $(x-1)^2 \\ge 0$ and $x > 0$, we have $\\frac{(x-1)^2}{x} \\ge 0$, the claim."
    )
    proofs = _proofs(tmp_path, [{"problem_id": "ineq-01", "proof": proof}])
    assert main(["score", "--proofs", str(proofs), "--out", str(tmp_path / "o")]) == 0
    [line] = [json.loads(x) for x in (tmp_path / "o" / "scores.jsonl").read_text().splitlines()]
    assert line["verdict"] == "unverified"
    assert line["correct"] is None  # never False
    assert line["verbosity"] is None
    assert line["tier"] is None
    out = capsys.readouterr().out
    assert "0 incorrect, 1 unverified" in out


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
