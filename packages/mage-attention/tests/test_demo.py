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
        prompt_length=64,
        pairs=8,
        queries=2,
        num_keys=10,
        num_values=4,
        num_fillers=4,
        in_block=True,
    ),
    phases=(Phase(3, 64, 4),),
    eval_lengths=(64,),
    claim_length=64,
    sequences=3,
    timing_lengths=(512, 32768),
    timing_shape=BlockShape(query_heads=2, kv_heads=1, head_dim=16, block_size=4, window=8, hot=16),
    repeats=2,
    sinks=1,
    window=2,
    validation_seeds=(100,),
    dense_layers=0,  # one layer: sparse, so every policy row exists
)
PREMISES = ("premise_exact_solves_retrieval", "premise_topk_mass_recall_ge_0_9",
            "premise_random_k_fails")  # fmt: skip
CLAIMS = {
    *PREMISES,
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
        if claim.id not in PREMISES:
            assert claim.requires == PREMISES
        else:
            assert claim.rhs == pytest.approx(claim.rhs)
            assert "val:" in str(claim.lhs)
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
    speed = results.row("mage", "speedup_vs_exact", "L=32768,T=8")
    assert speed.ci95 is not None
    assert speed.n == MICRO.repeats
    assert results.row("quest", "matches_exact", "L=32768,T=8").value == 1.0  # planted cache
    assert results.row("mage", "model_speedup_vs_quest", "L=32768,T=8").value > 0
    assert results.row("exact", "topk_mass_recall", "val:L=64").seeds is not None
    # per layer too (which layer's attention is sharp): exact's own top-k and step-1 overlap,
    # each sparse policy's recall, per seed
    assert sorted(results.row("exact", "topk_mass_recall", "L=64,layer=0").seeds) == ["0", "1"]
    assert results.row("exact", "topk_overlap_step1", "L=64,layer=0").seeds is not None
    assert results.row("mage", "mass_recall", "L=64,layer=0").seeds is not None
    assert (micro_results / "report.md").read_text().startswith("# mage-attention")


def test_tampered_rows_are_caught(micro_results, tmp_path):
    data = json.loads((micro_results / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "mage" and row["metric"] == "speedup_vs_exact":
            row["value"], row["ci95"] = 1e6, [1e6 - 1, 1e6 + 1]
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


def test_bench_reports_mage_vs_exact_and_quest_with_the_cost_model(tmp_path):
    args = ["bench", "--quick", "--lengths", "1024", "--steps", "2,8", "--out", str(tmp_path)]
    assert main(args) == 0
    results = load_results(tmp_path / "bench.json")
    for steps in (2, 8):
        split = f"L=1024,T={steps}"
        speed = results.row("mage", "speedup_vs_exact", split)
        assert speed.n == 6
        assert speed.ci95 is not None
        assert speed.ci95[0] <= speed.value <= speed.ci95[1]
        assert results.row("mage", "speedup_vs_quest", split).ci95 is not None
        # the analytic model beside it: T(L+B) / ((L+B) + (T-1)(k+B)), k = 512, B = 8
        model = results.row("mage", "model_speedup_vs_exact", split).value
        assert model == pytest.approx(steps * 1032 / (1032 + (steps - 1) * 520))
        for system in ("mage", "quest"):  # the planted cache: the sparse outputs are exact's
            assert results.row(system, "matches_exact", split).value == 1.0
    by_id = {c.id: c for c in results.claims}
    assert by_id["mage_L=1024,T=8_matches_exact"].verdict == "held"
    assert by_id["mage_vs_exact_1k_t8"].rhs == 6.82
    assert by_id["mage_vs_quest_1k_t8"].rhs == 3.35


def test_bench_writes_what_finished_when_its_time_budget_ends(tmp_path):
    args = ["bench", "--quick", "--lengths", "1024,2048", "--steps", "2", "--time-budget",
            "0.001", "--out", str(tmp_path)]  # fmt: skip
    assert main(args) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.manifest.config["measured"] == ["L=1024,T=2"]


def test_bench_length_too_short_for_its_budget_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--quick", "--lengths", "256", "--out", str(tmp_path / "b")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "k=512 is larger than the prefix (256 tokens)" in err


@pytest.mark.slow
def test_quick_demo_runs_end_to_end(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    assert {c.id for c in load_results(tmp_path / "results.json").claims} == CLAIMS
