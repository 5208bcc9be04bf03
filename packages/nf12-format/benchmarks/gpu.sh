#!/usr/bin/env bash
# nf12-format on a bare GPU machine, one command: the gpu-marked tests (kernels compiled on CUDA,
# the quantizer on CUDA, no host sync on the hot path, >2^31-weight offsets), then the CUDA bench
# (fused GEMV/GEMM vs cuBLAS and the matched BF16 Triton kernel, decode vs memcpy and a GPU
# Huffman baseline, real layer shapes at batch 1, 2, 4, 8). Writes bench.json, bench.md and the
# test log to $OUT when it is set (default: reports/nf12-format/gpu).
#
# Uses the machine's own torch/triton/transformers (tools/gpu-prelude.sh installs shared/ and
# this package with `pip install --no-deps`, or runs them from the checkout where pip cannot
# build offline). Needs no network. Budget: under 8 minutes on an H200 (tuning included).
#
#   bash packages/nf12-format/benchmarks/gpu.sh            # full
#   QUICK=1 bash packages/nf12-format/benchmarks/gpu.sh    # two shapes, batches 1 and 4
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" nf12-format \
  triton transformers safetensors numpy scipy pydantic platformdirs rich

start=$SECONDS
# The bench runs next: its own test (test_bench_gpu) is left out here to save the time.
gpu_tests 200 -k "not cuda_bench" || { echo "gpu.sh: gpu tests failed"; exit 1; }
echo "gpu.sh: tests took $((SECONDS - start)) s"

quick=()
[ "${QUICK:-0}" = "1" ] && quick=(--quick)
start=$SECONDS
timeout 270 "$PY" -m nf12.cli bench --device cuda --repeats 5 --no-progress "${quick[@]}" --out "$OUT"
echo "gpu.sh: bench took $((SECONDS - start)) s; results in $OUT/bench.json and $OUT/bench.md"
