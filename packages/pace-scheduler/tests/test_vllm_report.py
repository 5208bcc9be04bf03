"""The vLLM-engine report (written outside ``ContractCLI``) carries the design note, the
package's design history for ``vllm-sweep`` and the pre-registration section, like every report."""

from __future__ import annotations

from pathlib import Path

from pace_scheduler.vllm_report import write_vllm_report
from pace_scheduler.vllm_sweep import VLLMPlan


def test_report_has_design_note_and_history(tmp_path: Path) -> None:
    config = {
        "profile": {"r2": 0.9, "steps": 12, "decode_ms_by_width": {"1": 78.0, "16": 130.0}},
        "tpot_slo_s": 0.117,
        "ttft_slo_s": 1.5,
        "capacity_rps": 2.0,
        "cpu_budget_s": 1500.0,
        "cpu_seconds": 10.0,
        "design_note": "seed 2 added after\n seeds 0-1 were seen (exploratory)",
    }
    results = write_vllm_report(tmp_path, [], config, VLLMPlan(), "0.3.0")
    assert results.claims == []  # no runs, no loads: nothing to judge
    report = (tmp_path / "report.md").read_text()
    assert "Design note: seed 2 added after\n seeds 0-1 were seen (exploratory)" in report
    history = report[report.index("## Design history") : report.index("## Run")]
    # the package CHANGELOG's vllm-sweep lines, and no line of another command
    assert "(seeds):" in history
    assert "(budget):" in history
    assert "(claim):" not in history  # the demo's premise-gate change is not this command's
    assert "## Pre-registration" in report
