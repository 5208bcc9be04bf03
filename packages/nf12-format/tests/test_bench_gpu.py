import pytest
from nf12.cli import main

from paperstack.records import load_results


@pytest.mark.gpu
def test_cuda_bench_writes_fused_gemv_vs_cublas_ratios(tmp_path):
    assert (
        main(["bench", "--device", "cuda", "--quick", "--repeats", "3", "--out", str(tmp_path)])
        == 0
    )
    row = load_results(tmp_path / "bench.json").row(
        "nf12-fused-gemv-vs-cublas", "speed_ratio_gemv_vs_bf16", "4096x4096"
    )
    assert row.value > 0
