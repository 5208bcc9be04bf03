"""The demo's rows and claims (on a micro config), convert and bench, and their refusals."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from saga_attention import __version__
from saga_attention import demo as demo_module
from saga_attention.cli import main
from saga_attention.recall import RecallTask
from saga_attention.timing import DecodeShape
from saga_attention.training import ModelSpec, TrainSpec, build_model

from paperstack.records import Claim, ResultsFormatError, load_results

# A micro version of the demo: the whole pipeline in seconds (the real --quick is a slow test).
MICRO = replace(
    demo_module.QUICK,
    task=RecallTask(pairs=6, queries=3, num_keys=8, num_values=4, num_fillers=8),
    gqa=ModelSpec(
        hidden_size=16,
        intermediate_size=32,
        layers=1,
        query_heads=4,
        key_heads=2,
        value_heads=2,
        init_std=0.1,
        max_positions=256,
    ),
    saga_key_heads=1,
    phases=(TrainSpec(steps=2, batch_size=4), TrainSpec(steps=1, batch_size=2, context=40)),
    convert_short_steps=1,
    convert_long_steps=1,
    top_n=4,
    eval_contexts=(40, 60),
    claim_context=40,
    eval_sequences=(3, 2),
    contexts=(256, 512),
    claim_timing_context=512,
    repeats=2,
    recall_contexts=(512,),
    decode_shape=DecodeShape(
        query_heads=4, gqa_kv_heads=2, saga_key_heads=1, saga_value_heads=2, head_dim=8, top_n=64
    ),
)
CLAIMS = {
    "premise_dense_attention_solves_the_task",
    "asymmetry_quality_at_equal_sparsity",
    "asymmetry_decode_faster_at_equal_sparsity",
    "sparsity_quality_at_equal_heads",
    "sparsity_decode_faster_at_equal_heads",
    "combination_quality_near_dense_gqa",
    "combination_decode_faster_than_dense_gqa",
    "atopn_recall_ge_0_95",
    "conversion_recovers",
}


@pytest.fixture(scope="module")
def micro_run(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setattr(demo_module, "QUICK", MICRO)
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--quick", "--seeds", "0,1", "--out", str(out), "--no-progress"]) == 0
    mp.undo()
    return out


def test_demo_writes_every_row_and_claim(micro_run):
    results = load_results(micro_run / "results.json")  # validates, recomputes every claim
    assert results.manifest.package == "saga-attention"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin
        )
        assert again.verdict == claim.verdict
    # the quality rows hold one value per seed, so the claims between systems are paired
    for system in ("gqa-dense", "gqa-atop", "saga-atop", "converted-atop", "pooled-atop"):
        row = results.row(system, "accuracy", "L=40")
        assert set(row.seeds) == {"0", "1"}
    quality = {c.id: c for c in results.claims}["asymmetry_quality_at_equal_sparsity"]
    assert quality.method == "paired-t"
    speed = results.row("saga-atop", "speedup_vs_gqa_atop", "L=512")
    assert set(speed.items) == {"r0", "r1"}  # per-repeat ratios
    assert 0 <= results.row("saga-atop", "recall_at_n", "L=40").value <= 1
    assert results.row("saga-atop", "accuracy", "L=60").n == 2
    gqa = results.row("gqa", "kv_cache_bytes_per_token_layer", "trained-model").value
    saga = results.row("saga", "kv_cache_bytes_per_token_layer", "trained-model").value
    assert saga / gqa == pytest.approx((1 + 2) / (2 + 2))
    assert (micro_run / "report.md").read_text().startswith("# saga-attention")


def test_demo_claims_follow_the_rows(micro_run, tmp_path):
    data = json.loads((micro_run / "results.json").read_text())
    data.pop("digest", None)  # past the edit check, to the claims recomputed from the rows
    for row in data["rows"]:
        if row["metric"] == "speedup_vs_gqa_dense" and row["system"] == "saga-atop":
            row["items"] = {k: 1e6 for k in row["items"]}
            row["value"] = 1e6
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="combination_decode_faster_than_dense_gqa"):
        load_results(tmp_path / "results.json")


def _gqa_checkpoint(path: Path) -> Path:
    build_model(demo_module.QUICK.task, MICRO.gqa).save_pretrained(path)
    return path


def test_convert_command_pools_and_fine_tunes(tmp_path, capsys):
    source = _gqa_checkpoint(tmp_path / "gqa")
    argv = ["convert", "--model", str(source), "--key-heads", "1", "--out", str(tmp_path / "s")]
    assert main([*argv, "--steps", "2", "--quick"]) == 0
    assert (tmp_path / "s" / "config.json").is_file()
    assert "H_k=1" in capsys.readouterr().out


def _one_line_error(capsys, argv, expected):
    capsys.readouterr()  # drop earlier output
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("saga: error: ")
    assert expected in err
    return err


def _convert(source, out, heads="1"):
    return ["convert", "--model", str(source), "--key-heads", heads, "--out", str(out), "--quick"]


def test_bad_input_is_a_one_line_error(tmp_path, capsys):
    _one_line_error(capsys, ["demo", "--out", str(tmp_path / "d"), "--device", "cuda"], "cuda")
    assert not (tmp_path / "d").exists()  # a run that fails on its input leaves no folder
    _one_line_error(capsys, _convert(tmp_path, tmp_path / "o"), "no config.json")
    _one_line_error(capsys, _convert(tmp_path / "nowhere", tmp_path / "o"), "no such directory")
    source = _gqa_checkpoint(tmp_path / "gqa")
    _one_line_error(capsys, _convert(source, tmp_path / "o", "3"), "3: does not divide")
    _one_line_error(capsys, ["bench", "--out", str(tmp_path / "b"), "--key-heads", "3"],
                    "--key-heads 3: does not divide H_q=32")  # fmt: skip


def test_convert_rejects_a_truncated_checkpoint(tmp_path, capsys):
    source = _gqa_checkpoint(tmp_path / "gqa")
    weights = source / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    err = _one_line_error(capsys, _convert(source, tmp_path / "o"), "model.safetensors")
    assert "truncated" in err


def test_convert_rejects_a_config_without_attention_heads(tmp_path, capsys):
    source = _gqa_checkpoint(tmp_path / "gqa")
    config = json.loads((source / "config.json").read_text())
    for key in ("num_key_value_heads", "num_attention_heads"):
        config.pop(key)
    config["model_type"] = "mamba"
    (source / "config.json").write_text(json.dumps(config))
    err = _one_line_error(capsys, _convert(source, tmp_path / "o"), "not a Llama-style")
    assert "None" not in err


def test_bad_flag_values_name_the_flag(tmp_path, capsys):
    for argv, flag in (
        (["bench", "--out", str(tmp_path), "--key-heads", "0"], "--key-heads"),
        (["bench", "--out", str(tmp_path), "--contexts", "0"], "--contexts"),
        (["demo", "--out", str(tmp_path), "--threads", "0"], "--threads"),
    ):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert flag in err.splitlines()[-1]
        assert "Traceback" not in err


def test_bench_writes_paired_ratios_selection_and_end_to_end(tmp_path):
    argv = ["bench", "--out", str(tmp_path), "--repeats", "6", "--contexts", "128,256"]
    assert (
        main([*argv, "--quick", "--key-heads", "1", "--e2e-contexts", "160", "--no-progress"]) == 0
    )
    results = load_results(tmp_path / "bench.json")
    row = results.row("saga-atop-hk1", "speedup_vs_gqa_dense", "L=256")
    assert row.n == 6
    assert row.ci95[0] <= row.value <= row.ci95[1]  # the median, order-statistic interval
    assert results.row("saga-atop", "speedup_vs_gqa_atop", "L=256").value > 0
    assert results.row("saga-atop-hk1", "bytes_per_step", "L=256").value > 0
    assert results.row("atop", "speedup_vs_topk", "L=256").value > 0
    assert results.row("saga-atop", "tokens_per_s", "tiny:L=160").value > 0
    assert results.row("saga-atop", "e2e_speedup_vs_gqa_atop", "tiny:L=160").value > 0
    assert results.row("saga-atop", "matches_reference", "L=256").value == 1.0
    assert results.row("saga-atop", "max_abs_diff_vs_reference", "L=256").value < 1e-3
    claims = {c.id: c for c in results.claims}
    assert {
        "e2e_saga_atop_2x_vs_dense_gqa",
        "e2e_asymmetry_2x_at_equal_sparsity",
        "e2e_sparsity_2x_at_equal_heads",
        "layer_saga_atop_2x_vs_dense_gqa",
        "saga_atop_matches_reference_L256",
    } <= set(claims)
    assert claims["saga_atop_matches_reference_L256"].verdict == "held"


def test_bench_budget_keeps_what_finished(tmp_path):
    """A budget too small for anything after the first stage still writes bench.json."""
    argv = ["bench", "--out", str(tmp_path), "--quick", "--repeats", "2", "--contexts", "128",
            "--e2e-contexts", "160", "--budget-s", "0.001", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.claims == []  # nothing timed, nothing claimed
    assert {r.metric for r in results.rows} == {"bytes_per_step"}  # analytic, no time needed
    config = json.dumps(results.manifest.config)
    assert "end to end tiny" in config
    assert "decode step at L=128" in config


@pytest.mark.slow
def test_quick_demo_runs_end_to_end(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    assert {c.id for c in load_results(tmp_path / "results.json").claims} == CLAIMS


def test_cuda_bench_measures_the_whole_llama_1b_end_to_end_at_32k_to_128k():
    """Issue #47: the GPU step's configuration (built without a GPU): all 16 layers of the
    Llama-3.2-1B shape at 32K, 64K and 128K, kernels and graphs, the budget passed through."""
    from saga_attention.bench import BenchConfig

    config = BenchConfig.for_run("cuda", False, None, None, (1, 2, 4), None, budget_s=80.0)
    assert config.e2e_contexts == (32768, 65536, 131072)
    (model,) = config.e2e_models
    assert (model.layers, model.hidden_size, model.vocab_size) == (16, 2048, 128256)
    assert config.kernels
    assert config.budget_s == 80.0
    assert config.dtype == "bf16"


def test_gpu_script_parses_and_passes_its_budget_to_the_bench():
    import subprocess

    script = Path(__file__).parents[1] / "benchmarks" / "gpu.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "GPU_BUDGET_S" in text
    assert '--budget-s "$bench_budget"' in text
