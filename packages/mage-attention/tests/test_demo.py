"""The demo's claims and rows (on a micro config), train then demo, and the bench."""

import json
from dataclasses import replace

import pytest
from mage_attention import __version__
from mage_attention import demo as demo_module
from mage_attention.cli import main
from mage_attention.modeling import ModelSpec
from mage_attention.task import RetrievalTask
from mage_attention.timing import BlockShape
from mage_attention.training import Phase

from paperstack.records import Claim, ResultsFormatError, load_results

# A micro version of the demo: the whole pipeline in seconds (the real --quick is a slow test).
MICRO = replace(
    demo_module.QUICK,
    spec=ModelSpec(
        hidden_size=16,
        intermediate_size=32,
        layers=1,
        query_heads=2,
        kv_heads=1,
        block_size=4,
        max_positions=33000,
    ),
    task=RetrievalTask(
        prompt_length=64, pairs=8, queries=8, num_keys=10, num_values=4, num_fillers=4
    ),
    phases=(Phase(3, 64, 4),),
    eval_lengths=(64,),
    claim_length=64,
    sequences=3,
    timing_lengths=(512, 32768),
    timing_shape=BlockShape(query_heads=2, kv_heads=1, head_dim=16, block_size=4, steps=4),
    repeats=2,
    sinks=1,
    window=2,
)
CLAIMS = {
    "premise_exact_solves_retrieval",
    "mage_matches_exact",
    "mage_recall_ge_0_95",
    "mage_beats_quest_recall",
    "query_alignment_holds",
    "mage_faster_than_exact_at_32k",
}


@pytest.fixture
def micro(monkeypatch):
    monkeypatch.setattr(demo_module, "QUICK", MICRO)
    monkeypatch.setattr(demo_module, "FULL", replace(MICRO, sequences=4))


@pytest.fixture(scope="module")
def micro_results(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setattr(demo_module, "QUICK", MICRO)
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--quick", "--out", str(out), "--no-progress"]) == 0
    mp.undo()
    return out


def test_demo_writes_every_claim_from_its_rows(micro_results):
    results = load_results(micro_results / "results.json")  # validates, recomputes claims
    assert results.manifest.package == "mage-attention"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    by_id = {c.id: c for c in results.claims}
    for claim in results.claims:
        if claim.id != "premise_exact_solves_retrieval":
            assert claim.requires == ("premise_exact_solves_retrieval",)
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin,
            requires=[by_id[p] for p in claim.requires],
        )  # fmt: skip
        assert again.verdict == claim.verdict
    em = results.row("mage", "exact_match", "L=64")
    assert em.items is not None
    assert len(em.items) == 2 * 3
    recall = results.row("quest", "mass_recall", "L=64,t=2")
    assert recall.seeds is not None
    assert sorted(recall.seeds) == ["0", "1"]
    assert results.row("mage", "speedup_vs_exact", "L=32768").items is not None
    assert (micro_results / "report.md").read_text().startswith("# mage-attention")


def test_tampered_rows_are_caught(micro_results, tmp_path):
    data = json.loads((micro_results / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "mage" and row["metric"] == "speedup_vs_exact":
            row["items"] = {key: 1e6 + i for i, key in enumerate(row["items"])}
            row["value"] = 1e6
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError):
        load_results(tmp_path / "results.json")


def test_demo_on_a_checkpoint_without_a_mask_token_is_one_line(micro, tmp_path, capsys):
    from mage_attention.modeling import build_model

    model = build_model(MICRO.spec, MICRO.task.vocab_size, 3)
    model.save_pretrained(tmp_path / "ckpt")
    cfg = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    del cfg["mask_token_id"]
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--model", str(tmp_path / "ckpt"), "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no mask_token_id" in err
    assert not (tmp_path / "o").exists()


def test_train_then_demo_on_the_saved_checkpoint(micro, tmp_path):
    assert main(["train", "--quick", "--out", str(tmp_path / "ckpt")]) == 0
    out = tmp_path / "out"
    assert main(["demo", "--quick", "--model", str(tmp_path / "ckpt"), "--out", str(out),
                 "--no-progress"]) == 0  # fmt: skip
    assert {c.id for c in load_results(out / "results.json").claims} == CLAIMS


def test_bench_writes_paired_ratios(tmp_path):
    assert main(["bench", "--quick", "--lengths", "1024,2048", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "bench.json")
    row = results.row("mage", "speedup_vs_exact", "L=2048")
    assert row.items is not None
    assert len(row.items) == 2


def test_bench_length_too_short_for_its_budget_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--quick", "--lengths", "8", "--out", str(tmp_path / "b")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "budget: k=1 is smaller than sinks" in err


@pytest.mark.slow
def test_quick_demo_runs_end_to_end(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    assert {c.id for c in load_results(tmp_path / "results.json").claims} == CLAIMS
