"""Bad input is one line naming the file, field or value, and exit status 2: never a traceback,
never exit 0 with a wrong answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from debate_ledger.cli import main


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> str:
    """Exit 2 with one error line (argparse's own errors come after its usage lines)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    *usage, last = err.splitlines()
    assert not usage or usage[0].startswith("usage: "), err
    assert expected in last, err
    return last


def test_directory_where_a_ledger_belongs(tmp_path, capsys):
    _fails(capsys, ["validate", str(tmp_path)], f"{tmp_path}: is a directory")


def test_missing_ledger(tmp_path, capsys):
    _fails(capsys, ["rebuild", str(tmp_path / "no.jsonl"), "--out", str(tmp_path / "o")],
           "no.jsonl: no such file")  # fmt: skip


def test_rebuild_out_is_a_file(small_ledger, tmp_path, capsys):
    target = tmp_path / "file.txt"
    target.write_text("x")
    _fails(capsys, ["rebuild", str(small_ledger), "--out", str(target)], "is not a directory")


def test_prices_that_are_a_directory_or_negative(small_ledger, tmp_path, capsys):
    _fails(capsys, ["rebuild", str(small_ledger), "--out", str(tmp_path / "o"), "--prices",
                    str(tmp_path)], "not a readable JSON price table")  # fmt: skip
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"m": {"input_per_mtok": -1, "output_per_mtok": 1}}))
    _fails(capsys, ["rebuild", str(small_ledger), "--out", str(tmp_path / "o"), "--prices",
                    str(bad)], "m.input_per_mtok must be a number >= 0")  # fmt: skip


def test_unknown_gate_probe(small_ledger, tmp_path, capsys):
    _fails(capsys, ["replay", str(small_ledger), "--gate-probe", "vibes"], "unknown gate probe")


def test_exact_p_needs_paired_finite_values(capsys):
    _fails(capsys, ["exact-p", "1", "2", "3", "--vs", "1", "2"], "x has 3 values but --vs has 2")
    _fails(capsys, ["exact-p", "1", "2", "nan", "--vs", "1", "2", "3"], "finite")
    _fails(capsys, ["exact-p", "1", "2", "--vs", "2", "1"], "families, got 2")
    _fails(capsys, ["exact-p", "1", "1", "1", "--vs", "1", "2", "3"], "rho is undefined")


def test_run_with_a_ledger_directory_fails_before_loading_a_model(tmp_path, capsys):
    _fails(capsys, ["run", "--ledger", str(tmp_path), "--family", "f", "--model", "m"],
           "is a directory")  # fmt: skip
    _fails(capsys, ["run", "--ledger", str(tmp_path / "l.jsonl"), "--family", "f", "--model",
                    "m", "--cost-card", str(tmp_path)], "--cost-card")  # fmt: skip


def test_run_with_a_questions_directory(tmp_path, capsys):
    _fails(capsys, ["run", "--ledger", str(tmp_path / "l.jsonl"), "--family", "f", "--model",
                    "m", "--base-url", "http://127.0.0.1:9/v1", "--questions", str(tmp_path)],
           "is a directory")  # fmt: skip


def test_run_with_a_missing_local_model(tmp_path, capsys):
    _fails(capsys, ["run", "--ledger", str(tmp_path / "l.jsonl"), "--family", "f", "--model",
                    str(tmp_path / "nope")], "no such directory")  # fmt: skip
    assert not (tmp_path / "l.jsonl").exists()


def test_run_with_a_truncated_model_folder(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (model / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{")
    err = _fails(capsys, ["run", "--ledger", str(tmp_path / "l.jsonl"), "--family", "f",
                          "--model", str(model)], "model")  # fmt: skip
    assert "model.safetensors" in err or "config.json" in err or "tokenizer" in err


def test_run_with_impossible_numbers(tmp_path, capsys):
    base = ["run", "--ledger", str(tmp_path / "l.jsonl"), "--family", "f", "--model", "m"]
    _fails(capsys, [*base, "--agents", "0"], "must be >= 1")
    _fails(capsys, [*base, "--rounds", "-1"], "must be >= 1")
    _fails(capsys, [*base, "--temperature", "-0.5"], "must be in [0, 2]")
    _fails(capsys, [*base, "--seeds", "3-1"], "empty seed range")


def test_demo_refuses_cuda_and_dataset(tmp_path, capsys):
    _fails(capsys, ["demo", "--quick", "--out", str(tmp_path / "d"), "--device", "cuda"],
           "--device cuda")  # fmt: skip
    _fails(capsys, ["demo", "--quick", "--out", str(tmp_path / "e"), "--dataset", "q.jsonl"],
           "--dataset q.jsonl")  # fmt: skip
    assert not (tmp_path / "e").exists()  # a run that fails on input leaves no empty folder


def test_demo_with_a_missing_model_path(tmp_path, capsys):
    _fails(capsys, ["demo", "--quick", "--out", str(tmp_path / "d"), "--model",
                    str(tmp_path / "missing")], "no such directory")  # fmt: skip


def test_bench_with_too_few_debates(tmp_path, capsys):
    _fails(capsys, ["bench", "--out", str(tmp_path / "b"), "--debates", "0"], "must be >= 1")
    _fails(capsys, ["bench", "--out", str(tmp_path / "b"), "--debates", "50"], "at least 100")
    assert not Path(tmp_path / "b").exists()


def test_exact_p_states_a_limit_on_families(capsys):
    """Issue #46: G = 5000 ran Monte Carlo over 200,000 x 5000 draws without bound."""
    from debate_ledger.screen import MAX_G

    xs = [str(i) for i in range(5000)]
    _fails(capsys, ["exact-p", *xs, "--vs", *reversed(xs)],
           f"a permutation p takes at most {MAX_G} families, got 5000")  # fmt: skip


def test_exact_p_at_the_family_limit_runs(capsys):
    from debate_ledger.screen import MAX_G

    xs = [str(i) for i in range(MAX_G)]
    assert main(["exact-p", *xs, "--vs", *xs]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rho = 1.000000  Monte-Carlo two-sided p = ")


def test_rebuild_refuses_an_empty_out(small_ledger, tmp_path, capsys, monkeypatch):
    """Issue #46: ``--out ""`` meant the current folder: exit 0 and ./results.json overwritten."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results.json").write_text("mine")
    _fails(capsys, ["rebuild", str(small_ledger), "--out", ""], "--out: empty path")
    assert (tmp_path / "results.json").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


@pytest.mark.parametrize(("name", "positions"), [("gpt2", 1024), ("llama", 2048)])
def test_a_local_prompt_over_the_models_positions_is_one_line(name, positions, tmp_path, capsys):
    """issue #48: a GPT-2-style checkpoint past its 1,024 learned positions ended in an
    IndexError traceback, a RoPE one ran past its 2,048 with a warning only. Both are now one
    line before any row is written."""
    from paperstack.testing import zoo

    path = tmp_path / "q.jsonl"
    q = {"id": "q", "text": "Which one?", "options": ["a", "b"], "gold": "A"}
    path.write_text(json.dumps(q) + "\n")
    ledger = tmp_path / "l.jsonl"
    argv = ["run", "--ledger", str(ledger), "--family", "f", "--model",
            str(zoo.checkpoint(name)), "--questions", str(path), "--agents", "2", "--rounds",
            "1", "--resamples", "0", "--max-new-tokens", str(positions),
            "--no-progress"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"exceeds the model's {positions} positions" in err[0]
    assert not ledger.exists() or ledger.read_text() == ""
