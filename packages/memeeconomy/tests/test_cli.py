import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from memeeconomy import __version__
from memeeconomy.cli import main
from memeeconomy.demo import build_claims, market_rows, run_markets
from memeeconomy.events import shipped_events

from paperstack.records import Claim, ResultsFormatError, Row, load_results

CLAIMS = {
    "premise_null_population_has_no_pressure_effect",
    "premise_null_population_has_no_ack_suppression",
    "premise_deterrence_is_detectable",
    "premise_held_out_split_is_disjoint",
    "pressure_raises_harm",
    "pressure_effect_matches_planted",
    "acknowledgement_suppressed_under_pressure",
    "moderation_does_not_deter",
    "verifier_beats_zero_shot",
    "verifier_beats_zero_shot_in_distribution",
    "verifier_beats_keyword_rules_held_out",
}


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "bench", "simulate"):
        assert command in out


def test_console_script_help_is_installed():
    script = shutil.which("memeeconomy", path=str(Path(sys.executable).parent))
    assert script is not None, "the memeeconomy console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_market_claims_recover_the_planted_effects(tmp_path):
    stats, _ = run_markets(shipped_events(), 0, tmp_path)
    rows, _ = market_rows(stats)
    rows.append(Row(system="splits", metric="shared_events_or_agents", value=0.0, n=1))
    for system in ("memeagent", "best-zero-shot", "keyword-rules"):
        for split in ("test_id", "test_ho"):
            rows.append(Row.from_items(system, "accuracy", {i: float(i % 2) for i in range(20)},
                                       split=split))  # fmt: skip
    claims = {c.id: c for c in build_claims(rows)}
    assert set(claims) == CLAIMS
    assert claims["pressure_raises_harm"].requires == (
        "premise_null_population_has_no_pressure_effect",
    )
    assert claims["premise_deterrence_is_detectable"].held
    assert claims["acknowledgement_suppressed_under_pressure"].held
    pim = next(r for r in rows if r.system == "survival" and r.metric == "pressure_effect")
    assert pim.ci95[0] <= 0.15 <= pim.ci95[1]  # the planted size inside the interval
    steady = next(r for r in rows if r.system == "steady" and r.metric == "pressure_effect")
    assert abs(steady.value) < 0.06


def test_simulate_runs_and_resumes_a_ledger(tmp_path, capsys):
    ledger = tmp_path / "m.jsonl"
    argv = ["simulate", "--ledger", str(ledger), "--rounds", "5", "--agents", "4"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "20 decisions (20 asked now)" in out
    assert main(argv) == 0
    assert "20 decisions (0 asked now)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--p-remove", "0.2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "different configuration" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["simulate", "--ledger", "L", "--events", "MISSING.jsonl"], "no such events file"),
        (["simulate", "--ledger", "L", "--population", "angels"], "population 'angels'"),
        (["simulate", "--ledger", "L", "--model", "m"], "--model needs --base-url"),
        (["simulate", "--ledger", "L", "--p-remove", "1.5"], "1.5"),
        (["demo", "--quick", "--events", "MISSING.jsonl", "--out", "OUT"], "no such events file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, needle):
    argv = [str(tmp_path / a) if a in ("L", "MISSING.jsonl", "OUT") else a for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    if not err.startswith("usage:"):  # argparse's own errors print the usage first
        assert len(err.splitlines()) == 1
    assert needle in err.splitlines()[-1]
    assert not (tmp_path / "OUT").exists()


@pytest.mark.slow
def test_demo_quick_writes_valid_results_with_every_claim(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "results.json")  # validates and recomputes every claim
    assert results.manifest.package == "memeeconomy"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    by_id = {c.id: c for c in results.claims}
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin,
            exact=claim.exact, requires=[by_id[p] for p in claim.requires],
        )  # fmt: skip
        assert again.verdict == claim.verdict
    assert (tmp_path / "ledgers").is_dir()
    data = json.loads((tmp_path / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "survival" and row["metric"] == "pressure_effect":
            row["items"] = {k: -1.0 for k in row["items"]}
            row["value"] = -1.0
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="pressure"):
        load_results(tmp_path / "results.json")
