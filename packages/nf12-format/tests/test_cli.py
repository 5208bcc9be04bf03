import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from nf12.cli import main
from nf12.demo import QUICK, DemoConfig, claims_for, rows_for, run_weight_set, seed_rows
from safetensors.torch import save_file

from paperstack.records import Claim, load_results


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


def one_line_error(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("nf12: error:")
    assert needle in err, err
    return err


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
        (lambda p: p.mkdir(), "compress", "is a directory"),
        (lambda p: None, "inspect", "no such file"),
    ],
)
def test_bad_input_is_a_one_line_error(tmp_path, capsys, make, command, needle):
    path = tmp_path / "bad.safetensors"
    make(path)
    argv = [command, str(path)] + ([] if command == "inspect" else [str(tmp_path / "o")])
    one_line_error(capsys, argv, needle)


@pytest.mark.parametrize("group", ["0", "5", "256", "-8"])
def test_compress_refuses_a_group_size_it_cannot_encode(tmp_path, bf16_file, capsys, group):
    out = tmp_path / "o.nf12.safetensors"
    one_line_error(capsys, ["compress", str(bf16_file), str(out), "--group", group],
                   f"group {group}: must be one of")  # fmt: skip
    assert not out.exists()


def test_compress_never_overwrites_without_force(tmp_path, bf16_file, capsys):
    out = tmp_path / "o.nf12.safetensors"
    out.write_bytes(b"keep me")
    one_line_error(capsys, ["compress", str(bf16_file), str(out)], "--force")
    assert out.read_bytes() == b"keep me"
    assert main(["compress", str(bf16_file), str(out), "--force"]) == 0
    back = tmp_path / "back.safetensors"
    back.write_bytes(b"keep me too")
    one_line_error(capsys, ["decompress", str(out), str(back)], "--force")
    assert main(["decompress", str(out), str(back), "--force"]) == 0
    assert back.read_bytes() == bf16_file.read_bytes()
    one_line_error(capsys, ["compress", str(bf16_file), str(bf16_file), "--force"],
                   "overwrite the input")  # fmt: skip
    one_line_error(capsys, ["compress", str(bf16_file), str(tmp_path)], "is a directory")


def test_outputs_get_the_mode_the_umask_gives(tmp_path, bf16_file):
    from nf12 import files

    out = tmp_path / "o.nf12.safetensors"
    assert main(["compress", str(bf16_file), str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == files._FILE_MODE
    assert 0o666 & ~_umask() == files._FILE_MODE
    back = tmp_path / "b.safetensors"
    assert main(["decompress", str(out), str(back)]) == 0
    assert stat.S_IMODE(back.stat().st_mode) == files._FILE_MODE
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_demo_pipeline_rows_and_claims_on_a_small_weight_set(gaussian):
    state = {
        "a.weight": gaussian,
        "a.bias": gaussian[0].clone(),
        "b.weight": gaussian.t().contiguous(),
    }
    cfg = DemoConfig(qwen_hidden=64, qwen_layers=1, qwen_vocab=64, repeats=3, groups=(8, 32))
    measured = run_weight_set("minilm", state, cfg)
    rows = rows_for("minilm", measured)
    rows += seed_rows("qwen3-random", {0: measured, 1: measured})
    claims = {c.id: c for c in claims_for(rows)}
    assert next(iter(claims)) == "premise_exponents_cluster"
    assert claims["lossless"].exact
    assert claims["lossless"].held
    assert claims["decode_faster_than_huffman"].method == "t"  # 3 repeats: no bootstrap
    assert claims["bits_le_12_1"].method == "t"  # two matrices
    coverage = next(r for r in rows if r.key.metric == "window_coverage" and r.split == "minilm")
    assert coverage.k == measured.in_window
    assert coverage.n == 2 * gaussian.numel()
    escape = next(r for r in rows if r.metric == "escape_rate_g32" and r.split == "minilm")
    assert escape.n == 96 * 7 + 200 * 3
    for claim in claims.values():  # every verdict follows from the rows
        again = Claim.compare(claim.id, claim.statement, rows, claim.lhs, claim.op, claim.rhs,
                              claim.margin, exact=claim.exact)  # fmt: skip
        assert again.verdict == claim.verdict


def test_lossless_claim_is_not_held_when_one_tensor_differs(gaussian):
    cfg = DemoConfig(qwen_hidden=64, qwen_layers=1, qwen_vocab=64, repeats=2, groups=(8,))
    measured = run_weight_set("minilm", {"a.weight": gaussian}, cfg)
    measured.mismatched = 1
    rows = rows_for("minilm", measured)
    lossless = next(c for c in claims_for(rows) if c.id == "lossless")
    assert lossless.verdict == "not_held"


def test_demo_rejects_flags_it_cannot_honour(tmp_path, capsys):
    out = tmp_path / "out"
    one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--device", "cuda"], "cuda")
    one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--model",
                            str(tmp_path / "nope")], "nope")  # fmt: skip
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x40\x00\x00\x00\x00\x00\x00\x00{}")
    one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--model", str(bad)],
                   "bad.safetensors")  # fmt: skip
    assert not out.exists()  # a demo that fails on its input leaves no empty --out behind
    (tmp_path / "file").write_text("x")
    one_line_error(capsys, ["demo", "--quick", "--out", str(tmp_path / "file")], "--out")
    one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--threads", "0"], "--threads 0")
    one_line_error(capsys, ["bench", "--quick", "--out", str(out), "--repeats", "1"], "--repeats 1")
    assert not out.exists()


def test_bench_writes_ratios_and_cpu_claims(tmp_path, capsys):
    assert main(["bench", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    results = load_results(tmp_path / "bench.json")
    row = results.row("nf12-cpu", "speed_ratio_decode_vs_memcpy", "512x512")
    assert row.value > 0
    assert row.n == 3
    assert {c.id for c in results.claims} == {
        "cpu_decode_faster_than_huffman", "cpu_decode_keeps_up_with_memcpy",
        "cpu_gemv_keeps_up_with_bf16",
    }  # fmt: skip
    assert (tmp_path / "bench.md").is_file()
    out = capsys.readouterr().out
    assert "nf12: cpu_decode_faster_than_huffman:" in out  # every claim printed with its verdict
    assert "held /" in out


@pytest.mark.slow
def test_demo_quick_writes_results_with_the_claims(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    results = load_results(tmp_path / "results.json")
    assert results.manifest.package == "nf12-format"
    assert results.claims[0].id == "premise_exponents_cluster"
    assert next(c for c in results.claims if c.id == "lossless").held
    assert (tmp_path / "report.md").read_text().startswith("# nf12-format")
    assert QUICK.repeats == 3
