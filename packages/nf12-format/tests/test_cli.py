import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from nf12 import __version__
from nf12.cli import main
from nf12.demo import DemoConfig, claims_for, rows_for, run_weight_set
from safetensors.torch import save_file

from paperstack.records import Claim, Manifest, Results, load_results, write_results


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("compress", "decompress", "inspect", "demo", "bench"):
        assert command in out


def test_console_script_help_is_installed():
    script = shutil.which("nf12", path=str(Path(sys.executable).parent))
    assert script is not None, "the nf12 console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


@pytest.fixture
def bf16_file(tmp_path, gaussian):
    path = tmp_path / "m.safetensors"
    save_file({"w": gaussian, "b": gaussian[0].clone()}, str(path))
    return path


def test_compress_decompress_inspect_commands(tmp_path, bf16_file, capsys):
    packed = tmp_path / "m.nf12.safetensors"
    assert main(["compress", str(bf16_file), str(packed)]) == 0
    assert "bits/weight" in capsys.readouterr().out
    assert main(["decompress", str(packed), str(tmp_path / "back.safetensors")]) == 0
    assert "byte-identical" in capsys.readouterr().out
    assert (tmp_path / "back.safetensors").read_bytes() == bf16_file.read_bytes()
    assert main(["inspect", str(packed)]) == 0
    out = capsys.readouterr().out
    assert "coverage" in out
    assert "w | nf12 | 96x200" in out


@pytest.mark.parametrize(
    ("make", "command", "needle"),
    [
        (lambda p: p.write_bytes(b"\x10\x00"), "decompress", "truncated"),
        (
            lambda p: p.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not json"),
            "inspect",
            "not JSON",
        ),
        (lambda p: save_file({"w": torch.zeros(4, 8)}, str(p)), "compress", "F32 is not BF16"),
        (lambda p: save_file({"w": torch.zeros(4, 8).bfloat16()}, str(p)), "decompress", "NF12"),
    ],
)
def test_bad_input_is_a_one_line_error(tmp_path, capsys, make, command, needle):
    path = tmp_path / "bad.safetensors"
    make(path)
    argv = [command, str(path)] + ([] if command == "inspect" else [str(tmp_path / "o")])
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("nf12: error:")
    assert needle in err


def test_demo_pipeline_rows_and_claims_on_a_small_weight_set(tmp_path, gaussian):
    state = {
        "a.weight": gaussian,
        "a.bias": gaussian[0].clone(),
        "b.weight": gaussian.t().contiguous(),
    }
    cfg = DemoConfig(qwen_hidden=64, qwen_layers=1, qwen_vocab=64, repeats=2, groups=(8, 32))
    measured = run_weight_set("minilm", state, cfg)
    rows = rows_for("minilm", measured)
    claims = claims_for(rows)
    assert {c.id for c in claims} == {
        "lossless", "bits_le_12_1", "coverage_ge_99_7", "decode_faster_than_huffman"
    }  # fmt: skip
    lossless = next(c for c in claims if c.id == "lossless")
    assert lossless.held
    assert lossless.lhs_value == 0
    results = Results(manifest=Manifest.collect("nf12-format", __version__, 0), rows=rows,
                      claims=claims)  # fmt: skip
    write_results(tmp_path / "results.json", results)
    loaded = load_results(tmp_path / "results.json")
    for claim in loaded.claims:
        again = Claim.compare(claim.id, claim.statement, loaded.rows, claim.lhs, claim.op,
                              claim.rhs, claim.margin)  # fmt: skip
        assert again.held == claim.held
    assert loaded.row("nf12", "escape_rate_g32_pct", "minilm").n == 96 * 7 + 200 * 3


def test_demo_rejects_flags_it_cannot_honour(tmp_path, capsys):
    for extra in (["--dataset", "x"], ["--device", "cuda"], ["--threads", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(["demo", "--quick", "--out", str(tmp_path), *extra])
        assert exc.value.code == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_bench_writes_ratios(tmp_path):
    assert main(["bench", "--quick", "--repeats", "2", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "bench.json")
    row = results.row("nf12-cpu-decode", "speed_ratio_decode_vs_memcpy", "512x512")
    assert row.value > 0
    assert row.n == 2


@pytest.mark.slow
def test_demo_quick_writes_results_with_the_four_claims(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    results = load_results(tmp_path / "results.json")
    assert results.manifest.package == "nf12-format"
    assert {c.id for c in results.claims} >= {"lossless", "bits_le_12_1"}
    assert next(c for c in results.claims if c.id == "lossless").held
    assert (tmp_path / "report.md").read_text().startswith("# nf12-format")
