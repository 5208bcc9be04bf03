import pytest
from nf12.cli import main

from paperstack.records import load_results


@pytest.mark.gpu
def test_cuda_bench_writes_every_baseline_and_the_gpu_claims(tmp_path):
    pytest.importorskip("triton")
    argv = ["bench", "--device", "cuda", "--quick", "--out", str(tmp_path), "--no-progress"]
    assert main(argv) == 0
    results = load_results(tmp_path / "bench.json")
    for base in ("cublas", "bf16-triton", "bf16-triton-same-tiling"):
        assert results.row("nf12-triton", f"speedup_vs_{base}", "4096x14336-m1").value > 0
    assert results.row("nf12-triton", "fraction_of_entropy_optimum", "4096x4096-m1").value > 0
    assert {c.id for c in results.claims} == {
        "gpu_gemv_faster_than_matched_bf16", "gpu_gemv_faster_than_cublas",
        "gpu_decode_faster_than_huffman",
    }  # fmt: skip
