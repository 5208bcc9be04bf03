"""``demo --real`` on its tiny budget (``--quick``) against a real served model: the core's
``transformers serve`` of a micro tiny model, named by ``PAPERSTACK_SERVED_BASE_URL`` as the
shared ``vllm serve`` is in the reported run. What is checked is the arm's machinery (the
ledger, the premise and the gated claims, the coder rows, the cost card, the engine named);
a random micro model answers nothing, so its verdicts mean nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from debate_ledger.cli import main
from debate_ledger.real import REAL_QUICK
from debate_ledger.schemas import read_ledger

pytest.importorskip("httpx")
pytest.importorskip("torch")

pytestmark = pytest.mark.serve


@pytest.mark.slow  # about 10 s on the loaded 2-core machine (60 calls, the tables, figures)
def test_real_arm_quick_against_a_served_model(openai_sampling_server, tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERSTACK_SERVED_BASE_URL", openai_sampling_server.base_url)
    out = tmp_path / "real"
    assert main(["demo", "--real", "--quick", "--out", str(out), "--no-progress"]) == 0
    results = json.loads((out / "results.json").read_text())
    config = results["manifest"]["config"] if "manifest" in results else results["config"]
    assert config["real"] is True
    assert config["engine"].endswith("(running)")
    rows = read_ledger(out / "ledger.jsonl")
    families = REAL_QUICK.families()
    per = REAL_QUICK.agents * (REAL_QUICK.rounds + 1 + REAL_QUICK.resamples)
    assert len(rows) == (REAL_QUICK.n_mcq + REAL_QUICK.n_facts) * len(families) * per
    assert {r.family for r in rows} == {f for f, _, _ in families}
    assert {r.tokens_source for r in rows} == {"server"}
    assert {r.coder for r in rows} == {"letter-v3"}
    claims = {c["id"]: c for c in results["claims"]}
    assert {"real_premise_collapses_occur", "real_premise_corrections_occur",
            "real_gated_freeze_loses", "real_debate_not_above_vote",
            "real_coder_v3_parses_more"} <= set(claims)  # fmt: skip
    gated = claims["real_gated_freeze_loses"]
    assert set(gated["requires"]) == {"real_premise_collapses_occur",
                                      "real_premise_corrections_occur"}  # fmt: skip
    premise_held = all(claims[p]["verdict"] == "held" for p in gated["requires"])
    assert premise_held or gated["verdict"] == "inconclusive"
    metrics = {(r["system"], r["metric"]) for r in results["rows"]}
    assert ("served", "calls") in metrics
    assert ("coder:letter-v2", "parse_rate") in metrics
    # every row's call and the four of the sampling check were sent
    served_calls = next(r for r in results["rows"] if r["system"] == "served")
    assert served_calls["value"] == len(rows) + 4
    report = (out / "report.md").read_text()
    assert "(running)" in report
    assert "sampling checked" in report
    assert (out / "tables" / "cost_card.md").is_file()


def test_real_arm_refuses_a_server_that_ignores_temperature(
    openai_server, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("PAPERSTACK_SERVED_BASE_URL", openai_server.base_url)
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--real", "--quick", "--out", str(tmp_path / "o"), "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "ignores temperature" in err[0]
    assert not (tmp_path / "o" / "results.json").exists()


def test_real_arm_on_a_dead_server_is_one_line(tmp_path, monkeypatch, capsys):
    from paperstack.llm.serve import free_port

    monkeypatch.setenv("PAPERSTACK_SERVED_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--real", "--quick", "--out", str(tmp_path / "o"), "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "PAPERSTACK_SERVED_BASE_URL" in err[0]


def test_real_arm_refuses_model(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--real", "--quick", "--model", "x", "--out", str(tmp_path / "o"),
              "--no-progress"])  # fmt: skip
    assert exc.value.code == 2
    assert "--model: not used by --real" in capsys.readouterr().err
