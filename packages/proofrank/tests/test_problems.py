import json

import pytest
from proofrank.errors import ProofRankError
from proofrank.problems import DOMAINS, load_problems, shipped_problems


def test_shipped_set_has_the_promised_shape():
    ps = shipped_problems()
    assert len(ps) >= 30
    assert len(ps.split("dev")) == 10
    assert len(ps.split("test")) == 33
    assert {p.domain for p in ps} >= {"algebra", "number_theory", "combinatorics", "inequalities"}
    assert all(p.domain in DOMAINS and p.references and p.difficulty_note for p in ps)


def _write(tmp_path, obj, name="set.jsonl"):
    path = tmp_path / name
    path.write_text(json.dumps(obj) + "\n", encoding="utf-8")
    return path


def _problem(**over):
    p = json.loads(shipped_problems().get("ineq-02").model_dump_json())
    p.update(over)
    return p


def test_own_set_round_trips(tmp_path):
    ps = load_problems(_write(tmp_path, _problem(id="mine")))
    assert ps.ids == ["mine"]


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        (_problem(references=[]), "has no reference proof"),
        ({k: v for k, v in _problem().items() if k != "references"}, "has no reference proof"),
        (_problem(difficulty=9), "difficulty"),
        (_problem(domain="poetry"), "domain"),
    ],
)
def test_invalid_problems_are_one_line_errors(tmp_path, obj, match):
    with pytest.raises(ProofRankError, match=match) as exc:
        load_problems(_write(tmp_path, obj))
    assert "line 1" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_unknown_technique_is_named(tmp_path):
    p = _problem()
    p["references"][0]["techniques"] = ["telepathy"]
    with pytest.raises(ProofRankError, match="unknown technique 'telepathy'"):
        load_problems(_write(tmp_path, p))


def test_wrong_encodings_directories_and_missing_files(tmp_path):
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(json.dumps(_problem()).replace("Prove", "Pr\u00e9ve").encode("latin-1"))
    with pytest.raises(ProofRankError, match="not UTF-8"):
        load_problems(latin)
    utf16 = tmp_path / "utf16.jsonl"
    utf16.write_bytes(json.dumps(_problem()).encode("utf-16"))
    with pytest.raises(ProofRankError, match="UTF-16"):
        load_problems(utf16)
    with pytest.raises(ProofRankError, match="is a directory"):
        load_problems(tmp_path)
    with pytest.raises(ProofRankError, match="no such file"):
        load_problems(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(ProofRankError, match="line 1: not JSON"):
        load_problems(bad)
