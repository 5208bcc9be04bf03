import json
import shutil
import subprocess
import sys
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
    task=RecallTask(pairs=12, queries=4, num_keys=16, num_values=4),
    gqa=ModelSpec(
        hidden_size=16,
        intermediate_size=32,
        layers=1,
        query_heads=4,
        key_heads=2,
        value_heads=2,
        init_std=0.1,
    ),
    saga_key_heads=1,
    train=TrainSpec(steps=3, batch_size=4),
    convert_steps=2,
    top_n=4,
    eval_sequences=8,
    contexts=(256, 16384),
    repeats=2,
    decode_shape=DecodeShape(
        query_heads=4, gqa_kv_heads=2, saga_key_heads=1, saga_value_heads=2, head_dim=8, top_n=64
    ),
)
CLAIMS = {
    "saga_quality_near_gqa",
    "atopn_recall_ge_0_95",
    "saga_decode_faster_at_16k",
    "conversion_recovers",
}


@pytest.fixture(scope="module")
def micro_run(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setattr(demo_module, "QUICK", MICRO)
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--quick", "--out", str(out), "--threads", "1"]) == 0
    mp.undo()
    return out


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "bench", "convert"):
        assert command in out


def test_console_script_help_is_installed():
    script = shutil.which("saga", path=str(Path(sys.executable).parent))
    assert script is not None, "the saga console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


def test_demo_writes_every_row_and_claim(micro_run):
    results = load_results(micro_run / "results.json")  # validates, recomputes every claim
    assert results.manifest.package == "saga-attention"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin
        )
        assert again.held == claim.held
    systems = {r.system for r in results.rows if r.metric == "accuracy"}
    assert systems >= {"gqa-dense", "gqa-atop", "saga-dense", "saga-atop", "converted-atop"}
    assert results.row("saga-atop", "speedup_vs_gqa_dense", "L=16384").n == 2
    assert results.row("atop", "recall_at_n", "model").value <= 1.0
    gqa = results.row("gqa", "kv_cache_bytes_per_token_layer", "trained-model").value
    saga = results.row("saga", "kv_cache_bytes_per_token_layer", "trained-model").value
    assert saga / gqa == pytest.approx((1 + 2) / (2 + 2))
    assert (micro_run / "report.md").read_text().startswith("# saga-attention")


def test_demo_claims_follow_the_rows(micro_run, tmp_path):
    data = json.loads((micro_run / "results.json").read_text())
    for row in data["rows"]:
        if row["metric"] == "speedup_vs_gqa_dense":
            row["value"] = 1e6 if row["value"] < 1.5 else 0.0
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="saga_decode_faster_at_16k"):
        load_results(tmp_path / "results.json")


def test_convert_command_pools_and_fine_tunes(micro_run, tmp_path, capsys):
    source = tmp_path / "gqa"
    model = build_model(demo_module.QUICK.task, MICRO.gqa)
    model.save_pretrained(source)
    assert (
        main(
            [
                "convert",
                "--model",
                str(source),
                "--key-heads",
                "1",
                "--out",
                str(tmp_path / "saga"),
                "--steps",
                "2",
                "--quick",
            ]
        )
        == 0
    )
    assert (tmp_path / "saga" / "config.json").is_file()
    assert "H_k=1" in capsys.readouterr().out


def _one_line_error(capsys, argv, expected):
    capsys.readouterr()  # drop earlier output (progress bars of save_pretrained)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("saga: error: ")
    assert expected in err


def test_bad_input_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    _one_line_error(capsys, ["demo", "--quick", "--out", str(blocker / "sub")], "--out")
    _one_line_error(
        capsys,
        ["convert", "--model", str(tmp_path), "--key-heads", "1", "--out", str(tmp_path / "o")],
        "no config.json",
    )
    source = tmp_path / "gqa"
    build_model(demo_module.QUICK.task, MICRO.gqa).save_pretrained(source)
    _one_line_error(
        capsys,
        [
            "convert",
            "--model",
            str(source),
            "--key-heads",
            "3",
            "--out",
            str(tmp_path / "o"),
            "--quick",
        ],
        "key heads: 3 does not divide",
    )
    _one_line_error(
        capsys, ["demo", "--out", str(tmp_path / "d"), "--device", "cuda"], "--device cuda"
    )


def test_bench_writes_ratios_and_bytes(tmp_path):
    assert (
        main(
            [
                "bench",
                "--out",
                str(tmp_path),
                "--repeats",
                "2",
                "--contexts",
                "128,256",
                "--key-heads",
                "1",
            ]
        )
        == 0
    )
    results = load_results(tmp_path / "bench.json")
    assert results.row("gqa-dense-sdpa", "speedup_vs_sdpa", "L=256").value == pytest.approx(1.0)
    assert results.row("saga-atop-hk1", "bytes_per_step", "L=256").value > 0


@pytest.mark.slow
def test_quick_demo_runs_end_to_end(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    assert {c.id for c in load_results(tmp_path / "results.json").claims} == CLAIMS
