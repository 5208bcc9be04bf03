import pytest
import torch
from nf12.cli import main

from paperstack.records import load_results


def test_gpu_bench_bookkeeping_on_cpu_under_the_interpreter(monkeypatch):
    """The CUDA bench's measuring code, run on tiny shapes on the CPU (kernels interpreted):
    every baseline is timed, outputs are checked, the paper-number claims are formed."""
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        pytest.skip("on a GPU the bench runs compiled (test_cuda_bench_...)")
    from nf12 import gpu_bench

    shapes = [("tiny-a", 16, 256), ("tiny-b", 8, 128)]
    rows, config = gpu_bench.gpu_rows("cpu", shapes, budget_s=120, repeats=6, seed=0)
    assert [m["split"] for m in config["measured"]] == ["16x256", "8x128"]
    assert config["dfloat11"].startswith(("unavailable", "importable"))
    by_key = {(r.system, r.metric, r.split): r for r in rows}
    for split in ("16x256", "8x128"):
        assert by_key[("nf12", "gemv_matches_cublas", split)].value == 1.0
        assert by_key[("nf12-decode", "decode_matches_memcpy", split)].value == 1.0
        assert by_key[("nf12", "gemv_speedup_vs_bf16-triton-matched", split)].n == 6
        assert by_key[("nf12", "gemv_fraction_of_entropy_optimum", split)].value > 0
    # the Huffman baseline runs on the smallest shape only, bit-exact
    assert by_key[("nf12-decode", "huffman_matches_huffman-gpu-ours", "8x128")].value == 1.0
    assert by_key[("nf12-decode", "huffman_speedup_vs_huffman-gpu-ours", "8x128")].n == 6
    assert ("nf12-decode", "huffman_matches_huffman-gpu-ours", "16x256") not in by_key
    claims = {c.id: c for c in gpu_bench.claims_for(rows, "16x256", "8x128")}
    assert claims["gpu_outputs_match"].verdict == "held"
    assert claims["gpu_decode_bit_exact"].verdict == "held"
    assert set(claims) == {
        "gpu_outputs_match", "gpu_decode_bit_exact", "gpu_gemv_1_21x_matched_bf16",
        "gpu_gemv_1_35x_cublas", "gpu_gemv_71pct_entropy_optimum", "gpu_decode_3_3x_huffman",
    }  # fmt: skip


def test_gpu_bench_stops_at_its_budget_with_what_finished():
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        pytest.skip("CPU bookkeeping test")
    from nf12 import gpu_bench

    shapes = [("tiny", 8, 128), ("big", 4096, 4096)]
    _rows, config = gpu_bench.gpu_rows("cpu", shapes, budget_s=0.01, repeats=6, seed=0)
    assert [m["split"] for m in config["measured"]] == ["8x128"]
    assert config["skipped_for_budget"] == ["4096x4096"]


def test_budget_comes_from_the_environment(monkeypatch):
    from nf12.errors import Nf12Error
    from nf12.gpu_bench import budget_from_env

    monkeypatch.delenv("NF12_BENCH_BUDGET_S", raising=False)
    monkeypatch.setenv("GPU_BUDGET_S", "100")
    assert budget_from_env() == 100.0
    monkeypatch.setenv("NF12_BENCH_BUDGET_S", "70")
    assert budget_from_env() == 70.0
    monkeypatch.setenv("NF12_BENCH_BUDGET_S", "soon")
    with pytest.raises(Nf12Error, match="NF12_BENCH_BUDGET_S: not a number"):
        budget_from_env()


@pytest.mark.gpu
def test_cuda_bench_writes_every_baseline_and_the_gpu_claims(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("NF12_BENCH_BUDGET_S", "60")
    argv = ["bench", "--device", "cuda", "--quick", "--out", str(tmp_path), "--no-progress"]
    assert main(argv) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.row("nf12", "gemv_speedup_vs_cublas", "8192x28672").value > 0
    assert results.row("nf12", "gemv_speedup_vs_bf16-triton-matched", "8192x28672").value > 0
    assert results.row("nf12", "gemv_matches_cublas", "8192x28672").value == 1.0
    assert {c.id for c in results.claims} >= {
        "gpu_outputs_match", "gpu_gemv_1_21x_matched_bf16", "gpu_gemv_1_35x_cublas",
        "gpu_gemv_71pct_entropy_optimum",
    }  # fmt: skip
