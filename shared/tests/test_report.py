"""Markdown tables, claims and figures from results."""

from __future__ import annotations

from pathlib import Path

from paperstack.records import Claim, Manifest, Results, Row
from paperstack.report import bar_chart, claims_table, markdown_table, write_report


def _results() -> Results:
    rows = [
        Row(system="method", metric="acc", value=0.912, ci95=(0.881, 0.937), n=400),
        Row(system="baseline", metric="acc", value=0.8, n=400),
    ]
    claim = Claim.compare(
        "beats", "method | beats baseline", rows, ("method", "acc"), "gt", ("baseline", "acc")
    )
    return Results(manifest=Manifest.collect("pkg", "0.1.0", seed=0), rows=rows, claims=[claim])


def test_markdown_table_shows_value_interval_and_n() -> None:
    table = markdown_table(_results().rows)
    lines = table.strip().splitlines()
    assert lines[0] == "| system | metric | value [95% CI] | n |"
    assert lines[2] == "| method | acc | 0.912 [0.881, 0.937] | 400 |"
    assert lines[3] == "| baseline | acc | 0.8 | 400 |"
    assert markdown_table([]) == "_no rows_\n"


def test_claims_table_escapes_and_explains() -> None:
    text = claims_table(_results().claims)
    assert "method \\| beats baseline" in text
    assert "| beats | yes |" in text
    assert "method/acc (0.912) - baseline/acc (0.8)" in text


def test_report_and_figure(tmp_path: Path) -> None:
    res = _results()
    fig = bar_chart(res.rows, "acc", tmp_path / "acc.png")
    assert fig.read_bytes()[:4] == b"\x89PNG"
    report = write_report(tmp_path, res, "Toy", intro="What ran.", figures=[fig])
    text = report.read_text()
    assert text.startswith("# Toy\n")
    assert "![acc](acc.png)" in text
    assert "- seed: 0" in text
