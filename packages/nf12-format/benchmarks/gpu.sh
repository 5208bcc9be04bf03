#!/usr/bin/env bash
# nf12-format on a bare GPU machine, one command: the CUDA bench at batch 1 on Llama-3-8B/70B
# layer shapes (fused NF12 GEMV vs cuBLAS and the matched BF16 Triton kernel, packed decode vs
# memcpy and a GPU Huffman baseline, the fraction of the entropy-bound optimum, outputs checked
# in the same run). Writes bench.json and bench.md to $OUT (default: reports/nf12-format/gpu).
#
# Budget: GPU_BUDGET_S (100 s under tools/gpu-sweep; 480 s alone), counted from the prelude.
# The bench gets what is left less a margin (NF12_BENCH_BUDGET_S) and measures shapes in
# priority order while it lasts (the claim shape, Llama-3-70B down_proj, first), so it writes
# the shapes that finished rather than nothing. It autotunes the kernels only with >= 240 s;
# below that both NF12 and BF16 run one fixed tiling (the matched kernel). The gpu-marked tests
# run first only with RUN_GPU_TESTS=1 and enough budget (they compile every kernel variant).
#
#   GPU_BUDGET_S=100 OUT=/tmp/nf12 bash packages/nf12-format/benchmarks/gpu.sh
#   QUICK=1 bash packages/nf12-format/benchmarks/gpu.sh    # the first two shapes only
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" nf12-format \
  triton transformers safetensors numpy pydantic platformdirs rich

if [ "${RUN_GPU_TESTS:-0}" = "1" ] && [ "$(gpu_left)" -gt 300 ]; then
  start=$SECONDS
  gpu_tests $(( $(gpu_left) / 2 )) -k "not cuda_bench" || echo "gpu.sh: gpu tests failed (see $OUT/gpu-tests.txt)"
  echo "gpu.sh: tests took $((SECONDS - start)) s"
fi

left=$(gpu_left)
# Margin: python start-up and imports (~10 s), writing the report, the timeout's own grace.
export NF12_BENCH_BUDGET_S=$(( left - 20 ))
if [ "$NF12_BENCH_BUDGET_S" -lt 20 ]; then
  echo "gpu.sh: only ${left} s left of GPU_BUDGET_S=${GPU_BUDGET_S}; no bench" >&2
  exit 1
fi
quick=()
[ "${QUICK:-0}" = "1" ] && quick=(--quick)
start=$SECONDS
status=0
timeout $(( left - 3 )) "$PY" -m nf12.cli bench --device cuda --repeats 15 --no-progress \
  "${quick[@]}" --out "$OUT" || status=$?
echo "gpu.sh: bench took $((SECONDS - start)) s (budget ${NF12_BENCH_BUDGET_S} s, exit ${status}); results in $OUT/bench.json"
exit "$status"
