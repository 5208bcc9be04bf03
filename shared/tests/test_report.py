"""Markdown tables, claims and figures from results."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperstack.records import Claim, Manifest, Results, Row
from paperstack.report import (
    bar_chart,
    claims_table,
    format_value,
    markdown_table,
    write_report,
)


def _results() -> Results:
    rows = [
        Row(system="method", metric="acc", value=0.912, ci95=(0.881, 0.937), n=400),
        Row(system="baseline", metric="acc", value=0.8, ci95=(0.758, 0.837), n=400),
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
    assert lines[3] == "| baseline | acc | 0.800 [0.758, 0.837] | 400 |"
    assert markdown_table([]) == "_no rows_\n"


def test_claims_table_escapes_and_explains() -> None:
    text = claims_table(_results().claims)
    assert "method \\| beats baseline" in text
    assert "| beats | held |" in text
    assert "0.112 [0.0637, 0.161]" in text  # d and its interval (normal approximation)
    assert "method/acc - baseline/acc > 0; normal, n=400" in text
    assert "1 held / 0 not held / 0 inconclusive" in text


def test_claims_table_names_the_premise_that_gated_a_claim() -> None:
    res = _results()
    premise = Claim.compare("premise", "baseline fails", res.rows, ("baseline", "acc"), "lt", 0.5)
    gated = Claim.compare(
        "beats", "b", res.rows, ("method", "acc"), "gt", ("baseline", "acc"), requires=[premise]
    )
    text = claims_table([premise, gated])
    assert "| beats | **inconclusive** (premise `premise` not held; measured alone: held) |" in text
    assert "0.112 [0.0637, 0.161]" in text  # what was measured stays in the table


def test_numbers_keep_the_precision_claims_need() -> None:
    assert format_value(0.99987, (0.99981, 0.99992)) == "0.999870 [0.999810, 0.999920]"
    assert format_value(12.045) == "12.045"
    assert format_value(101049.0) == "101049"
    assert format_value(0.5, (0.4, 0.6)) == "0.500 [0.400, 0.600]"


def test_report_and_figure(tmp_path: Path) -> None:
    res = _results()
    fig = bar_chart(res.rows, "acc", tmp_path / "acc.png")
    assert fig.read_bytes()[:4] == b"\x89PNG"
    report = write_report(tmp_path, res, "Toy", intro="What ran.", figures=[fig])
    text = report.read_text()
    assert text.startswith("# Toy\n")
    assert "![acc](acc.png)" in text
    assert "- seed: 0" in text
    model = res.manifest.host.get("cpu_model")
    if model:  # Linux: the host line names the CPU the numbers came from
        assert f"CPUs ({model}, flags {res.manifest.host['cpu_flags']})" in text


def test_the_run_section_says_when_the_cores_were_shared() -> None:
    from paperstack.report import _load_text

    assert _load_text({"cpus": 2}) == ""  # older manifests: nothing claimed
    quiet = _load_text({"cpus": 2, "loadavg": [0.4, 0.5, 0.6], "loadavg_at_finish": [1.1, 1, 1]})
    assert quiet == ", load average 0.4 at the start, 1.1 at the end"
    busy = _load_text({"cpus": 2, "loadavg": [0.4, 0.5, 0.6], "loadavg_at_finish": [12.5, 9, 8]})
    assert busy.endswith("(the cores were shared: timings are not a quiet machine's)")


def test_a_manifest_records_the_load_at_start_and_finish() -> None:
    import os

    if not hasattr(os, "getloadavg"):
        pytest.skip("no load average on this platform")
    m = Manifest.collect("p", "0.1").finish()
    assert len(m.host["loadavg"]) == 3
    assert len(m.host["loadavg_at_finish"]) == 3
