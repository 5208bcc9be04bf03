from __future__ import annotations

import json

import pytest
from debate_ledger.cli import main
from debate_ledger.rebuild import FILES, rebuild, tree_digest


def test_rebuild_is_byte_identical(small_ledger, tmp_path):
    rebuild(small_ledger, tmp_path / "a")
    rebuild(small_ledger, tmp_path / "b")
    a, b = tree_digest(tmp_path / "a"), tree_digest(tmp_path / "b")
    assert set(a) == set(FILES)
    assert a == b


def test_rebuild_tables_split_onsets_and_cluster_by_question(small_ledger, tmp_path):
    summary = rebuild(small_ledger, tmp_path / "t")
    g = summary["all"]
    assert sum(g["collapse_onsets"].values()) == g["collapses"]
    assert sum(g["correction_onsets"].values()) == g["corrections"]
    assert g["final_accuracy"]["method"] == "cluster-bootstrap"
    lo, hi = g["final_accuracy"]["ci95"]
    assert lo < g["final_accuracy"]["value"] < hi
    onsets = (tmp_path / "t" / "onsets.md").read_text()
    assert "## Collapses" in onsets
    assert "## Corrections" in onsets
    u = summary["replay"][0]["utility_per_debate"]
    assert u["value"] * summary["debates"] == pytest.approx(summary["replay"][0]["utility"])
    assert summary["vote"]["vote_calls_per_debate"] == summary["vote"]["calls_per_debate"] == 9


def test_cost_card_counts_every_call_and_uses_the_price_table(small_ledger, tmp_path):
    prices = tmp_path / "prices.json"
    table = {f"scripted/{f}": {"input_per_mtok": 1.0, "output_per_mtok": 2.0} for f in "abc"}
    prices.write_text(json.dumps(table))
    summary = rebuild(small_ledger, tmp_path / "out", prices=prices)
    cc = summary["cost_card"]["scripted/a"]
    assert cc["calls"] == 40 * 3 * 5
    assert cc["dollars"] == pytest.approx(cc["tokens_in"] / 1e6 + 2 * cc["tokens_out"] / 1e6)
    assert summary["cost_card"]["all"]["calls"] == 3 * 40 * 3 * 5


def test_recode_reports_what_moved(small_ledger, tmp_path):
    summary = rebuild(small_ledger, tmp_path / "r", recode="strict-final-v1")
    rc = summary["recode"]
    assert rc["coder"] == "strict-final-v1"
    assert rc["parsed_after"] < rc["parsed_before"]  # scripted texts have no ANSWER: lines
    assert rc["rows_changed"] > 0
    assert (tmp_path / "r" / "recode.md").is_file()
    same = rebuild(small_ledger, tmp_path / "s", recode="letter-v2")
    assert same["recode"]["rows_changed"] == 0


def test_cli_rebuild_validate_and_exact_p(small_ledger, tmp_path, capsys):
    assert main(["validate", str(small_ledger)]) == 0
    assert "3 model(s) in 3 family(ies)" in capsys.readouterr().out
    assert main(["rebuild", str(small_ledger), "--out", str(tmp_path / "t")]) == 0
    assert (tmp_path / "t" / "transitions.md").is_file()
    argv = [
        "exact-p",
        *["1", "2", "3", "4", "5", "6", "7"],
        "--vs",
        *["2", "1", "4", "3", "5", "7", "6"],
    ]
    assert main(argv) == 0
    assert "exact two-sided p = 0.012302" in capsys.readouterr().out
    xs = [str(i) for i in range(12)]
    assert main(["exact-p", *xs, "--vs", *reversed(xs)]) == 0
    assert "Monte-Carlo two-sided p" in capsys.readouterr().out
    assert main(["screen", str(small_ledger)]) == 0
    assert "combined score" in capsys.readouterr().out


def test_cli_bad_ledger_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema": "debate-ledger/9"}\n')
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(bad)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "bad.jsonl:1: schema 'debate-ledger/9'" in err
